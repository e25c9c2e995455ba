"""Bad arguments of the public Python API, and the machine's bounds that sizes are held to.

Every public function and method refuses a bad argument with one exception type, `ArgumentError`
(a ValueError: `except ValueError` keeps working), whose `argument` names the parameter and whose
message says what was expected and what was given:

    >>> model.predict(["Jazz"], k=-1)
    ArgumentError: k: expected an integer >= 1, got -1

The checks below raise it; they are called at the top of a public function, before any work. Sizes
a caller may ask for beyond what exists (k beyond the vocabulary) are clamped where they are used,
not refused here; threads beyond the cores are clamped with a warning (`threads`). cores() and
available_bytes() are what the command line's checks (cli/checks.py) and the library's own
refusals compare sizes with. No torch here: the command line imports it to parse flags.
"""
from __future__ import annotations

import logging
import numbers
import os
import re
from pathlib import Path

log = logging.getLogger("superbloom")


class ArgumentError(ValueError):
    """A bad argument of the public Python API: `argument` names the parameter; the message reads
    "ARGUMENT: expected ..., got ..." (or "LABEL: ...", where a label names a part of it, e.g. the
    "context 3" of contexts)."""

    def __init__(self, argument: str, message: str, label: str | None = None, verbatim: bool = False):
        self.argument = argument
        super().__init__(message if verbatim else f"{label or argument}: {message}")


def bad(argument: str, message: str) -> ArgumentError:
    """An ArgumentError naming `argument` whose message, which names it already ("d must be >= 1, got
    0"), is kept as it is: what a config's __post_init__ raises."""
    return ArgumentError(argument, message, verbatim=True)


def shown(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def integer(name: str, value, lo: int | None = None, hi: int | None = None) -> int:
    """`value` as an int within [lo, hi] (a bool, a float or a string is refused, a NumPy integer
    accepted) -> the int; ArgumentError naming `name` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentError(name, f"expected an integer{_range(lo, hi)}, got {shown(value)}")
    v = int(value)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ArgumentError(name, f"expected an integer{_range(lo, hi)}, got {v:,}")
    return v


def number(name: str, value, lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> float:
    """`value` as a finite float within [lo, hi] (lo excluded if lo_open) -> the float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentError(name, f"expected a number, got {shown(value)}")
    v = float(value)
    low = lo is not None and (v <= lo if lo_open else v < lo)
    if v != v or v in (float("inf"), float("-inf")) or low or (hi is not None and v > hi):
        bounds = " ".join(b for b in ((f"{'>' if lo_open else '>='} {lo:g}" if lo is not None else ""),
                                      (f"<= {hi:g}" if hi is not None else "")) if b)
        raise ArgumentError(name, f"expected a finite number{' ' + bounds if bounds else ''}, got {v!r}")
    return v


def _range(lo, hi) -> str:
    if lo is not None and hi is not None:
        return f" in [{lo:,}, {hi:,}]"
    if lo is not None:
        return f" >= {lo:,}"
    return f" <= {hi:,}" if hi is not None else ""


def flag(name: str, value) -> bool:
    """`value` as a bool (True / False, or a NumPy bool) -> the bool."""
    if not (isinstance(value, bool) or type(value).__name__ == "bool_"):  # NumPy's bool, without importing NumPy
        raise ArgumentError(name, f"expected True or False, got {shown(value)}")
    return bool(value)


def instance(name: str, value, kind: type | tuple[type, ...], what: str | None = None):
    """`value` itself when it is a `kind` -> value; ArgumentError naming `name` and `what` otherwise."""
    if not isinstance(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        raise ArgumentError(name, f"expected {what or ' or '.join(k.__name__ for k in kinds)}, got {shown(value)}")
    return value


def one_of(name: str, value, choices) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ArgumentError(name, f"expected one of {', '.join(map(str, choices))}, got {shown(value)}")
    return value


def path(name: str, value) -> Path:
    """A file-system path (str or os.PathLike, not empty) -> Path."""
    if not isinstance(value, (str, os.PathLike)) or str(value) == "":
        raise ArgumentError(name, f"expected a path (a str or os.PathLike), got {shown(value)}")
    return Path(value)


def device(name: str, value) -> str:
    """A device name: auto, cpu, cuda or cuda:N -> it (whether that device exists is the loader's to say)."""
    if not isinstance(value, str) or not re.fullmatch(r"auto|cpu|cuda(:\d+)?", value):
        raise ArgumentError(name, f"expected auto, cpu, cuda or cuda:N, got {shown(value)}")
    return value


def id_list(name: str, value) -> list[str]:
    """A list (any iterable but a string) of string ids -> list[str]. A string alone is refused: it
    would be read as its characters ("Paris" as P, a, r, i, s)."""
    if isinstance(value, (str, bytes)):
        raise ArgumentError(name, f"expected a list of string ids, got the string {shown(value)} (one id: "
                                  f"[{shown(value)}])")
    try:
        ids = list(value)
    except TypeError:
        raise ArgumentError(name, f"expected a list of string ids, got {shown(value)}") from None
    bad = next((x for x in ids if not isinstance(x, str)), None)
    if bad is not None:
        raise ArgumentError(name, f"expected a list of string ids, got an element {shown(bad)} "
                                  f"({type(bad).__name__})")
    return ids


def contexts(value, name: str = "contexts"):
    """A list (any iterable) of contexts -> it; a string, or one context of strings, is refused naming
    `name` (its elements would be read as contexts: "Jazz" as J, a, z, z)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ArgumentError(name, f"expected a list of contexts (lists of string ids), got {shown(value)}")
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], str):
        raise ArgumentError(name, f"expected a list of contexts, got one context {shown(value)} (a list of one: "
                                  f"[{shown(value)}])")
    return value


def cores() -> int:
    """CPU cores this process may run on (its affinity where the OS tells, else os.cpu_count())."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def threads(value, name: str = "threads") -> int:
    """A torch thread count: 0 (torch's default) or a count, clamped to the cores with a warning on
    the `superbloom` logger (a million threads exhaust the process and segfault torch's pool; more
    threads than cores only spin) -> the count to use."""
    n = integer(name, value, 0)
    c = cores()
    if n > c:
        log.warning(f"{name}={n:,} is more than this machine's {c} cores; using {c}")
        return c
    return n


def available_bytes() -> int | None:
    """Memory the machine can give now: MemAvailable of /proc/meminfo, else total physical memory,
    else None (unknown: no refusal)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def format_bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{int(n)} bytes"


def fits_memory(name: str, needed: int, what: str, hint: str) -> None:
    """ArgumentError naming `name` when `needed` bytes (for `what`) exceed the memory available now
    (unknown: no refusal); `hint` says what to ask instead."""
    avail = available_bytes()
    if avail is not None and needed > avail:
        raise ArgumentError(name, f"{what} needs about {format_bytes(needed)}, more than the "
                                  f"{format_bytes(avail)} available; {hint}")


def within_ranges(config, names) -> None:
    """Each named setting of the dataclass `config` within the range its `setting(range=...)` declares (the
    range its flag allows, cli/settings.py), else an ArgumentError naming it: what a config.json edited by
    hand is held to on load (layers = 10**7 would hang, d = 10**9 fail allocating)."""
    import dataclasses

    for f in dataclasses.fields(config):
        if f.name not in names:
            continue
        lo, hi = (f.metadata.get("setting") or {}).get("range") or (None, None)
        value = getattr(config, f.name)
        if lo is not None and value < lo or hi is not None and value > hi:
            span = f"between {lo:,} and {hi:,}" if hi is not None else f">= {lo:,}"
            raise ArgumentError(f.name, f"{f.name} must be {span}, got {value}", verbatim=True)
