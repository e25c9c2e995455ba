"""Vocabulary: opaque string ids <-> contiguous ints, with training counts.

Ids are numbered by decreasing training frequency (ties: first appearance), so id 0 is the most
frequent. On disk: `vocab.txt` (one id per line, line i = int id i) and `counts.npy` (int64).
The string -> int dictionary is built lazily: training never needs it, predict and serve do.

Some sources URL-encode their ids (Wikispeedia: `%C3%85land`) or write spaces as underscores
(`Miles_Davis`); `display` decodes them for people, and `get` / `lookup` accept what people see and
type: the stored id, its URL-decoded form, and either with spaces for underscores or underscores for
spaces (`Miles Davis`, `Åland Islands`, `Miles%20Davis`). An exact stored id always wins.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..storage.files import read_lines
from ..storage.loading import LoadError, check_array, load_array, readable
from .mapped_vocab import MappedStrings, mapped_strings
from .writer import write_vocabulary


def canonical(key: str) -> str:
    """The form ids are compared in when not found as stored: URL-decoded, spaces as underscores."""
    return (unquote(key) if "%" in key else key).replace(" ", "_")


class Vocab:
    def __init__(self, strings: Sequence[str], counts: np.ndarray):
        if len(strings) != len(counts):
            raise ValueError(f"vocabulary has {len(strings)} strings but {len(counts)} counts")
        self.strings = strings if isinstance(strings, MappedStrings) else list(strings)
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
        """Other forms -> int: the display (URL-decoded) and `canonical` forms of the ids whose forms
        differ from the stored one (the most frequent id wins a clash). Built once, with Arrow kernels
        finding those ids: a Python string is made only for the ids that contain '%' or ' '."""
        if self._aliases is None:
            strings = (self.strings.array if isinstance(self.strings, MappedStrings)
                       else pa.array(self.strings, pa.large_string()))
            special = pc.or_(pc.match_substring(strings, "%"), pc.match_substring(strings, " "))
            aliases: dict[str, int] = {}
            for i in np.flatnonzero(special.to_numpy(zero_copy_only=False))[::-1].tolist():
                s = self.strings[i]  # descending ids: the most frequent one is written last
                for form in (unquote(s), canonical(s)):
                    if form != s:
                        aliases[form] = i
            self._aliases = aliases
        return self._aliases

    def get(self, key: str) -> int | None:
        """int id of `key` as stored, URL-decoded or with spaces for underscores (or the reverse); None
        if unknown."""
        i = self.index.get(key)
        if i is None:
            i = self.aliases.get(key)
        if i is None and (c := canonical(key)) != key:
            i = self.index.get(c)
            if i is None:
                i = self.aliases.get(c)
        return i

    def lookup(self, keys: Iterable[str]) -> tuple[np.ndarray, list[str]]:
        """Map string ids (any form `get` accepts) to ints -> (known ints in order, unknown strings)."""
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
        """vocab.txt + counts.npy in `directory`, as every prepared dataset has them (writer.py)."""
        write_vocabulary(Path(directory), self.strings, self.counts)

    @classmethod
    def load(cls, directory: str | Path, mapped: bool = False) -> "Vocab":
        """mapped: strings and string -> id lookup memory-mapped from cache files beside vocab.txt,
        shared by every process that maps them (mapped_vocab.py; serve's workers); a directory
        that cannot be written gets the in-memory list and dict."""
        directory = Path(directory)
        counts = check_array(load_array(directory / "counts.npy", "the vocabulary's counts", mmap=mapped),
                             directory / "counts.npy", "the count of each id", low=0)
        source = directory / "vocab.txt"
        readable(source, "the vocabulary (one id per line)")
        try:
            m = mapped_strings(directory) if mapped else None
            strings, index = m if m is not None else (read_lines(source), None)
        except UnicodeDecodeError:
            raise LoadError(f"{source}: not UTF-8 text; expected the vocabulary (one id per line)") from None
        if len(strings) != len(counts):  # a truncated or edited vocab.txt: every id would be misnamed
            raise LoadError(f"{source}: {len(strings):,} ids, but counts.npy has {len(counts):,} counts; expected "
                            "one line per id (was the file truncated or edited?)")
        vocab = cls(strings, counts)
        if index is not None:
            vocab._index = index
        return vocab

