"""A vocabulary that `serve --workers N` processes share: strings and lookup tables
memory-mapped from files next to `vocab.txt`, instead of a Python list and dict in every process.

At 5.1M ids a worker's own copy of the vocabulary (a list of Python strings, the string -> int dict
and the autocomplete keys) was ~1.5 GB; mapped, those pages are the page cache's, shared by every
process that maps them, and a lookup costs a binary search (~23 string comparisons at 5M ids).

Cache files (built once, atomically, by the first process that needs them; rebuilt when
`vocab.txt` is newer; a directory that cannot be written falls back to building them in memory):

  vocab.strings.arrow   the ids' strings, an Arrow IPC file (large_string), id order
  vocab.sorted.npy      int64 ids in the byte order of their strings (binary search for string -> id)

`MappedStrings` is a read-only sequence of str over the Arrow array (indexing, slicing, iteration,
len, ==); `SortedLookup` answers `get` / `in` like the dict it replaces.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..storage.files import atomic_path, read_lines
from ..storage.loading import load_array

STRINGS_FILE = "vocab.strings.arrow"
SORTED_FILE = "vocab.sorted.npy"
MAPPED_MIN_IDS = 100_000  # Predictor.load maps vocabularies from this size (smaller ones: a list and a dict)


def vocab_size(directory: str | Path) -> int:
    """Ids in directory's vocabulary (the length of counts.npy, read from its header)."""
    return int(load_array(Path(directory) / "counts.npy", "the vocabulary's counts", mmap=True).shape[0])


def cached(directory: Path, name: str, source: Path, build: Callable[[Path], None]) -> Path | None:
    """directory/name, built by build(tmp path) unless it exists and is not older than `source`
    -> its path, or None if the directory cannot be written."""
    path = directory / name
    if path.exists() and path.stat().st_mtime >= source.stat().st_mtime:
        return path
    if not os.access(directory, os.W_OK):
        return None
    with atomic_path(path) as tmp:
        build(tmp)
    return path


def map_arrow(path: Path) -> pa.Array:
    """The single column of an Arrow IPC file, memory-mapped (no copy)."""
    return pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all().column(0).combine_chunks()


def write_arrow(path: Path, array: pa.Array) -> None:
    table = pa.table({"s": array})
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


class MappedStrings(Sequence[str]):
    """A read-only sequence of the vocabulary's strings over an Arrow array (see module docstring)."""

    def __init__(self, array: pa.Array, directory: Path | None = None):
        self.array, self.directory = array, directory  # directory: where its cache files are

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self.array[i].to_pylist()
        return self.array[int(i)].as_py()

    def __iter__(self) -> Iterator[str]:
        step = 1 << 16
        for a in range(0, len(self.array), step):
            yield from self.array[a:a + step].to_pylist()

    def __eq__(self, other) -> bool:
        if isinstance(other, MappedStrings):
            return self.array.equals(other.array)
        if isinstance(other, (list, tuple)):
            return len(other) == len(self) and pa.array(other, pa.large_string()).equals(self.array)
        return NotImplemented

    __hash__ = None

    def __add__(self, other) -> list[str]:
        return list(self) + list(other)


class SortedLookup:
    """string -> int id by binary search over ids sorted by their strings (the dict's get / in)."""

    def __init__(self, strings: pa.Array, order: np.ndarray):
        self.strings, self.order = strings, order

    def get(self, key: str, default=None):
        lo, hi = 0, len(self.order)
        while lo < hi:  # the first sorted position whose string is >= key (Python str order = code points)
            mid = (lo + hi) // 2
            if self.strings[int(self.order[mid])].as_py() < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self.order):
            i = int(self.order[lo])
            if self.strings[i].as_py() == key:
                return i
        return default

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        return len(self.order)


def mapped_strings(directory: Path) -> tuple[MappedStrings, SortedLookup] | None:
    """The mapped strings and lookup of directory/vocab.txt (building the cache files if needed);
    None where the cache cannot be written (the caller keeps a list and a dict)."""
    directory = Path(directory)
    source = directory / "vocab.txt"
    strings_path = cached(directory, STRINGS_FILE, source,
                          lambda tmp: write_arrow(tmp, pa.array(read_lines(source), pa.large_string())))
    if strings_path is None:
        return None
    array = map_arrow(strings_path)
    # Arrow sorts strings by their UTF-8 bytes, the same order as Python's code point order
    sorted_path = cached(directory, SORTED_FILE, strings_path,
                         lambda tmp: _save_npy(tmp, pc.sort_indices(array).to_numpy().astype(np.int64)))
    if sorted_path is None:
        return None
    return MappedStrings(array, directory), SortedLookup(array, np.load(sorted_path, mmap_mode="r"))


def mapped_table(strings: MappedStrings, name: str, build: Callable[[], pa.Array | np.ndarray]):
    """A table derived from mapped strings (e.g. serve's autocomplete keys), cached beside them as
    name (.arrow: an Arrow array; .npy: a NumPy array) and mapped; built in memory if it cannot be
    written."""
    source = strings.directory / STRINGS_FILE
    arrow = name.endswith(".arrow")
    path = cached(strings.directory, name, source,
                  lambda tmp: write_arrow(tmp, build()) if arrow else _save_npy(tmp, build()))
    if path is None:
        return build()
    return map_arrow(path) if arrow else np.load(path, mmap_mode="r")


def _save_npy(tmp: Path, a: np.ndarray) -> None:
    with open(tmp, "wb") as f:  # np.save on a path would append .npy to the temporary name
        np.save(f, a)
