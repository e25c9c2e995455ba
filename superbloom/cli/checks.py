"""Bounds before allocation: numeric flag ranges, the thread cap, memory estimates, endless inputs.

The ranges every numeric flag is held to, the thread cap, and a memory estimate from the flags and
the data that a command compares with the machine before it allocates.

A hostile or mistyped number (`--d 1000000`, `--samples 100000000`, `--lr 1e300`, `--threads 10000`,
`synth --ids 100000000000`) must end in one line naming the flag and what was allowed, not in an
allocation that runs for minutes, an overflow traceback or a segfault. Three
layers, all torch-free so that parsing never imports torch:

- argparse types (`bounded`, `THREADS` and the named ranges below): finite numbers inside float32
  and int32 (int64 where a count may be larger), checked when the command line is parsed;
- `memory_estimate(...)` -> the bytes a training run needs at least (parameters, gradients and
  optimizer state, batch activations, sampled negatives, hash maps), each part named by the flag that
  drives it; `refuse_over_memory` compares the total with `available_bytes()` (or --memory-limit) and
  raises one ValueError naming the largest part's flag and the estimate;
- `regular_input(path)`: inputs that are devices (/dev/zero: endless) or sockets are refused before
  a byte is read.

The estimate is a lower bound (only what the run certainly allocates), so a refusal is never wrong
about a run that would have fitted.
"""
from __future__ import annotations

import argparse
import math
import os
import stat
import sys
from pathlib import Path

from .._bounds import available_bytes, cores, format_bytes  # noqa: F401 (re-exported: the library holds sizes to them too)

INT32_MAX = 2**31 - 1  # counts, sizes, seeds, steps
INT64_COUNT_MAX = 2**48  # counts that may exceed int32 (synth --links): still finite arithmetic
FLOAT32_MAX = 3.4028234663852886e38  # every float flag is a finite float32

__all__ = ["INT32_MAX", "FLOAT32_MAX", "bounded", "THREADS", "cores", "available_bytes", "parse_size",
           "memory_estimate", "refuse_over_memory", "refuse_training_memory", "format_bytes", "regular_input", "check_paths", "refuse_synth_memory", "refuse_members_memory",
           "MEMORY_LIMIT"]


def bounded(kind, lo=None, hi=None, lo_open=False, what=None):
    """An argparse type: `kind` (int / float) within [lo, hi] (lo excluded if lo_open); floats finite;
    hi defaults to INT32_MAX for ints and FLOAT32_MAX for floats, so no flag takes an unbounded number.
    Below lo: "expected a number >= lo" (> lo if lo_open), above: "expected a number <= hi" (or
    `what`, for both)."""
    top = (INT32_MAX if kind is int else FLOAT32_MAX) if hi is None else hi

    def parse(text: str):
        try:
            v = kind(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}")
        if kind is float and not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        if lo is not None and (v <= lo if lo_open else v < lo):
            raise argparse.ArgumentTypeError(f"expected {what or f'a number {_gt(lo_open)} {_num(lo)}'}, got {text}")
        if v > top:
            raise argparse.ArgumentTypeError(f"expected {what or f'a number <= {_num(top)}'}, got {text}")
        return v
    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def _gt(lo_open: bool) -> str:
    return ">" if lo_open else ">="


def _num(x) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"


# named ranges for the flags whose sane range is far below the type's (one place, one meaning each)
LR = bounded(float, 0.0, 100.0, lo_open=True)  # --lr: a peak learning rate
CLIP = bounded(float, 0.0, 1e6)  # --clip: a gradient norm, 0: none
WEIGHT_DECAY = bounded(float, 0.0, 100.0)  # --weight-decay
SECONDS = bounded(float, 0.0, 1e9)  # --time-budget, --checkpoint-every: up to ~31 years
EPOCHS = bounded(float, 0.0, 1e9)  # --epochs
WIDTH = bounded(int, 1, 65_536)  # --d, --d-ff-like widths of one vector
FF_WIDTH = bounded(int, 1, 1 << 20)  # --d-ff
LAYERS = bounded(int, 1, 1024)  # --layers
HEADS = bounded(int, 1, 4096)  # --heads, --pool-heads
HASHES = bounded(int, 1, 1024)  # --m
LENGTH = bounded(int, 2, 1 << 20)  # --segment, set / sequence lengths
POSITIONS = bounded(int, 0, 1 << 20)  # --positions
BATCH = bounded(int, 1, 1 << 24)  # --batch-size
TEMPERATURE = bounded(float, 0.0, 1e6, lo_open=True)  # expand --temperature, a contrastive temperature
BIG_COUNT = bounded(int, 1, INT64_COUNT_MAX)  # synth --links
WORKERS = bounded(int, 1, 256)  # serve --workers: processes
LOSS_WEIGHT = bounded(float, 0.0, 1e6)  # a loss term's weight next to another's (embed-train --uniformity-weight)


def _threads(text: str) -> int:
    """--threads: 0 (torch's default) or a count, capped at the cores with a warning: 10,000 threads
    segfault torch's pool or hang a data loader; more threads than cores only spin."""
    n = bounded(int, 0)(text)
    c = cores()
    if n > c:
        if n not in _WARNED:
            _WARNED.add(n)
            print(f"superbloom: warning: --threads {n} is more than this machine's {c} cores; using {c}",
                  file=sys.stderr)
        return c
    return n


_WARNED: set[int] = set()
_threads.__name__ = "int"
THREADS = _threads


# ---------------------------------------------------------------- memory

_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(text: str) -> int:
    """'4GB', '500MB', '2GiB', '123456' -> bytes (ValueError naming what was expected)."""
    t = text.strip().lower()
    num = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = t[len(num):].strip()
    try:
        v = float(num)
    except ValueError:
        v = float("nan")
    if unit not in _UNITS or not math.isfinite(v) or v <= 0:
        raise ValueError(f"expected a size such as 4GB, 500MB or 2GiB, got {text!r}")
    return int(v * _UNITS[unit])


def _memory_limit(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


_memory_limit.__name__ = "size"
MEMORY_LIMIT = _memory_limit  # the type of a trainer's --memory-limit


def memory_estimate(*, n_ids: int, alpha: int, m: int, d: int, d_ff: int, layers: int, heads: int,
                    batch: int, segment: int, samples: int | None = None, state_per_param: int = 1) -> dict:
    """Bytes a training run allocates at least, by part -> {flag that drives it: bytes}.

    n_ids ids hashed m ways into ceil(n_ids / alpha) buckets (alpha 1: one row per id). Float32
    throughout:
    - parameters: the input table (m * buckets rows of d) and the encoder (4 d^2 attention +
      2 d d_ff feed-forward per layer), times (1 + state_per_param): the weights and their gradient
      (every optimizer's state on top is not counted: AdamW's two moments would double it);
    - activations: a batch of `segment` positions through `layers` layers (the residual stream, the
      feed-forward hidden and the attention weights, kept for the backward pass);
    - sampled negatives: `samples` rows of d gathered per step and their logits for the batch;
    - hash maps: m int32 buckets per id and the inverse index."""
    buckets = -(-n_ids // max(alpha, 1))
    table = m * buckets * d
    encoder = layers * (4 * d * d + 2 * d * d_ff)
    params = 4 * (table + encoder) * (1 + state_per_param)
    acts = 4 * batch * segment * layers * (2 * d + d_ff + heads * segment)
    parts = {"--d": params, "--batch-size": acts, "hash maps (--m)": 8 * m * n_ids}
    if samples:
        parts["--samples"] = 4 * samples * (d + batch)
    return parts


def refuse_over_memory(parts: dict, limit: int | None, command: str, values: dict, limit_flag: bool = True) -> None:
    """ValueError (one line) when the estimate `parts` ({flag: bytes}) exceeds `limit` bytes (None:
    the machine's available memory; unknown: no check): the total, the largest part's flag and value
    (`values`: flag -> the number given), and what to change."""
    given_limit = limit is not None
    limit = available_bytes() if limit is None else limit
    total = sum(parts.values())
    if limit is None or total <= limit:
        return
    flag = max(parts, key=parts.get)
    given = f" {values[flag]}" if flag in values else ""
    raise ValueError(f"{flag}{given}: {command} needs at least {format_bytes(total)} of memory "
                     f"({flag}: {format_bytes(parts[flag])}), more than "
                     f"{'--memory-limit ' if given_limit else 'the '}{format_bytes(limit)}"
                     f"{'' if given_limit else ' available'}; "
                     f"lower {flag.split(' ')[-1].strip('()')}{' (or set --memory-limit)' if limit_flag else ''}")


def refuse_training_memory(command: str, data, hash_cfg, model_cfg, batch: int, segment: int,
                           samples: int | None, limit: int | None) -> None:
    """A trainer's check before it allocates: memory_estimate from the dataset's id count (its
    meta.json; a folder without one is left to the trainer's own message), the hash config resolved
    for it, the model's shape and the batch -> refuse_over_memory."""
    import json

    meta = Path(data) / "meta.json"
    try:
        n_ids = int(json.loads(meta.read_text()).get("ids", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return  # missing or unreadable: the trainer names the file
    hashing = hash_cfg.resolve(n_ids)
    parts = memory_estimate(n_ids=n_ids, alpha=hashing.alpha, m=hashing.m, d=model_cfg.d, d_ff=model_cfg.d_ff,
                            layers=model_cfg.layers, heads=model_cfg.heads, batch=batch, segment=segment,
                            samples=samples)
    refuse_over_memory(parts, limit, command, {"--d": model_cfg.d, "--batch-size": batch, "--samples": samples})


def refuse_members_memory(members: int, data, hash_cfg, model_cfg, limit: int | None) -> None:
    """train --members K: the ensemble is loaded as one (at the end of training, and by every predict or
    serve), K members' weights, hash maps and vocabularies at once; refuse a K whose members cannot all
    be held in the memory available (or --memory-limit), before the first one trains."""
    import json

    try:
        n_ids = int(json.loads((Path(data) / "meta.json").read_text()).get("ids", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return  # missing or unreadable: the trainer names the file
    hashing = hash_cfg.resolve(n_ids)
    parts = memory_estimate(n_ids=n_ids, alpha=hashing.alpha, m=hashing.m, d=model_cfg.d, d_ff=model_cfg.d_ff,
                            layers=model_cfg.layers, heads=model_cfg.heads, batch=1, segment=1, state_per_param=0)
    one = parts["--d"] + parts["hash maps (--m)"] + 64 * n_ids  # the weights, the maps, the vocabulary's strings
    refuse_over_memory({"--members": members * one}, limit, "train", {"--members": members})


def refuse_synth_memory(ids: int, limit: int | None = None) -> None:
    """synth keeps per-id tables (about 25 bytes per id: weights, cumulative weights, guide cells,
    topics, drawn flags) plus one chunk of about 2M links: refuse --ids beyond the machine."""
    refuse_over_memory({"--ids": 24 * ids + 2_000_000 * 24}, limit, "synth", {"--ids": ids}, limit_flag=False)


# ---------------------------------------------------------------- inputs


# the destinations of path arguments: typed as "", each would mean the current folder or "none"
PATH_DESTS = ("model", "data", "input", "inputs", "out", "output", "allow", "deny", "labels", "embed", "file",
              "new_ids", "corpus", "wikispeedia", "compare")


OUTPUT_DESTS = ("out", "output")  # written, not read: the guarded writer checks those


def check_paths(args) -> None:
    """ValueError naming the argument, before any work, when a path typed on the command line is ""
    (a shell variable left unset: it would mean the current folder, or silently "none"), or when one
    that is read is a device or a socket (/dev/zero: a read that never ends and fills the memory)."""
    for dest in PATH_DESTS:
        if dest not in getattr(args, "given", ()) or not hasattr(args, dest):
            continue
        value = getattr(args, dest)
        values = value if isinstance(value, list) else [value]
        name = dest.upper() if dest in ("model", "data", "input", "inputs", "new_ids", "corpus") else \
            "--" + dest.replace("_", "-")
        for v in values:
            if v == "":
                raise ValueError(f"{name}: an empty path; give a file or directory")
            if isinstance(v, str) and dest not in OUTPUT_DESTS:
                regular_input(v, name)


def regular_input(path: str | os.PathLike, flag: str = "input") -> None:
    """Refuse an input that is a device (/dev/zero, /dev/urandom: endless) or a socket, before a byte
    is read. Files, directories and pipes (a shell's <(zcat ...)) pass; missing paths are left to the
    reader's own message."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
        raise ValueError(f"{flag} {path}: a device or socket, not a file (it may never end); give a file, "
                         "a directory or a pipe")


def check_extras(args) -> None:
    """MissingExtra (one line: what needs which extra, and the commands that install it) before any work,
    for every optional dependency the command line asks for (EXTRA_GATES)."""
    for command, dest, check in EXTRA_GATES:
        if command in (None, args.command):
            value = True if dest is None else getattr(args, dest, None)
            if value:
                check(value)


def _serve(_) -> None:
    from .._extras import require_extra

    require_extra("serve", "the HTTP server (superbloom serve)")


def _log_to(specs) -> None:
    from ..training.callbacks import check_spec

    for spec in specs:
        check_spec(spec)


def _outofcore(_) -> None:
    from .._extras import require_extra

    require_extra("outofcore", "prepare --memory-limit (out-of-core prepare)")


def _baselines(value) -> None:
    from ..evaluation.config import require_baselines

    require_baselines(tuple(b for b in str(value).split(",") if b and b != "none"))


# (command, or None: every command; the flag's destination, or None: the command itself; the check of the
# extra it needs, given the flag's value): every path of the command line that needs an optional extra
EXTRA_GATES = [
    ("serve", None, _serve),
    (None, "log_to", _log_to),  # train, embed-train, textclass-train --log-to tensorboard:/mlflow:
    ("eval", "baselines", _baselines),  # --baselines item2vec, als
    ("prepare", "memory_limit", _outofcore),
]
