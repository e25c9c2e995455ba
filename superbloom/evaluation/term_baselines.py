"""The hybrid head's item-item term alone, as baselines: rank by the closed-form term, no network.

The hybrid head (heads/hybrid.py) reports "term alone" beside a trained model; these entries of
baselines.BASELINES give the same ranking without training anything:

  transition  the directed transition term of ordered data (heads/itemitem.transition_pattern):
              log(1 + how often, gap-discounted, j follows c within `window` ids), its `neighbours`
              largest per row; summed over the whole ordered context with recency weights
              decay ** age (age 0: the newest id)
  ease-term   EASE's weights (itemitem.ease_weights), the `neighbours` of largest magnitude per row
              (dense to fit: up to EASE_MAX_IDS ids)
  cooc-term   the co-occurrence cosine on each id's `neighbours` most frequent co-occurring ids
  local-ease  EASE on each id's neighbourhood (heads/local_ease.py), its `neighbours` largest per row

The term is built by hybrid.build_term and ranked by hybrid.term_topk, the functions the head's
"term alone" variant uses, with HybridConfig's defaults (neighbours 200, window 10, gap_decay 0.8):
for the same training sets and decay the ranking is the head's, id for id (ties by the smaller id,
no popularity tiebreak; tests/test_term_baselines.py). Every context id counts (last_context False
in the registry), as in the head.

decay: the head chooses it on validation data with mix; a baseline has no validation, so it is a
setting. The transition term's default, 0.7, is the decay the sequence hybrids' validation chose
most often for it (Toys, LastFM, BERT4Rec Beauty; 0.4 on Beauty). EASE and the cosine default to 1 (every context id alike: the set model's decay, the only one the set objectives try).
"""
from __future__ import annotations

import numpy as np
import torch

from ..data.dataset import SetArray
from ..heads.hybrid import HybridConfig, build_term, term_topk

TRANSITION_DECAY = 0.7  # the transition term's most chosen decay on the sequence datasets (module docstring)


class ItemItemTerm:
    """One hybrid term, fitted on the training sets, ranking by its sum over the context (module docstring)."""

    def __init__(self, train: SetArray, n_ids: int, term: str, decay: float = 1.0, cfg: HybridConfig = HybridConfig()):
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"{term} baseline: decay must be in (0, 1], got {decay}")
        self.n_ids, self.term, self.decay = n_ids, term, float(decay)
        indptr, cols, values = build_term(term, train, n_ids, cfg)
        self.indptr = torch.from_numpy(np.asarray(indptr, np.int64))  # (N + 1,)
        self.cols = torch.from_numpy(np.asarray(cols, np.int64))  # (nnz,)
        self.values = torch.from_numpy(np.ascontiguousarray(values, np.float32))  # (nnz,), as the head stores them

    def rank(self, contexts: np.ndarray, exclude: np.ndarray, k: int) -> np.ndarray:
        """(E, k) ids best first for contexts (E, c) (oldest first), never an id of a context or of
        exclude (E, X) (-1 padded); -1 where fewer than k ids remain."""
        ctx = torch.from_numpy(np.asarray(contexts, np.int64).reshape(len(contexts), -1))
        ctx = ctx.masked_fill((ctx < 0) | (ctx >= self.n_ids), -1)  # as the head: other ids add nothing
        ex = torch.from_numpy(np.asarray(exclude, np.int64).reshape(len(exclude), -1))
        return term_topk(self.indptr, self.cols, self.values, self.n_ids, ctx, self.decay, k, ex).ids.numpy()


def transition(train: SetArray, n_ids: int) -> ItemItemTerm:
    return ItemItemTerm(train, n_ids, "transition", decay=TRANSITION_DECAY)


def ease_term(train: SetArray, n_ids: int) -> ItemItemTerm:
    return ItemItemTerm(train, n_ids, "ease")


def cooc_term(train: SetArray, n_ids: int) -> ItemItemTerm:
    return ItemItemTerm(train, n_ids, "cooccurrence")


def local_ease_term(train: SetArray, n_ids: int) -> ItemItemTerm:
    return ItemItemTerm(train, n_ids, "local-ease")
