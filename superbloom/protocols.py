"""Evaluation protocols: how (context, target) examples are drawn from a prepared dataset.

Two protocols behind one small interface, `protocol.examples(data) -> Examples`, which the
evaluator (evaluate.py) runs the model and every baseline on:

  SetHoldout   the paper's protocol (Superbloom sec. 3.1) on held-out sets: from each test set one
               random contiguous segment of up to n ids, one random id of it held out (or
               `targets_per_set`, each its own example); the rest of the segment is the context and
               is excluded from the ranking.
  LeaveOneOut  sequence recommendation (issue 12; SASRec / S3-Rec / BERT4Rec full ranking): one
               example per user of a `prepare --split leave-one-out` dataset, the target is the
               user's validation or test id, the context the user's history up to it (ids unseen
               in training dropped), the most recent n ids, ORDER KEPT (oldest first, newest
               last, so a query's [MASK] follows the newest id). The whole history (not only the
               n-window) is excluded from the ranking when `exclude_history` (the S3-Rec code's
               convention), nothing is excluded otherwise. With repeats kept in the sequences a
               target may occur in its own history: with exclusion it cannot be ranked; such
               targets are counted (`targets_in_history`).

Examples are a function of the dataset and the protocol's settings (and seed) only, so the model
and every baseline see the very same. Everything is vectorised over the examples.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol as _Interface

import numpy as np

from .batches import sample_segments
from .dataset import Dataset, SetArray


@dataclass
class Examples:
    contexts: np.ndarray  # (E, n) ids, -1 = padding / unknown; for sequences ordered oldest -> newest
    targets: np.ndarray  # (E,) ids, -1 = unseen in training
    set_rows: np.ndarray  # (E,) which held-out set / user (groups for bootstrap intervals)
    sets_skipped: int
    exclude: np.ndarray | None = None  # (E, X) ids never ranked, -1 padded; None: the contexts
    notes: dict = field(default_factory=dict)  # protocol-specific counts for the report

    @property
    def excluded(self) -> np.ndarray:
        return self.contexts if self.exclude is None else self.exclude


class EvalProtocol(_Interface):
    name: str

    def examples(self, data: Dataset) -> Examples:
        ...

    def describe(self) -> dict:
        ...


def make_examples(sets: SetArray, n: int = 32, targets_per_set: int = 1, seed: int = 0,
                  max_sets: int = 0) -> Examples:
    """The set hold-out examples (sec. 3.1): see SetHoldout."""
    rng = np.random.default_rng(seed)
    rows = np.arange(len(sets))
    if max_sets and max_sets < len(rows):
        rows = np.sort(rng.choice(rows, max_sets, replace=False))
    seg_len = np.minimum(sets.lengths[rows], n)
    usable = seg_len >= 2
    rows, seg_len = rows[usable], seg_len[usable]
    # sample_segments marks padding and unseen ids alike with -1; seg_len tells them apart
    segs = sample_segments(sets, rows, n, rng)
    width = segs.shape[1]
    keys = np.where(np.arange(width)[None, :] < seg_len[:, None], rng.random(segs.shape), np.inf)
    order = np.argsort(keys, axis=1)
    per_set = np.minimum(targets_per_set, seg_len - 1)
    ex_row = np.repeat(np.arange(len(rows)), per_set)
    ex_pos = order[ex_row, np.arange(len(ex_row)) - np.repeat(np.cumsum(per_set) - per_set, per_set)]
    contexts = segs[ex_row].copy()
    targets = contexts[np.arange(len(ex_row)), ex_pos].copy()
    contexts[np.arange(len(ex_row)), ex_pos] = -1
    return Examples(contexts, targets, rows[ex_row], int((~usable).sum()))


@dataclass(frozen=True)
class SetHoldout:
    n: int = 32
    targets_per_set: int = 1
    seed: int = 0
    max_sets: int = 0
    name: str = "sets"

    def examples(self, data: Dataset) -> Examples:
        if data.split != "sets":
            raise ValueError(f"{data.path}: a {data.split!r} dataset; evaluate it with --protocol {data.split}")
        return make_examples(data.test, self.n, self.targets_per_set, self.seed, self.max_sets)

    def describe(self) -> dict:
        return {"protocol": self.name, "seed": self.seed, "n": self.n, "targets_per_set": self.targets_per_set,
                "context_excluded": True}


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


@dataclass(frozen=True)
class LeaveOneOut:
    split: str = "test"  # "valid" or "test": which target of each user
    n: int = 50  # context: the most recent n ids of the history
    exclude_history: bool = True  # the user's whole history is never ranked
    max_sets: int = 0  # at most this many users (seeded choice), 0: all
    seed: int = 0
    name: str = "leave-one-out"

    def __post_init__(self):
        if self.split not in ("valid", "test"):
            raise ValueError(f"split must be 'valid' or 'test', got {self.split!r}")
        if self.n < 1:
            raise ValueError(f"n (context length) must be >= 1, got {self.n}")

    def examples(self, data: Dataset) -> Examples:
        if data.split != "leave-one-out":
            raise ValueError(f"{data.path}: a {data.split!r} dataset has no sequence targets; prepare it with "
                             "`superbloom prepare --split leave-one-out` (or evaluate with --protocol sets)")
        history, targets = data.history(self.split), np.asarray(data.targets(self.split), np.int64)
        rows = np.arange(len(history))
        if self.max_sets and self.max_sets < len(rows):
            rows = np.sort(np.random.default_rng(self.seed).choice(rows, self.max_sets, replace=False))
            history = history.subset(rows)
            targets = targets[rows]
        contexts = last_known(history, self.n)  # (U, <=n)
        full = history_matrix(history)  # (U, L)
        in_history = ((full == targets[:, None]) & (targets[:, None] >= 0)).any(1)
        empty = (contexts >= 0).sum(1) == 0
        exclude = full if self.exclude_history else np.full((len(rows), 0), -1, np.int64)
        notes = {"targets_in_history": int(in_history.sum()), "empty_contexts": int(empty.sum()),
                 "history_ids_unseen": int((np.asarray(history.ids) < 0).sum())}
        return Examples(contexts, targets, rows, 0, exclude, notes)

    def describe(self) -> dict:
        return {"protocol": self.name, "split": self.split, "n": self.n, "exclude_history": self.exclude_history,
                "max_sets": self.max_sets, "seed": self.seed}
