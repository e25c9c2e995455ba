"""Typed command-line flags, checked when the command line is parsed (exit 2 with a one-line message
naming the flag and its allowed range), and the argument groups several commands share. Imports no
torch (decode_config.py, device.py's names), so a command's --help need not."""
from __future__ import annotations

import dataclasses
import math

from ..heads.decode_config import SCORES, DecodeConfig
from ..model.device import DEVICE_CHOICES
from .checks import bounded as number  # every numeric flag bounded (checks.py)


def default_of(cls, name):
    """The default of field `name` of dataclass `cls` (the one place defaults live)."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()


# ---------------------------------------------------------------- typed flags (checked at parse time)


POS_INT = number(int, 1)  # >= 1
NONNEG_INT = number(int, 0)  # >= 0
NONNEG = number(float, 0.0)  # >= 0
POSITIVE = number(float, 0.0, lo_open=True)  # > 0
FRACTION = number(float, 0.0, 0.999999, what="a fraction in [0, 1)")  # [0, 1)
UNIT = number(float, 0.0, 1.0, lo_open=True, what="a number in (0, 1]")  # (0, 1]
PORT = number(int, 0, 65535, what="a port number in [0, 65535]")


def add_decode_args(p):
    d = lambda name: default_of(DecodeConfig, name)  # noqa: E731
    g = p.add_argument_group("decoding (Algorithm 1)")
    g.add_argument("--beam", type=POS_INT, default=d("beam"), help="beam width B per hash map (default: B = k)")
    g.add_argument("--exact", action="store_true", help="widen the beam until the top-k is certified exact")
    g.add_argument("--score", choices=sorted(SCORES), default=d("score"),
                   help="gamma: how the m scores combine (default %(default)s)")
    g.add_argument("--exhaustive", action="store_true", help="score every id (reference; slow)")


def add_device_arg(p, default="auto"):
    p.add_argument("--device", default=default, help=f"{DEVICE_CHOICES} (default %(default)s: CUDA when available)")


def decode_config(args) -> DecodeConfig:
    return DecodeConfig(beam=args.beam, exact=args.exact, score=args.score, exhaustive=args.exhaustive)


def finite(x: float) -> float | None:
    return x if math.isfinite(x) else None
