"""Coherent hash maps: similar ids share a bucket (Superbloom appendix C, Table 7).

The paper's random maps (sec. 3.2, hashing.py) put unrelated ids into one bucket. A *coherent* map
groups similar ids instead, so that they share embedding capacity: "we first run a co-occurrence
factorization algorithm and then ... for each entity, in decreasing frequency order, ... create a
hash bucket that includes the element and its alpha - 1 nearest neighbors which have not been
already assigned a bucket. When creating a second coherent hash function, we add the constraint
that any pair of elements that share a bucket for the first hash function cannot be assigned to
the same bucket in the second hash."

This module returns one *ordering* of the ids per coherent map (bucket after bucket, alpha ids
each, the last may hold fewer), which `BloomHash.from_orders` turns into buckets.

1. Embeddings (`cooccurrence_embeddings`): a rank-r factorisation of the cosine-normalised
   co-occurrence matrix C = D^-1/2 X^T X D^-1/2 (X the binary sets x ids incidence of the
   training sets, D = diag of the id counts). C is never formed (Epinions: 296K x 296K): its
   eigenvectors are the left singular vectors of A = D^-1/2 X^T, found by a seeded randomized SVD
   of the sparse A (Halko, Martinsson & Tropp 2011). Id i gets e_i = U_i * s (so e_i . e_k
   approximates C_ik), normalised to unit length: dot products are cosines.
2. Greedy buckets (`greedy_buckets`): the paper's sequential greedy, computed block-wise. The next
   `block` unassigned ids in frequency order become seeds; one matrix product (seeds x unassigned)
   gives each seed its K most similar unassigned ids; the seeds then resolve in order (a loop over
   buckets, never over id pairs), each taking the alpha - 1 best candidates still unassigned (and,
   for a constrained map, in distinct buckets of the first map, none in the seed's own). A seed
   whose K-list ran short is rescanned against every unassigned id, so the result equals the
   one-seed-at-a-time greedy (up to ties in similarity). The nearest neighbours are exact, so
   the cost is O(N^2 r / alpha) multiply-adds in block matrix products: about a minute per map
   for Epinions' 278K ids on 2 CPU cores (benchmarks/results/paper/t7_coherent.md).

Where the constraint cannot be met (the last few ids may all come from a few first-map buckets)
the bucket is filled anyway and the violation counted; `BloomHash.from_orders` then separates any
pair of ids that share all m buckets, so the final maps always satisfy it.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from .dataset import SetArray

RANK = 32  # factorisation rank r
OVERSAMPLE = 16  # randomized SVD: extra columns of the sketch
POWER_ITERS = 4  # randomized SVD: subspace iterations (sharpen a slowly decaying spectrum)
SLACK = 256  # extra candidates kept per seed (absorb the ids claimed by earlier seeds of a block)
BLOCK_ELEMS = 1 << 24  # similarity entries (seeds x unassigned) computed at once


@dataclass
class CoherentStats:
    """What the greedy had to do; for the report, not needed by the maps."""
    rescans: int = 0  # seeds whose candidate list ran short and were rescanned against all ids
    violations: int = 0  # buckets where the first-map constraint could not be met (tail only)


def cooccurrence_embeddings(sets: SetArray, n_ids: int, rank: int = RANK, seed: int = 0) -> np.ndarray:
    """(N, r) unit rows whose dot products approximate the cosine co-occurrence of the ids.

    Ids that never co-occur with another id get a zero row (cosine 0 with every id)."""
    x = sets.incidence(n_ids)  # (S, N) binary
    counts = np.asarray(x.sum(0)).ravel()
    a = (sp.diags(1.0 / np.sqrt(np.maximum(counts, 1.0))) @ x.T).tocsr().astype(np.float64)  # (N, S)
    r = max(1, min(rank, min(a.shape) - 1))
    width = min(r + OVERSAMPLE, min(a.shape))
    rng = np.random.default_rng([seed, 7])
    with _one_thread():  # tiny LAPACK calls (w x w): threads only add synchronisation
        return _randomized_embeddings(a, r, width, rng)


@contextmanager
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def _dense(z: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(z))


def _randomized_embeddings(a: sp.csr_matrix, r: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """Rank-r U_r s_r of the sparse A (N, S) by a randomized SVD with power iterations, unit rows."""
    q = _orthonormal(_dense(a @ rng.standard_normal((a.shape[1], width))))  # (N, w) range of A
    for _ in range(POWER_ITERS):
        p = _orthonormal(_dense(a.T @ q.numpy()))  # (S, w)
        q = _orthonormal(_dense(a @ p.numpy()))  # (N, w)
    ub, s, _ = torch.linalg.svd(_dense((a.T @ q.numpy()).T), full_matrices=False)  # B = Q^T A: (w, S)
    emb = (q @ ub[:, :r]) * s[:r]  # (N, r) = U_r s_r
    norm = emb.norm(dim=1, keepdim=True)
    return (emb / torch.where(norm > 1e-12, norm, torch.inf)).float().numpy()


def _orthonormal(y: torch.Tensor) -> torch.Tensor:
    """Orthonormal basis of the columns of a tall y (n, w), from the small Gram matrix (w, w)
    applied twice ("CholeskyQR2" with an eigendecomposition): cheaper than Householder QR of a
    296K x 48 matrix. Directions with a negligible eigenvalue are dropped."""
    for _ in range(2):
        w, v = torch.linalg.eigh(y.T @ y)
        keep = w > 1e-12 * max(float(w[-1]), 1e-300)
        y = y @ (v[:, keep] / w[keep].sqrt())
    return y


def greedy_buckets(emb: np.ndarray, counts: np.ndarray, alpha: int, first: np.ndarray | None = None,
                   stats: CoherentStats | None = None) -> np.ndarray:
    """Order of the ids, bucket after bucket: each id in decreasing `counts` order that is not yet
    assigned seeds a bucket with its alpha - 1 most similar unassigned ids (cosine of `emb` rows).

    first: (N,) first-map bucket of every id, or None. When given, a bucket never holds two ids of
    one first-map bucket (appendix C's second coherent map). -> (N,) int64 permutation.
    """
    n = len(emb)
    emb_t = torch.as_tensor(emb, dtype=torch.float32)  # (N, r)
    stats = stats if stats is not None else CoherentStats()
    seed_order = np.argsort(-np.asarray(counts), kind="stable")  # most frequent first
    assigned = np.zeros(n, bool)
    out = np.empty(n, np.int64)
    filled, cursor = 0, 0
    # candidates per seed: the seeds of a block share neighbours (hence 4x); under a first map the
    # seed's nearest ids mostly share its first-map bucket and each first-map bucket gives one id
    k_list = (alpha - 1) * (alpha if first is not None else 4) + SLACK
    while filled < n:
        cursor += int(np.argmax(~assigned[seed_order[cursor:]]))  # next unassigned id by frequency
        free = np.flatnonzero(~assigned)  # (U,) unassigned ids, ascending
        ahead = seed_order[cursor:]
        seeds = ahead[~assigned[ahead]][:max(1, BLOCK_ELEMS // len(free))]  # (b,) next seeds
        sims = emb_t[torch.from_numpy(seeds)] @ emb_t[torch.from_numpy(free)].T  # (b, U) cosines
        cand_lists = free[sims.topk(min(k_list, len(free)), dim=1).indices.numpy()]  # (b, K), best first
        for seed, cand in zip(seeds.tolist(), cand_lists):
            if assigned[seed]:  # claimed by an earlier seed of this block
                continue
            assigned[seed] = True
            need = min(alpha - 1, n - filled - 1)
            pick = _pick(cand, assigned, first, seed, need)
            if len(pick) < need:  # the list ran short: rescan the unassigned ids, deeper each time
                stats.rescans += 1
                sims1 = emb_t @ emb_t[seed]  # (N,): a matrix-vector product, no gather
                sims1[torch.from_numpy(assigned)] = -torch.inf
                left = n - int(assigned.sum())
                depth = 4 * k_list
                while True:
                    ranked = sims1.topk(min(depth, left)).indices.numpy()  # unassigned ids, best first
                    pick = _pick(ranked, assigned, first, seed, need)
                    if len(pick) == need or len(ranked) == left:
                        break
                    depth *= 4
                if len(pick) < need:  # constraint cannot be met: fill, count, let the builder fix it
                    stats.violations += 1
                    pick = np.concatenate([pick, ranked[~np.isin(ranked, pick)][:need - len(pick)]])
            assigned[pick] = True
            out[filled] = seed
            out[filled + 1:filled + 1 + len(pick)] = pick
            filled += 1 + len(pick)
    return out


def _pick(cand: np.ndarray, assigned: np.ndarray, first: np.ndarray | None, seed: int, need: int) -> np.ndarray:
    """The first `need` candidates (in list order) that are unassigned and, under a first map,
    whose first-map buckets differ from each other and from the seed's."""
    cand = cand[~assigned[cand]]
    if first is not None:
        b = first[cand]
        cand, b = cand[b != first[seed]], b[b != first[seed]]
        _, where = np.unique(b, return_index=True)  # first occurrence of each first-map bucket
        cand = cand[np.sort(where)]
    return cand[:need]


def coherent_orders(sets: SetArray, n_ids: int, alpha: int, n_maps: int, seed: int = 0,
                    rank: int = RANK, stats: CoherentStats | None = None) -> list[np.ndarray]:
    """`n_maps` coherent orderings of ids 0..n_ids-1 for `BloomHash.from_orders` (appendix C).

    Map 0 is the greedy on the co-occurrence embeddings; every later map is the same greedy
    constrained to never repeat a pair that shares a bucket in map 0."""
    if n_maps < 1:
        return []
    ids = np.asarray(sets.ids)
    counts = np.bincount(ids[ids >= 0], minlength=n_ids)[:n_ids]
    emb = cooccurrence_embeddings(sets, n_ids, rank, seed)
    orders = [greedy_buckets(emb, counts, alpha, None, stats)]
    first = np.empty(n_ids, np.int64)
    first[orders[0]] = np.arange(n_ids) // alpha
    for _ in range(1, n_maps):
        orders.append(greedy_buckets(emb, counts, alpha, first, stats))
    return orders
