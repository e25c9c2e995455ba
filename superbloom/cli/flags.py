"""Typed command-line flags, checked when the command line is parsed (exit 2 with a one-line message
naming the flag and its allowed range), and the argument groups several commands share. Imports no
torch (decode_config.py, device.py's names), so a command's --help need not."""
from __future__ import annotations

import argparse
import dataclasses
import math

from ..heads.decode_config import DecodeConfig
from ..model.device import DEVICE_CHOICES
from .checks import bounded as number  # every numeric flag bounded (checks.py)
from .checks import MEMORY_LIMIT, THREADS


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
    """The decoding options (DecodeConfig's fields, destinations decode.*), the same on every command."""
    from .settings import add_config

    add_config(p.add_argument_group("decoding (Algorithm 1)"), DecodeConfig, "decode")


def add_device_arg(p, default="auto"):
    p.add_argument("--device", default=default, help=f"{DEVICE_CHOICES} (default %(default)s: CUDA when available)")


def add_log_to_arg(p):
    """--log-to SCHEME:TARGET (repeatable): training callbacks (training/callbacks.py), built by log_to_callbacks."""
    p.add_argument("--log-to", action="append", default=[], metavar="SCHEME:TARGET",
                   help="also send the metrics.jsonl records to tensorboard:DIR (event files) or mlflow:URI (a "
                        "tracking URI such as sqlite:///mlruns.db); repeatable; needs the [track] extra")


def log_to_callbacks(args) -> list:
    """The callbacks of --log-to (a bad spec: ValueError naming the flag; a missing package: MissingExtra)."""
    from ..training.callbacks import from_spec
    return [from_spec(spec) for spec in args.log_to]


def decode_config(args) -> DecodeConfig:
    return DecodeConfig(**{f: getattr(args, f"decode.{f}") for f in DecodeConfig.__dataclass_fields__})


def finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def add_threads_arg(p, default=0):
    """--threads: torch CPU threads, the one meaning it has on every command that runs torch."""
    p.add_argument("--threads", type=THREADS, default=default,  # more than the cores: the cores, with a warning
                   help="torch CPU threads, 0: torch's default (default %(default)s)")


def add_quiet_arg(p):
    """--quiet: no progress bar (the one meaning it has on every command)."""
    p.add_argument("--quiet", action="store_true", help="no progress bar")


# ---------------------------------------------------------------- renamed flags


class _Deprecated(argparse.Action):
    """An old flag name kept working: stores into the new flag's destination and says, once, on
    stderr, which name to use. Hidden from --help (DEPRECATED lists them)."""

    def __init__(self, option_strings, dest, new="", **kwargs):
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        import sys

        print(f"{parser.prog}: warning: {option_string} is deprecated, use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


# (command, old flag) -> the new flag: old names with another meaning elsewhere (tests/test_cli_flags.py)
DEPRECATED: dict[tuple[str, str], str] = {}


def deprecated_alias(p, old: str, new: str) -> None:
    """Keep `old` working on `p` as a hidden, warning alias of its flag `new` (added before this call)."""
    opt = next(o for o in p.options if new in o.flags)  # the command's recorded options (parser.py)
    p.add_argument(old, action=_Deprecated, new=new, dest=opt.dest, type=opt.type, choices=opt.choices,
                   nargs=opt.nargs, help=argparse.SUPPRESS)
    DEPRECATED[(p.prog.split(" ", 1)[-1], old)] = new


def json_stdout(on: bool):
    """With --json: a block whose printed lines (a trainer's progress) go to stderr, so that stdout
    holds the command's one JSON object only."""
    import contextlib
    import sys

    return contextlib.redirect_stdout(sys.stderr) if on else contextlib.nullcontext()


# ---------------------------------------------------------------- a command that answers queries with a model


def add_model_command(sub, name: str, help: str, description: str, model_help: str = "model directory"):
    """The parser of a command that loads a model directory (its first positional, `model`) and answers
    queries with it (similar-ids, vectors, embed, similar, classify); its own flags come next, then
    finish_model_command."""
    p = sub.add_parser(name, help=help, description=description)
    p.add_argument("model", help=model_help)
    return p


def finish_model_command(p, func, json_help: str | None = None) -> None:
    """The flags such a command ends with, in this order: --json, --device, --threads; and `func`, what it runs."""
    p.add_argument("--json", action="store_true", help=json_help)
    add_device_arg(p)
    add_threads_arg(p)
    p.set_defaults(func=func)


def add_trainer_tail(p) -> None:
    """The flags train and embed-train end with, in this order: --memory-limit, --quiet, --log-to, --json."""
    p.add_argument("--memory-limit", type=MEMORY_LIMIT, default=None, metavar="SIZE",
                   help="refuse a run whose memory estimate exceeds SIZE (4GB, 500MB, 2GiB) before it allocates "
                        "(default: the machine's available memory)")
    add_quiet_arg(p)
    add_log_to_arg(p)
    p.add_argument("--json", action="store_true", help="print one JSON object: the model directory and its size "
                   "(the run's lines go to stderr)")
