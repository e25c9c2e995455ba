"""Training examples and queries as hashed token batches (Superbloom sec. 3.1, BERT masking).

Training: from each chosen set take a random contiguous segment of up to n ids, mask 15% of it
(at least one; round(0.15 * length) in general), and of the masked elements feed 80% as [MASK],
10% as a random id and 10% unchanged. Every element becomes its m tokens (element-major: the m
tokens of element i are positions i*m .. i*m+m-1). Targets are (element, id) pairs.

Merging identical [MASK] elements (exact). Without position embeddings the c elements an example
feeds as [MASK] are identical tokens: each gets the same output, and together they receive c times
the attention weight of one. So they are replaced by one [MASK] element of multiplicity c, whose
tokens get an additive log(c) attention bias (model.py), and all c targets point at it. Outputs
are unchanged (up to float rounding; with dropout, the merged element carries one dropout draw),
and at a mask rate of 0.5 the sequence is about 40% shorter.

Queries (evaluation, prediction): the context ids plus one [MASK] element at the end.

Everything is vectorised over the batch; there is no Python loop per id.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from ..data.dataset import SetArray
from ..hashing.bloom import MASK_ELEM, PAD_ELEM, BloomHash
from .config import MaskConfig  # noqa: F401 (re-exported: callers import it here)


@dataclass
class Batch:
    tokens: torch.Tensor  # (B, n*m) int64 token ids
    mult: torch.Tensor  # (B, n) int64 element multiplicity: 1, c for c merged [MASK]s, 0 for padding
    pad: torch.Tensor  # (B, n*m) bool, True at padding tokens
    positions: torch.Tensor  # (B, n*m) int64 element index of each token (for optional positions)
    target_elem: torch.Tensor  # (M,) int64 flat element index b * n + i of each target
    target_ids: torch.Tensor  # (M,) int64 id to predict
    elems: torch.Tensor | None = None  # (B, n) int64 the element ids (special elements < 0); queries carry them

    def context(self, elements: torch.Tensor) -> torch.Tensor:
        """The ids (U, n) of the batch row of each flat element index b * n + i (U,), -1 at special
        elements: the context handed to a head's topk (heads/base.py)."""
        return self.elems[elements // self.mult.shape[1]].clamp(min=-1)

    @property
    def n_targets(self) -> int:
        return len(self.target_ids)

    def to(self, device) -> "Batch":
        """The same batch on `device` (the tensors themselves when already there)."""
        return Batch(*(None if getattr(self, f.name) is None else getattr(self, f.name).to(device)
                       for f in dataclasses.fields(self)))


def epoch_batches(rows: np.ndarray, lengths: np.ndarray, batch_size: int, n: int,
                  rng: np.random.Generator, pool: int = 50) -> list[np.ndarray]:
    """One epoch of batches of set rows, in random order, each drawn from sets of similar length.

    Rows are shuffled, taken `pool` batches at a time, sorted by (capped) length within the pool and
    cut into batches, so a batch is trimmed to its longest segment with little padding (a short
    tail that does not fill a batch waits for the next epoch).
    """
    perm = rng.permutation(rows)
    batches = []
    span = batch_size * pool
    for a in range(0, len(perm) - batch_size + 1, span):
        chunk = perm[a:a + span]
        chunk = chunk[np.argsort(np.minimum(lengths[chunk], n), kind="stable")]
        batches += [chunk[b:b + batch_size] for b in range(0, len(chunk) - batch_size + 1, batch_size)]
    order = rng.permutation(len(batches))
    return [batches[i] for i in order]


def sample_segments(sets: SetArray, rows: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """A random contiguous segment of up to n ids from each set in `rows`.

    -> (B, w) ids, -1 padded, where w <= n is the longest segment in the batch."""
    lengths = sets.lengths[rows]
    seg = np.minimum(lengths, n)
    n = int(seg.max()) if len(seg) else 1
    start = sets.offsets[rows] + (rng.random(len(rows)) * (lengths - seg + 1)).astype(np.int64)
    pos = np.arange(n)
    valid = pos[None, :] < seg[:, None]
    idx = np.where(valid, start[:, None] + pos[None, :], 0)
    return np.where(valid, np.asarray(sets.ids[idx.ravel()]).reshape(idx.shape), PAD_ELEM).astype(np.int64)


def mask_segments(segs: np.ndarray, n_ids: int, cfg: MaskConfig, rng: np.random.Generator,
                  maskable: np.ndarray | None = None):
    """Choose and corrupt masked elements. (B, n) ids -> (input elements (B, n), targets (B, n)).
    Only ids >= 0 (and, where given, `maskable` (B, n) True) can be chosen; a row with none has no target."""
    valid = segs >= 0 if maskable is None else (segs >= 0) & maskable
    n_valid = valid.sum(1)
    n_mask = np.maximum(1, np.rint(cfg.mask_rate * n_valid)).astype(np.int64)
    n_mask = np.minimum(n_mask, n_valid)
    keys = np.where(valid, rng.random(segs.shape), np.inf)
    rank = np.argsort(np.argsort(keys, axis=1), axis=1)  # rank of each element's random key
    masked = rank < n_mask[:, None]
    targets = np.where(masked, segs, -1)
    u = rng.random(segs.shape)
    as_mask = masked & (u < cfg.p_mask)
    as_random = masked & (u >= cfg.p_mask) & (u < cfg.p_mask + cfg.p_random)
    elems = np.where(as_mask, MASK_ELEM, segs)
    elems = np.where(as_random, rng.integers(0, n_ids, segs.shape), elems)
    return elems, targets


def merge_masks(elems: np.ndarray, targets: np.ndarray):
    """Replace each example's [MASK] elements by one of multiplicity c (see module docstring).

    (B, n) elements, (B, n) targets (-1: none) -> (elements (B, w), multiplicity (B, w),
    target element (M,) flat index into (B, w), target ids (M,)), w <= n.
    """
    b, n = elems.shape
    fed = elems == MASK_ELEM
    c = fed.sum(1)
    keep = (elems != PAD_ELEM) & ~fed
    n_keep = keep.sum(1)
    order = np.argsort(~keep, axis=1, kind="stable")  # kept elements first, in their order
    w = max(1, int((n_keep + (c > 0)).max()))
    col = np.arange(w)[None, :]
    kept = col < n_keep[:, None]
    out = np.where(kept, np.take_along_axis(elems, order, 1)[:, :w], PAD_ELEM)
    mult = kept.astype(np.int64)
    has = np.flatnonzero(c > 0)
    out[has, n_keep[has]] = MASK_ELEM
    mult[has, n_keep[has]] = c[has]
    new_pos = np.empty_like(order)  # new column of every original element
    np.put_along_axis(new_pos, order, np.broadcast_to(np.arange(n), (b, n)), 1)
    new_pos = np.where(fed, n_keep[:, None], new_pos)
    r, j = np.nonzero(targets >= 0)
    return out, mult, r * w + new_pos[r, j], targets[r, j]


def to_batch(elems: np.ndarray, targets: np.ndarray, hashing: BloomHash, merge: bool = False) -> Batch:
    """Elements (B, n) (ids, PAD_ELEM, MASK_ELEM) and targets (B, n) (-1: none) -> a Batch."""
    if merge:
        elems, mult, t_elem, t_ids = merge_masks(elems, targets)
    else:
        mult = (elems != PAD_ELEM).astype(np.int64)
        r, j = np.nonzero(targets >= 0)
        t_elem, t_ids = r * elems.shape[1] + j, targets[r, j]
    b, n = elems.shape
    m = hashing.m
    tokens = hashing.encode(elems)  # (B, n*m)
    pad = np.repeat(mult == 0, m, axis=1)
    positions = np.broadcast_to(np.repeat(np.arange(n), m), (b, n * m)).copy()
    t = torch.from_numpy
    return Batch(t(tokens), t(mult), t(pad), t(positions), t(np.asarray(t_elem, np.int64)),
                 t(np.asarray(t_ids, np.int64)), t(np.ascontiguousarray(elems, np.int64)))


def training_batch(sets: SetArray, rows: np.ndarray, hashing: BloomHash, cfg: MaskConfig,
                   rng: np.random.Generator, merge: bool = True) -> Batch:
    """merge: merge identical [MASK] elements (exact for a set model; off with position embeddings)."""
    segs = sample_segments(sets, rows, cfg.n, rng)
    elems, targets = mask_segments(segs, hashing.n_ids, cfg, rng)
    if cfg.element_dropout:
        elems = drop_elements(elems, targets, cfg.element_dropout, rng)
    return to_batch(elems, targets, hashing, merge)


def drop_elements(elems: np.ndarray, targets: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    """Element dropout (a set-level regulariser for short sparse sets):
    every context element that is not a target becomes padding with probability `rate`, so the model
    sees many sub-contexts of each set. Targets and their [MASK] / random / unchanged inputs are never
    dropped. (B, n) elements, (B, n) targets (-1: none) -> (B, n) elements."""
    drop = (targets < 0) & (elems >= 0) & (rng.random(elems.shape) < rate)
    return np.where(drop, PAD_ELEM, elems)


def query_batch(contexts: np.ndarray, hashing: BloomHash) -> Batch:
    """Contexts (Q, c) ids, -1 padded -> batch with one [MASK] element appended: the one target.

    Padding columns shared by every row are dropped first, so short contexts stay cheap.
    """
    contexts = np.asarray(contexts, dtype=np.int64)
    if contexts.ndim != 2:
        raise ValueError(f"contexts must be (queries, ids), got shape {contexts.shape}")
    width = int((contexts >= 0).sum(1).max()) if contexts.size else 0
    # left-align known ids so trailing all-padding columns can be cut
    order = np.argsort(contexts < 0, axis=1, kind="stable")
    ctx = np.take_along_axis(contexts, order, axis=1)[:, :width]
    q = len(ctx)
    elems = np.concatenate([ctx, np.full((q, 1), MASK_ELEM)], axis=1)
    targets = np.full(elems.shape, -1, np.int64)
    targets[:, -1] = 0  # marks the query element; the value is not used
    return to_batch(elems, targets, hashing)
