"""Where the library's messages go: one stderr handler on the `superbloom` logger (CLI, server workers).

The library only logs (`logging.getLogger(__name__)`, INFO for what a run reports, e.g. "model: ...
parameters", "resuming from ..."); it never prints and installs no handler, so a program that imports
it decides what to show. The command line (`superbloom CMD --log-level LEVEL`, INFO by default) and
each worker process of `superbloom serve --workers N` call `configure` to show them as before: the
message alone, one line each, on stderr (stdout stays for the results a command writes). Records
still propagate to the root logger, so an application's own handlers (and pytest's caplog) see them.
"""
from __future__ import annotations

import logging
import sys

LEVELS = ("debug", "info", "warning", "error")  # --log-level's choices, quietest last
LOGGER = "superbloom"


class _Stderr(logging.StreamHandler):
    """A StreamHandler writing to whatever sys.stderr is at each record (a redirected or captured stream
    too), not to the one of the moment it was made."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _):  # StreamHandler.__init__ assigns it; the property above answers instead
        pass


def configure(level: str = "info") -> logging.Logger:
    """Install the one stderr handler on the `superbloom` logger (replacing one installed before) and
    set its level: one of LEVELS (ValueError otherwise). -> the logger."""
    if level.lower() not in LEVELS:
        raise ValueError(f"--log-level: expected one of {', '.join(LEVELS)}, got {level!r}")
    logger = logging.getLogger(LOGGER)
    for h in [h for h in logger.handlers if isinstance(h, _Stderr)]:
        logger.removeHandler(h)
    handler = _Stderr()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    return logger


REDIRECTED_INTERVAL = 30.0  # seconds between a progress bar's redraws where stderr is no terminal


def progress_bar(iterable=None, *, progress: bool = True, **kw):
    """A tqdm bar on stderr (tqdm.auto: a widget in a notebook), shown when `progress`. Where stderr is
    no terminal (a log file, CI, nohup) it is redrawn at most every REDIRECTED_INTERVAL seconds: a line
    per half minute in the log, not ten a second."""
    from tqdm.auto import tqdm

    if "notebook" not in tqdm.__module__ and not getattr(sys.stderr, "isatty", lambda: False)():
        kw.setdefault("mininterval", REDIRECTED_INTERVAL)
    return tqdm(iterable, disable=not progress, **kw)
