"""Training for sequence recommendation (issue 12): ordered examples of the two sequence objectives
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

from typing import TYPE_CHECKING

import numpy as np

from .batches import Batch, MaskConfig, drop_elements, mask_segments, query_batch, sample_segments, to_batch
from .dataset import SetArray
from .hashing import MASK_ELEM, PAD_ELEM, BloomHash
from .metrics import sequence_summary, target_ranks  # noqa: F401 (re-exported: benchmarks/sequence)
from .protocols import Examples, LeaveOneOut, last_known

if TYPE_CHECKING:  # objectives.py imports this module: its types are only needed for annotations
    from .objectives import ObjectiveInputs

BOS = MASK_ELEM  # the element every causal window starts with
LAST_ITEM_FRACTION = 0.25  # masked-sequence: examples whose only masked id is their newest one
VAL_USERS = 5000  # validation users at most (a seeded choice); HR@10 ~ 0.06 has a standard error ~ 0.003
SELECT = "ndcg@10"  # picks the BEST checkpoint (higher is better)
DECAYS = (1.0, 0.7, 0.4, 0.15)  # hybrid head: the recency weights of the item-item term tried at validation (decay ** age)


# ------------------------------------------------------------------------------ batches


def next_item_batch(sets: SetArray, rows: np.ndarray, hashing: BloomHash, n: int,
                    rng: np.random.Generator) -> Batch:
    """Shifted targets over a random window of up to n ids of each sequence in `rows`:
    elements [BOS, s_1 .. s_{L-1}], targets [s_1 .. s_L] (element i predicts the id after it)."""
    segs = sample_segments(sets, rows, n, rng)  # (B, w) left-aligned, -1 padded
    b = len(segs)
    elems = np.concatenate([np.full((b, 1), BOS, np.int64), segs[:, :-1]], axis=1)  # (B, w)
    elems = np.where(segs >= 0, elems, PAD_ELEM)  # an element without a next id is not fed
    return to_batch(elems, segs, hashing, merge=False)


def masked_sequence_batch(sets: SetArray, rows: np.ndarray, hashing: BloomHash, cfg: MaskConfig,
                          rng: np.random.Generator, last_fraction: float = LAST_ITEM_FRACTION) -> Batch:
    """BERT4Rec-style: the set model's masking (batches.mask_segments) on windows, and for a
    `last_fraction` of the rows only the newest id masked (fed as [MASK]): the test-time query."""
    segs = sample_segments(sets, rows, cfg.n, rng)  # (B, w)
    elems, targets = mask_segments(segs, hashing.n_ids, cfg, rng)
    last = rng.random(len(segs)) < last_fraction  # (B,)
    if last.any():
        newest = (segs >= 0).sum(1) - 1  # (B,) column of the newest id
        only = np.arange(segs.shape[1])[None, :] == newest[:, None]  # (B, w)
        elems[last] = np.where(only[last], MASK_ELEM, segs[last])
        targets[last] = np.where(only[last], segs[last], -1)
    if cfg.element_dropout:
        elems = drop_elements(elems, targets, cfg.element_dropout, rng)
    return to_batch(elems, targets, hashing, merge=False)


def keep_last_known(contexts: np.ndarray, n: int) -> np.ndarray:
    """The newest n known ids of each context row (Q, c) (-1 = padding / unknown, anywhere), order
    kept, right-aligned: (Q, w), w <= n."""
    contexts = np.asarray(contexts, np.int64)
    lengths = (contexts >= 0).sum(1)
    return last_known(SetArray(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                               contexts[contexts >= 0]), n)


def next_item_query(contexts: np.ndarray, hashing: BloomHash, positions: int) -> Batch:
    """Histories (Q, c) ids in order (oldest first; -1 padding anywhere, dropped) -> a causal batch
    [BOS, newest positions - 1 ids] whose target element is the newest id (or [BOS] if none)."""
    ctx = keep_last_known(contexts, max(positions - 1, 0))  # (Q, w) right-aligned
    q = len(ctx)
    order = np.argsort(ctx < 0, axis=1, kind="stable")  # left-align: causal rows start with real ids
    ctx = np.take_along_axis(ctx, order, axis=1)
    elems = np.concatenate([np.full((q, 1), BOS, np.int64), ctx], axis=1)  # (Q, 1 + w)
    targets = np.full(elems.shape, -1, np.int64)
    targets[np.arange(q), (ctx >= 0).sum(1)] = 0  # marks the newest element; the value is not used
    return to_batch(elems, targets, hashing)


def ordered_query_batch(contexts: np.ndarray, hashing: BloomHash, model_cfg=None) -> Batch:
    """The query batch a model needs (predictor.rank_contexts): a causal model scores its newest
    element (next_item_query); a model with learned positions gets the newest positions - 1 ids
    and a [MASK] after them; a set model, its whole context and a [MASK] (batches.query_batch)."""
    positions = getattr(model_cfg, "positions", 0) or 0
    if getattr(model_cfg, "causal", False):
        return next_item_query(contexts, hashing, positions)
    contexts = np.asarray(contexts, np.int64)
    if positions and contexts.ndim == 2 and int((contexts >= 0).sum(1).max(initial=0)) > positions - 1:
        contexts = keep_last_known(contexts, positions - 1)
    return query_batch(contexts, hashing)


# ------------------------------------------------------------------------------ validation


def validation_examples(x: "ObjectiveInputs", n: int, max_users: int = VAL_USERS) -> Examples | None:
    """Leave-one-out validation targets of a sequence dataset (history excluded from the ranking);
    for a set dataset the last id of each held-out training set, the ids before it the context."""
    data, seed = x.data, x.cfg.loop.seed
    if data.split == "leave-one-out":
        return LeaveOneOut("valid", n, exclude_history=True, max_sets=max_users, seed=seed).examples(data)
    if not len(x.val_rows):
        return None
    held = data.train.subset(x.val_rows)
    ids = np.asarray(held.ids, np.int64)
    targets = ids[held.offsets[1:] - 1]  # (V,) each set's last id
    history = SetArray(held.offsets - np.arange(len(held.offsets)), np.delete(ids, held.offsets[1:] - 1))
    contexts = last_known(history, n)
    return Examples(contexts, targets, x.val_rows, 0, contexts)
