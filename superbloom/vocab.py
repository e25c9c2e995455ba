"""Vocabulary: opaque string ids <-> contiguous ints, with training counts.

Ids are numbered by decreasing training frequency (ties: first appearance), so id 0 is the most
frequent. On disk: `vocab.txt` (one id per line, line i = int id i) and `counts.npy` (int64).
The string -> int dictionary is built lazily: training never needs it, predict and serve do.

Some sources URL-encode their ids (Wikispeedia: `%C3%85land`); `display` decodes them for people,
and `lookup` accepts either form.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence
from urllib.parse import unquote

import numpy as np

from .files import read_lines, write_lines


class Vocab:
    def __init__(self, strings: Sequence[str], counts: np.ndarray):
        if len(strings) != len(counts):
            raise ValueError(f"vocabulary has {len(strings)} strings but {len(counts)} counts")
        self.strings = list(strings)
        self.counts = np.asarray(counts, dtype=np.int64)
        self._index: dict[str, int] | None = None
        self._aliases: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.strings)

    @property
    def index(self) -> dict[str, int]:
        if self._index is None:
            self._index = {s: i for i, s in enumerate(self.strings)}
        return self._index

    @property
    def aliases(self) -> dict[str, int]:
        """Display form -> int, for ids whose display form differs from the stored one."""
        if self._aliases is None:
            self._aliases = {}
            for i, s in enumerate(self.strings):
                if "%" in s and (d := unquote(s)) != s:
                    self._aliases.setdefault(d, i)
        return self._aliases

    def get(self, key: str) -> int | None:
        i = self.index.get(key)
        return self.aliases.get(key) if i is None else i

    def lookup(self, keys: Iterable[str]) -> tuple[np.ndarray, list[str]]:
        """Map string ids (stored or display form) to ints -> (known ints in order, unknown strings)."""
        known, unknown = [], []
        for k in keys:
            i = self.get(k)
            (unknown.append(k) if i is None else known.append(i))
        return np.asarray(known, dtype=np.int64), unknown

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.strings[i] for i in ids]

    def display(self, i: int) -> str:
        return unquote(self.strings[i])

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        write_lines(directory / "vocab.txt", self.strings)
        np.save(directory / "counts.npy", self.counts)

    @classmethod
    def load(cls, directory: str | Path) -> "Vocab":
        directory = Path(directory)
        strings = read_lines(directory / "vocab.txt")
        return cls(strings, np.load(directory / "counts.npy"))

