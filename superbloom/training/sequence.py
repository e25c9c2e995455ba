"""Training for sequence recommendation: ordered examples of the two sequence objectives
of `train --objective`, their leave-one-out validation examples, and ordered queries.

Two objectives, both with learned positions (ModelConfig.positions, counted from the oldest id of
the window); their registry entries and builders are in objectives.py:

  next-item        causal, SASRec-style (Kang & McAuley 2018): a window of up to n ids
                   s_1..s_L is fed as [BOS] s_1 .. s_{L-1} to a model whose attention is causal
                   (ModelConfig.causal: element i sees elements <= i only, model.causal_keep), and
                   element i predicts s_{i+1}: a loss at every position (with any head; the full
                   softmax head is "SASRec with full softmax", Klenitskiy & Vasilev 2023). [BOS] is
                   the [MASK] token, so an empty history still gets a prediction (its first id).
                   At query time the history is fed the same way, [BOS] + the most recent
                   positions - 1 ids, and the hidden state of the NEWEST id (or of [BOS]) is scored.
  masked-sequence  bidirectional, BERT4Rec-style (Sun et al. 2019): the masked objective of the set
                   model (batches.mask_segments, no [MASK] merging since positions differ) on
                   windows of the sequences, plus `LAST_ITEM_FRACTION` of the examples with only
                   their newest id masked, which is exactly the query of test time (history, then
                   one [MASK]).

Validation (both): a sequence dataset (`prepare --split leave-one-out`) is validated on its
validation targets (the second-to-last id of each user, protocols.LeaveOneOut("valid"), user's
history excluded from the ranking), never on the test targets; training uses every training
prefix (the validation and test ids are not in them). The BEST checkpoint is the one with the
highest NDCG@10 (HR@10 is logged beside it). A set dataset is validated on its held-out training
sets, each one's last id the target, the ids before it the context.

Everything is vectorised over the batch (no Python loop per id).
"""
from __future__ import annotations

import numpy as np

from ..data.dataset import SetArray
from ..data.dataset import last_known
from ..evaluation.protocols import Examples, LeaveOneOut
from ..heads.config import DECAYS  # noqa: F401 (the hybrid's recency weights tried at validation; re-exported)

VAL_USERS = 5000  # validation users at most (a seeded choice); HR@10 ~ 0.06 has a standard error ~ 0.003
SELECT = "ndcg@10"  # picks the BEST checkpoint (higher is better)


# ------------------------------------------------------------------------------ validation


def validation_examples(data, val_rows: np.ndarray, seed: int, n: int, max_users: int = VAL_USERS) -> Examples | None:
    """Leave-one-out validation targets of a sequence dataset `data` (history excluded from the ranking);
    for a set dataset the last id of each held-out training set (rows `val_rows` of data.train), the
    ids before it the context; at most n context ids."""
    if data.split == "leave-one-out":
        return LeaveOneOut("valid", n, exclude_history=True, max_sets=max_users, seed=seed).examples(data)
    if not len(val_rows):
        return None
    held = data.train.subset(val_rows)
    ids = np.asarray(held.ids, np.int64)
    targets = ids[held.offsets[1:] - 1]  # (V,) each set's last id
    history = SetArray(held.offsets - np.arange(len(held.offsets)), np.delete(ids, held.offsets[1:] - 1))
    contexts = last_known(history, n)
    return Examples(contexts, targets, val_rows, 0, contexts)
