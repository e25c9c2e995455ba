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
   for Epinions' 278K ids on 2 CPU cores.

3. Above TREE_MIN_IDS ids (the paper's 5.3M: the exact greedy would take hours), a balanced
   bisection tree (`tree_order`) replaces it: every segment of the current order is split, at a
   multiple of alpha, along the difference of the means of its two halves (started from a random
   member and the least similar of a few others), until every segment is one bucket; siblings stay
   adjacent, so consecutive buckets are similar too. Later maps take one id from each of alpha
   consecutive first-map buckets (`interleaved_order`): similar ids, never two of one first-map bucket.
   About O(N r log(N / alpha)) work: 280-302 s for 5.1M ids on one 2-core machine with the rank-32
   factorisation, of which the tree took 142 s; keeping the rows in tree order and one uint64
   argsort per pass brought the tree to 81-84 s, the same permutation.

Where the constraint cannot be met (the last few ids may all come from a few first-map buckets)
the bucket is filled anyway and the violation counted; `BloomHash.from_orders` then separates any
pair of ids that share all m buckets, so the final maps always satisfy it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from ..data.dataset import SetArray
from .config import TREE_MIN_IDS  # from this many ids on, the bisection tree instead of the exact greedy

RANK = 32  # factorisation rank r
OVERSAMPLE = 16  # randomized SVD: extra columns of the sketch
POWER_ITERS = 4  # randomized SVD: subspace iterations (sharpen a slowly decaying spectrum)
SLACK = 256  # extra candidates kept per seed (absorb the ids claimed by earlier seeds of a block)
BLOCK_ELEMS = 1 << 24  # similarity entries (seeds x unassigned) computed at once
# the factorisation's tall (N, r + OVERSAMPLE) blocks are float64 up to this many entries (~1 GB), float32
# beyond: at 5.3M ids and r = 128 a float64 block is 6.1 GB and the sketch holds three of them
FLOAT64_MAX_ELEMS = 1 << 27
GRAM_ROWS = 1 << 18  # rows per chunk when a float32 block's Gram matrix is accumulated in float64
TREE_SAMPLES = 8  # a segment's first split direction: a random member to the least similar of these
TREE_REFINE = 2  # then this many times: the difference of the means of the two halves (balanced 2-means)
TREE_ROWS = 1 << 20  # rows per chunk of the projections
LEXSORT_MAX_SEGMENTS = 64  # below this many segments np.lexsort is the faster sort (see _order_within)


@dataclass
class CoherentStats:
    """What the greedy had to do; for the report, not needed by the maps."""
    rescans: int = 0  # seeds whose candidate list ran short and were rescanned against all ids
    violations: int = 0  # buckets where the first-map constraint could not be met (tail only)
    method: str = "greedy"  # "greedy" (exact, the paper's) or "tree" (above TREE_MIN_IDS ids)


def cooccurrence_embeddings(sets: SetArray, n_ids: int, rank: int = RANK, seed: int = 0) -> np.ndarray:
    """(N, r) unit rows whose dot products approximate the cosine co-occurrence of the ids.

    Ids that never co-occur with another id get a zero row (cosine 0 with every id). Up to
    FLOAT64_MAX_ELEMS entries per tall block the sketch is float64; beyond (millions of ids) it is
    float32 with float64 Gram matrices, which keeps the peak memory at about three (N, r + 16)
    float32 blocks."""
    x = sets.incidence(n_ids)  # (S, N) binary
    counts = np.asarray(x.sum(0)).ravel()
    r = max(1, min(rank, min(x.shape) - 1))
    width = min(r + OVERSAMPLE, min(x.shape))
    dtype = np.float64 if n_ids * width <= FLOAT64_MAX_ELEMS else np.float32
    a = (sp.diags(1.0 / np.sqrt(np.maximum(counts, 1.0))) @ x.T).tocsr().astype(dtype)  # (N, S); this exact
    # construction (its summation order) is what the float64 path's figures were measured with
    del x
    rng = np.random.default_rng([seed, 7])
    with _one_thread():  # tiny LAPACK calls (w x w): threads only add synchronisation
        return _randomized_embeddings(a, r, width, rng)


def _one_thread():
    """torch's OpenMP pool at one thread for the block, restored after (threadpoolctl: the caller's
    setting is not touched otherwise)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="openmp")


def _dense(z: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(z))


def _randomized_embeddings(a: sp.csr_matrix, r: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """Rank-r U_r s_r of the sparse A (N, S) by a randomized SVD with power iterations, unit rows."""
    q = _orthonormal(_dense(a @ rng.standard_normal((a.shape[1], width)).astype(a.dtype)))  # (N, w) range of A
    for _ in range(POWER_ITERS):
        p = _orthonormal(_dense(a.T @ q.numpy()))  # (S, w)
        q = _orthonormal(_dense(a @ p.numpy()))  # (N, w)
    ub, s, _ = torch.linalg.svd(_dense((a.T @ q.numpy()).T).double(), full_matrices=False)  # B = Q^T A: (w, S)
    emb = q @ ub[:, :r].to(q.dtype)  # (N, r) = U_r s_r (this association: the float64 path's figures)
    del q
    emb.mul_(s[:r].to(emb.dtype))
    norm = emb.norm(dim=1, keepdim=True)
    return emb.div_(torch.where(norm > 1e-12, norm, torch.inf)).float().numpy()


def _orthonormal(y: torch.Tensor) -> torch.Tensor:
    """Orthonormal basis of the columns of a tall y (n, w), from the small Gram matrix (w, w)
    applied twice ("CholeskyQR2" with an eigendecomposition): cheaper than Householder QR of a
    296K x 48 matrix. Directions with a negligible eigenvalue are dropped. A float32 y keeps its
    dtype; its Gram matrix and eigendecomposition are float64 (summed over row chunks)."""
    for _ in range(2):
        w, v = torch.linalg.eigh(_gram(y))
        keep = w > (1e-12 if y.dtype == torch.float64 else 1e-9) * max(float(w[-1]), 1e-300)
        y = y @ (v[:, keep] / w[keep].sqrt()).to(y.dtype)
    return y


def _gram(y: torch.Tensor) -> torch.Tensor:
    """y^T y in float64 (w, w)."""
    if y.dtype == torch.float64:
        return y.T @ y
    g = torch.zeros((y.shape[1], y.shape[1]), dtype=torch.float64)
    for i in range(0, len(y), GRAM_ROWS):
        c = y[i:i + GRAM_ROWS].double()
        g += c.T @ c
    return g


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
    emb = cooccurrence_embeddings(sets, n_ids, rank, seed)
    if n_ids >= TREE_MIN_IDS:
        stats = stats if stats is not None else CoherentStats()
        stats.method = "tree"
        orders = [tree_order(emb, alpha, seed)]
        whole = (n_ids // alpha) * alpha  # the full buckets (a last, smaller one stays last)
        for j in range(1, n_maps):  # each later map from the first map's buckets shifted by whole buckets
            shifted = np.concatenate([np.roll(orders[0][:whole], -(j - 1) * alpha * max(1, alpha // 2)),
                                      orders[0][whole:]])
            orders.append(interleaved_order(shifted, alpha, stats))
        return orders
    ids = np.asarray(sets.ids)
    counts = np.bincount(ids[ids >= 0], minlength=n_ids)[:n_ids]  # the greedy's seed order
    orders = [greedy_buckets(emb, counts, alpha, None, stats)]
    first = np.empty(n_ids, np.int64)
    first[orders[0]] = np.arange(n_ids) // alpha
    for _ in range(1, n_maps):
        orders.append(greedy_buckets(emb, counts, alpha, first, stats))
    return orders


def tree_order(emb: np.ndarray, alpha: int, seed: int = 0) -> np.ndarray:
    """Order of the ids whose consecutive runs of alpha are similar ids: a balanced bisection tree
    on the rows of `emb` (N, r). Every segment longer than alpha splits, at a multiple of alpha
    (the left part holds floor(c / 2) buckets of its c), along a direction of its own: from a random
    member to the least similar of TREE_SAMPLES random members, then TREE_REFINE times the difference
    of the two halves' means. All segments of a level are split at once (segment sums and one
    stable sort per pass, never a loop over segments). -> (N,) int64 permutation."""
    n = len(emb)
    xs = torch.as_tensor(emb, dtype=torch.float32)  # the rows in the current order: xs[i] = emb[perm[i]]
    rng = np.random.default_rng([seed, 11])
    perm = np.arange(n, dtype=np.int64)
    starts, sizes = np.zeros(1, np.int64), np.array([n], np.int64)
    while (sizes > alpha).any():
        seg = np.repeat(np.arange(len(sizes)), sizes)  # (N,) segment of every position
        left = (-(-sizes // alpha) // 2) * alpha  # (S,) ids in the left part (0 for a finished bucket)
        pick = starts[:, None] + (rng.random((len(sizes), TREE_SAMPLES + 1)) * sizes[:, None]).astype(np.int64)
        pts = xs[torch.from_numpy(pick)]  # (S, 1 + K, r)
        far = (pts[:, 1:] @ pts[:, 0, :, None])[..., 0].argmin(1)  # least similar sample to the first
        direction = pts[torch.arange(len(sizes)), 1 + far] - pts[:, 0]  # (S, r)
        half = seg * 2 + ((np.arange(n) - starts[seg]) >= left[seg])  # (N,) segment and half, balanced
        for it in range(TREE_REFINE + 1):
            proj = _segment_dot(xs, direction, seg)
            order = _order_within(proj, seg, len(sizes))  # within each segment, by projection
            perm = perm[order]
            xs = xs[torch.from_numpy(order)]
            if it == TREE_REFINE:
                break
            direction = _half_means(xs, half, len(sizes))
        cut = sizes > alpha
        starts = np.sort(np.concatenate([starts, starts[cut] + left[cut]]))
        sizes = np.diff(np.append(starts, n))
    return perm


def _order_within(proj: np.ndarray, seg: np.ndarray, n_segments: int) -> np.ndarray:
    """np.lexsort((proj, seg)), ties included, for non-decreasing seg. From LEXSORT_MAX_SEGMENTS
    segments on, one stable argsort of a uint64 key (segment, then the order-preserving bits of
    proj) instead: 0.3-0.4 s against 1.2-1.3 s for 5.1M positions and 1,000-100,000 segments."""
    if n_segments < LEXSORT_MAX_SEGMENTS:
        return np.lexsort((proj, seg))
    bits = (proj.astype(np.float32) + np.float32(0)).view(np.uint32)  # -0.0 -> +0.0: a tie, as lexsort sees it
    key = np.where((bits >> np.uint32(31)).astype(bool), ~bits, bits | np.uint32(0x80000000)).astype(np.uint64)
    key |= seg.astype(np.uint64) << np.uint64(32)
    return np.argsort(key, kind="stable")


def _segment_dot(xs: torch.Tensor, direction: torch.Tensor, seg: np.ndarray) -> np.ndarray:
    """(N,) xs[i] . direction[seg[i]], in row chunks."""
    out = np.empty(len(xs), np.float32)
    for i in range(0, len(xs), TREE_ROWS):
        out[i:i + TREE_ROWS] = (xs[i:i + TREE_ROWS] * direction[torch.from_numpy(seg[i:i + TREE_ROWS])]).sum(1).numpy()
    return out


def _half_means(xs: torch.Tensor, half: np.ndarray, n_segments: int) -> torch.Tensor:
    """(S, r) per segment: mean of its right half - mean of its left half (zero where a half is empty)."""
    sums = torch.zeros((2 * n_segments, xs.shape[1]), dtype=torch.float64)
    for i in range(0, len(xs), TREE_ROWS):
        sums.index_add_(0, torch.from_numpy(half[i:i + TREE_ROWS]), xs[i:i + TREE_ROWS].double())
    counts = torch.from_numpy(np.bincount(half, minlength=2 * n_segments)).double().clamp_min(1)[:, None]
    means = (sums / counts).view(n_segments, 2, -1)
    return (means[:, 1] - means[:, 0]).float()


def interleaved_order(first: np.ndarray, alpha: int, stats: CoherentStats | None = None) -> np.ndarray:
    """A second coherent map from a first map's order (buckets = runs of alpha): every group of
    alpha consecutive first-map buckets (alpha^2 similar ids) is read column-wise, so each new bucket
    takes one id from each of alpha neighbouring first-map buckets. The last, incomplete group can
    repeat a first-map bucket within a new bucket: those buckets are counted in stats.violations
    (BloomHash.from_orders separates any pair that would share every bucket)."""
    n, g = len(first), alpha * alpha
    full = (n // g) * g
    head = first[:full].reshape(-1, alpha, alpha).transpose(0, 2, 1).reshape(-1)
    tail = first[full:]
    rows = -(-len(tail) // alpha)
    padded = np.full(rows * alpha, -1, np.int64)
    padded[:len(tail)] = tail
    tail_t = padded.reshape(rows, alpha).T.reshape(-1)
    out = np.concatenate([head, tail_t[tail_t >= 0]])
    if stats is not None and len(tail):
        b1 = np.empty(n, np.int64)
        b1[first] = np.arange(n) // alpha
        tb = b1[out[full:]]  # first-map buckets of the tail's new buckets
        for i in range(0, len(tb), alpha):
            chunk = tb[i:i + alpha]
            stats.violations += int(len(np.unique(chunk)) < len(chunk))
    return out
