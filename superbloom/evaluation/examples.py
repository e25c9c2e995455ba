"""The examples every evaluation ranks: `Examples` (contexts, targets, groups, exclusions) and the paper's
set hold-out drawer `make_examples` (Superbloom sec. 3.1), in a module of their own so that what draws
validation examples from training sets (a trainer's validation, a baseline's tuning: tuning.py) needs
no protocol."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..data.dataset import SetArray
from ..model.batches import sample_segments


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

