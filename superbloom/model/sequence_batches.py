"""Ordered examples and queries for sequence recommendation: the batches of the two sequence
objectives (next-item, masked-sequence; objectives.py) and the ordered query batch every ranking
uses (rank.py). Vectorised over the batch."""
from __future__ import annotations

import numpy as np

from .batches import Batch, MaskConfig, drop_elements, mask_segments, query_batch, sample_segments, to_batch
from ..data.dataset import SetArray, last_known
from ..hashing.bloom import MASK_ELEM, PAD_ELEM, BloomHash


BOS = MASK_ELEM  # the element every causal window starts with


LAST_ITEM_FRACTION = 0.25  # masked-sequence: examples whose only masked id is their newest one


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
    """The query batch a model needs (inference/rank.py's rank_contexts): a causal model scores its newest
    element (next_item_query); a model with learned positions gets the newest positions - 1 ids
    and a [MASK] after them; a set model, its whole context and a [MASK] (batches.query_batch)."""
    positions = getattr(model_cfg, "positions", 0) or 0
    if getattr(model_cfg, "causal", False):
        return next_item_query(contexts, hashing, positions)
    contexts = np.asarray(contexts, np.int64)
    if positions and contexts.ndim == 2 and int((contexts >= 0).sum(1).max(initial=0)) > positions - 1:
        contexts = keep_last_known(contexts, positions - 1)
    return query_batch(contexts, hashing)
