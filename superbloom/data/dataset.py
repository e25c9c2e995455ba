"""A prepared dataset directory (see prepare.py), memory-mapped: sets are CSR arrays of int32 ids.

    data = Dataset("data/wiki"); data.train[17] -> ids of training set 17 (np.int32 view)

A leave-one-out dataset (prepare --split leave-one-out) also has `valid`, and its `valid` / `test`
hold each evaluated user's history (in order) with one target per user: `data.targets("test")`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..storage.files import read_lines
from ..storage.guarded import resolve
from ..storage.loading import LoadError, check_array, load_array, read_json_object, read_whole, version_of
from .vocab import Vocab


@dataclass
class SetArray:
    """Sets as CSR: ids of set i are ids[offsets[i]:offsets[i+1]]."""

    offsets: np.ndarray  # (S + 1,) int64
    ids: np.ndarray  # (links,) int32, possibly a read-only memmap

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.ids[self.offsets[i]:self.offsets[i + 1]]

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def subset(self, rows: np.ndarray) -> "SetArray":
        """A new SetArray holding the given sets (copied into memory)."""
        lengths = self.lengths[rows]
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        starts = np.repeat(self.offsets[rows] - offsets[:-1], lengths)
        return SetArray(offsets, np.asarray(self.ids[starts + np.arange(offsets[-1])]))

    def incidence(self, n_ids: int) -> sp.csr_matrix:
        """Binary (sets x ids) matrix (an id repeated within a set counts once)."""
        ids = np.array(self.ids, dtype=np.int32)  # a writable copy: scipy sorts indices in place
        x = sp.csr_matrix((np.ones(len(ids), np.float32), ids, np.asarray(self.offsets)), shape=(len(self), n_ids))
        x.sum_duplicates()
        x.data[:] = 1.0
        return x

    @classmethod
    def from_lists(cls, sets) -> "SetArray":
        lengths = np.array([len(s) for s in sets], np.int64)
        offsets = np.zeros(len(sets) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = np.concatenate([np.asarray(s, np.int32) for s in sets]) if len(sets) else np.zeros(0, np.int32)
        return cls(offsets, ids.astype(np.int32))


class Dataset:
    """A prepared dataset, read from one version of its folder: opened again when another run (prepare
    --overwrite) swaps a new one in meanwhile (storage/loading.read_whole); what is read later (the
    vocabulary, the set names) must come from that version, else a LoadError says it was replaced."""

    def __init__(self, path: str | Path):
        from .._bounds import path as a_path

        self._named = Path(a_path("path", path))
        read_whole(self._named, self._open)

    def _open(self) -> None:
        self._version = version_of(self._named)
        self.path = resolve(self._named, "dataset")  # PATH, or the complete one a kill during its swap left beside it
        if not (self.path / "meta.json").exists():
            raise FileNotFoundError(f"{self.path} is not a prepared dataset (no meta.json); "
                                    "run `superbloom prepare` first, or it was interrupted")
        # every file checked as it is read (storage/loading.py): a broken one is one line naming it
        self.meta = read_json_object(self.path / "meta.json", "the dataset's summary (superbloom prepare writes it)")
        self.counts = check_array(load_array(self.path / "counts.npy", "the dataset's id counts"),
                                  self.path / "counts.npy", "the count of each id", low=0)
        self.train = self._split("train")
        self.test = self._split("test")
        self.valid = self._split("valid") if (self.path / "valid.offsets.npy").exists() else None

    def _later(self, read):
        """read() -> its value: a file read after opening (memory-mapped arrays stay valid), which must be of
        the version opened, else a LoadError saying it was replaced (prepare --overwrite) since."""
        def same_version():
            if version_of(self._named) != self._version:
                raise LoadError(f"{self._named}: replaced by another run (prepare --overwrite?) since it was "
                                "opened; open it again (its arrays and its vocabulary would not match)")
            return read()
        return read_whole(self._named, same_version)

    def _split(self, name: str) -> SetArray:
        """NAME.offsets.npy (S + 1,) and NAME.ids.npy (links,), memory-mapped; LoadError naming the file
        when one is truncated, the offsets do not start at 0, decrease or do not end at the number of ids,
        or an id is not one of the vocabulary's (held out: or -1) (check_array: one pass, in pieces)."""
        offsets_path, ids_path = self.path / f"{name}.offsets.npy", self.path / f"{name}.ids.npy"
        offsets = load_array(offsets_path, f"the {name} split's set offsets")
        ids = load_array(ids_path, f"the {name} split's ids", mmap=True)
        check_array(offsets, offsets_path, "set offsets", low=0, increasing=True)
        unseen = name != "train"  # held-out ids never seen in training are -1 (prepare.py)
        check_array(ids, ids_path, "ids of the vocabulary" + (" (or -1: unseen in training)" if unseen else ""),
                    low=-1 if unseen else 0, high=len(self.counts))
        if len(offsets) and int(offsets[0]) != 0:
            raise LoadError(f"{offsets_path}: starts at {int(offsets[0]):,}; expected set offsets from 0 (edited by "
                            "hand?)")
        if len(offsets) == 0 or int(offsets[-1]) != len(ids):
            raise LoadError(f"{ids_path}: holds {len(ids):,} ids, but {name}.offsets.npy ends at "
                            f"{int(offsets[-1]) if len(offsets) else 'nothing'}; expected the files superbloom "
                            "prepare wrote together (edited or truncated?)")
        return SetArray(offsets, ids)

    @property
    def split(self) -> str:
        """How the dataset was split: "sets" (whole sets held out) or "leave-one-out" (sequences)."""
        return self.meta.get("split", "sets")

    def history(self, split: str) -> SetArray:
        """leave-one-out: the histories before the `split` ("valid" or "test") targets."""
        if split not in ("valid", "test") or getattr(self, split) is None:
            raise ValueError(f"{self.path}: no {split!r} split (this dataset's split is {self.split!r}; "
                             "`superbloom prepare --split leave-one-out` writes valid and test)")
        return getattr(self, split)

    def targets(self, split: str) -> np.ndarray:
        """leave-one-out: (users,) int32 target of each history of `split` (-1: unseen in training)."""
        path = self.path / f"{split}.targets.npy"
        if not path.exists():
            raise ValueError(f"{self.path}: no {path.name} (this dataset's split is {self.split!r}; "
                             "`superbloom prepare --split leave-one-out` writes per-user targets)")
        return load_array(path, f"the {split} split's targets", mmap=True)

    @property
    def n_ids(self) -> int:
        return len(self.counts)

    @cached_property
    def vocab(self) -> Vocab:
        return self._later(lambda: Vocab.load(self.path))

    def set_names(self, split: str) -> list[str]:
        return self._later(lambda: read_lines(self.path / f"{split}.sets.txt"))


def last_known(history: SetArray, n: int) -> np.ndarray:
    """The most recent n known ids of each history, order kept: (U, w) ids, w <= n, right-aligned
    (newest in the last column), -1 padded on the left; unknown (-1) ids are dropped first."""
    ids = np.asarray(history.ids)
    known = ids >= 0  # (links,)
    user = np.repeat(np.arange(len(history)), history.lengths)  # (links,)
    n_known = np.bincount(user[known], minlength=len(history))  # (U,)
    # rank of each known id counted from the end of its history: 0 = newest
    csum = np.cumsum(known)  # (links,) known ids up to and including this link
    total_before = np.concatenate([[0], np.cumsum(n_known)])[:-1]  # (U,) known ids of earlier users
    from_end = total_before[user] + n_known[user] - csum  # (links,) valid where known
    w = int(min(n, n_known.max())) if len(history) and n_known.max() > 0 else 0
    out = np.full((len(history), w), -1, np.int64)
    take = known & (from_end < w)
    out[user[take], w - 1 - from_end[take]] = ids[take]
    return out


def history_matrix(history: SetArray) -> np.ndarray:
    """(U, L) the whole histories, left-aligned, -1 padded (for exclusion)."""
    lengths = history.lengths
    w = int(lengths.max()) if len(history) else 0
    col = np.arange(w)[None, :]
    valid = col < lengths[:, None]
    idx = np.where(valid, history.offsets[:-1, None] + col, 0)
    ids = np.asarray(history.ids)
    return np.where(valid, ids[idx] if len(ids) else -1, -1).astype(np.int64)
