"""Small file helpers: every write goes to a temporary name and is renamed into place, so a crash
or a kill never leaves a half-written file under the final name."""
from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Iterable, Iterator


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to `path`; rename it onto `path` if the block succeeds."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def save_json(path: str | Path, obj) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def json_loads(text: str | bytes):
    """json.loads with the nesting bounded: a document nested deeper than the parser can follow (about
    Python's recursion limit, 1,000 levels of arrays and objects; no file of ours nests more than a few)
    is a json.JSONDecodeError like any other invalid JSON, which every reader already reports as one
    line naming the file, never a RecursionError."""
    try:
        return json.loads(text)
    except RecursionError:
        doc = text if isinstance(text, str) else ""
        raise json.JSONDecodeError(f"nested deeper than {sys.getrecursionlimit():,} levels of arrays and objects",
                                   doc, 0) from None


def load_json(path: str | Path):
    return json_loads(Path(path).read_text(encoding="utf-8"))


def write_lines(path: str | Path, strings: Iterable[str]) -> None:
    """One string per line."""
    strings = list(strings)
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(strings))
        if strings:
            f.write("\n")


def read_lines(path: str | Path) -> list[str]:
    with open(path, encoding="utf-8", newline="\n") as f:
        return f.read().split("\n")[:-1]
