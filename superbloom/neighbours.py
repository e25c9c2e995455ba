"""Each id's `k` most frequent co-occurring ids and their cosine, built in blocks of ids (bounded memory).

The hybrid heads' co-occurrence term (heads/hybrid.py neighbour_pattern + baselines.Cooccurrence)
forms the (S, N) incidence X and the whole (N, N) co-occurrence C = X^T X before keeping each row's
`k` largest: at millions of ids with tens of millions of links C holds billions of values. Here C
is never formed: the ids are cut into blocks whose co-occurrence pairs fit a budget (`pair_budget`);
for a block, every (id, set holding it) membership is expanded to the ids of that set, the (id, id')
pairs are counted by one sort (np.unique), and only each id's `k` largest counts are kept. Peak
memory: the memberships twice (by set and by id, O(links)) + O(pair_budget) for one block + the
result (N x k). Time: O(sum over sets of |set|^2 log) for the sorts, in vectorised numpy.

The result is bit for bit the hybrid's term: the same neighbours (count descending, ties by the
smaller id, no diagonal) and the same float32 cosine, count(i, j) / sqrt(n_i) / sqrt(n_j) with n_i
the number of sets holding i (at least 1), computed in float32 in the same order as the sparse
product diag(norm) @ C @ diag(norm) of baselines.Cooccurrence (tests/test_hashed_hybrid.py).

Measured (benchmarks/results/neighbours.md): see that file for the build time and peak memory on a
synthetic dataset and the estimate for 5M ids.
"""
from __future__ import annotations

import numpy as np
from tqdm.auto import tqdm


def memberships(sets, n_ids: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (set, id) pairs of a SetArray (an id repeated within a set counts once), sorted by
    set then id. -> (owner (L,) int64 set index, ids (L,) int64)."""
    lengths = np.diff(np.asarray(sets.offsets))
    owner = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)  # (L0,)
    key = np.unique(owner * n_ids + np.asarray(sets.ids, np.int64))  # (L,) sorted, distinct
    return key // n_ids, key % n_ids


def cooccurrence_neighbours(sets, n_ids: int, k: int, pair_budget: int = 1 << 22, progress: bool = False
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The `k` most frequent co-occurring ids of every id (ties by the smaller id, no diagonal) and
    their co-occurrence cosine, without the (N, N) co-occurrence matrix (see the module docstring).
    -> (indptr (N + 1,) int64, cols (nnz,) int64, values (nnz,) float32), each row sorted by id."""
    if k < 1:
        raise ValueError(f"k (neighbours) must be >= 1, got {k}")
    owner, ids = memberships(sets, n_ids)  # (L,), (L,) sorted by (set, id)
    n_sets_total = len(sets)
    set_len = np.bincount(owner, minlength=n_sets_total)  # (S,) distinct ids per set
    set_off = np.zeros(n_sets_total + 1, np.int64)
    np.cumsum(set_len, out=set_off[1:])
    id_sets = owner[np.argsort(ids, kind="stable")]  # (L,) the sets holding each id, grouped by id
    del owner
    n_sets = np.bincount(ids, minlength=n_ids)  # (N,) sets holding each id: the diagonal of X^T X
    id_off = np.zeros(n_ids + 1, np.int64)
    np.cumsum(n_sets, out=id_off[1:])
    # (N,) pairs each id expands to: the sizes of its sets (its own entries included)
    cum = np.cumsum(_pairs_per_id(set_len, id_sets, id_off, n_ids))
    # float32, as baselines.Cooccurrence: 1 / sqrt(max(n_i, 1)) of the float32 diagonal
    norm = np.float32(1.0) / np.sqrt(np.maximum(n_sets.astype(np.float32), np.float32(1.0)))  # (N,)
    cols_out, vals_out, lens_out = [], [], []
    bar = tqdm(total=n_ids, desc="co-occurring ids", unit="id", disable=not progress, leave=False)
    a = 0
    while a < n_ids:
        base = cum[a - 1] if a else 0.0
        b = int(min(n_ids, max(a + 1, np.searchsorted(cum, base + pair_budget, side="right"))))
        c, v, lens = _block(a, b, ids, set_len, set_off, id_sets, id_off, n_sets, norm, n_ids, k)
        cols_out.append(c), vals_out.append(v), lens_out.append(lens)
        bar.update(b - a)
        a = b
    bar.close()
    indptr = np.zeros(n_ids + 1, np.int64)
    np.cumsum(np.concatenate(lens_out) if lens_out else np.zeros(0, np.int64), out=indptr[1:])
    cols = np.concatenate(cols_out) if cols_out else np.zeros(0, np.int64)
    values = np.concatenate(vals_out) if vals_out else np.zeros(0, np.float32)
    return indptr, cols, values


def _pairs_per_id(set_len, id_sets, id_off, n_ids) -> np.ndarray:
    """(N,) float64: for every id, the summed sizes of the sets holding it."""
    per = set_len[id_sets].astype(np.float64)  # (L,) in id order
    out = np.zeros(n_ids, np.float64)
    nonempty = id_off[:-1] < id_off[1:]
    out[nonempty] = np.add.reduceat(per, id_off[:-1][nonempty]) if len(per) else 0.0
    return out


def _block(a, b, ids, set_len, set_off, id_sets, id_off, n_sets, norm, n_ids, k):
    """Ids a..b-1: their k most frequent co-occurring ids. -> (cols (nnz,) int64, values (nnz,)
    float32, lens (b - a,) int64), rows in id order, each sorted by column."""
    s = id_sets[id_off[a]:id_off[b]]  # (P1,) the sets of the block's ids
    row = np.repeat(np.arange(a, b, dtype=np.int64), n_sets[a:b])  # (P1,) the id of each
    lens = set_len[s]  # (P1,)
    total = int(lens.sum())
    rep = np.repeat(np.arange(len(s), dtype=np.int64), lens)  # (P,) the membership of each pair
    start = np.cumsum(lens) - lens
    j = ids[set_off[s][rep] + (np.arange(total, dtype=np.int64) - start[rep])]  # (P,) co-occurring id
    i = row[rep]
    del rep
    keep = j != i
    key, count = np.unique((i[keep] - a) * n_ids + j[keep], return_counts=True)  # (U,) sorted (row, col)
    r, c = key // n_ids, key % n_ids
    # within each row: count descending, then the smaller id (lexsort is stable and keys are by col)
    order = np.lexsort((-count, r))
    first = np.searchsorted(r[order], np.arange(b - a), side="left")  # (b - a,) where each row starts
    rank = np.arange(len(order)) - first[r[order]]
    kept = np.sort(order[rank < k])  # back in (row, col) order
    r, c, count = r[kept], c[kept], count[kept]
    values = (norm[a + r] * count.astype(np.float32)) * norm[c]  # float32, as diag(norm) @ C @ diag(norm)
    return c, values.astype(np.float32), np.bincount(r, minlength=b - a).astype(np.int64)
