"""Small file helpers: every write goes to a temporary name and is renamed into place, so a crash
or a kill never leaves a half-written file under the final name."""
from __future__ import annotations

import contextlib
import json
import os
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


def load_json(path: str | Path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


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
