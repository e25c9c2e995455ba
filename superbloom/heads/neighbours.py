"""Each id's `k` most frequent co-occurring ids and their cosine, built in blocks of ids (bounded memory).

Both hybrid heads' co-occurrence term comes from here. The first form of it (itemitem.py
neighbour_pattern + baselines.Cooccurrence) forms the (S, N) incidence X and the whole (N, N)
co-occurrence C = X^T X before keeping each row's `k` largest: at millions of ids with tens of
millions of links C holds billions of values (287,851 ids, 912K links: 286M values, 14 GB at the
peak of the two products). Here C
is never formed: the ids are cut into blocks whose co-occurrence pairs fit a budget (`pair_budget`);
for a block, every (id, set holding it) membership is expanded to the ids of that set, the (id, id')
pairs are counted by one sort (np.unique), and only each id's `k` largest counts are kept. Peak
memory: the memberships twice (by set and by id, O(links)) + O(pair_budget) for each block being
built + the result (N x k). Time: O(sum over sets of |set|^2 log) for the sorts, in vectorised numpy, the blocks
on up to BLOCK_THREADS cores at once (numpy releases the GIL) and their keys 32-bit where they fit.
Epinions sequences (287,851 ids, 305M pairs): 21.1 s on one thread, 11.1 s on two, the same arrays.

The result is bit for bit the hybrid's term: the same neighbours (count descending, ties by the
smaller id, no diagonal) and the same float32 cosine, count(i, j) / sqrt(n_i) / sqrt(n_j) with n_i
the number of sets holding i (at least 1), computed in float32 in the same order as the sparse
product diag(norm) @ C @ diag(norm) of baselines.Cooccurrence (tests/test_hashed_hybrid.py).

Its cost, measured, is in docs/architecture.md (design notes: the co-occurrence neighbours).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._log import progress_bar
from .itemitem import _row_major_descending


BLOCK_THREADS = 4  # blocks built at once, at most the cores (each holds O(pair_budget))
KEY32_MAX = int(np.iinfo(np.uint32).max)  # a block's (row, id) keys up to this are sorted as uint32


def memberships(sets, n_ids: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (set, id) pairs of a SetArray (an id repeated within a set counts once), sorted by
    set then id. -> (owner (L,) int64 set index, ids (L,) int32). (A sort and a comparison: np.unique
    on integers took 10 s for 2.7M keys with numpy 2.4, its hash path; this takes 0.05 s.)"""
    lengths = np.diff(np.asarray(sets.offsets))
    key = np.repeat(np.arange(len(lengths), dtype=np.int64) * n_ids, lengths)  # (L0,)
    key += np.asarray(sets.ids, np.int64)
    key.sort()
    if len(key):
        key = key[np.concatenate([[True], key[1:] != key[:-1]])]  # (L,) distinct
    return key // n_ids, (key % n_ids).astype(np.int32)


def cooccurrence_neighbours(sets, n_ids: int, k: int, pair_budget: int = 1 << 20, progress: bool = False,
                            counts: bool = False, by: str = "count") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The `k` most frequent co-occurring ids of every id (ties by the smaller id, no diagonal) and
    their co-occurrence cosine (`counts`: the number of sets holding both, the entry of X^T X), without
    the (N, N) co-occurrence matrix (see the module docstring). by "cosine": the `k` of largest cosine
    instead (count / sqrt(n_i n_j): a rare id's rare partners before the common words).
    -> (indptr (N + 1,) int64, cols (nnz,) int32, values (nnz,) float32), each row sorted by id."""
    if k < 1:
        raise ValueError(f"k (neighbours) must be >= 1, got {k}")
    if by not in ("count", "cosine"):
        raise ValueError(f"by must be count or cosine, got {by!r}")
    owner, ids = memberships(sets, n_ids)  # (L,), (L,) sorted by (set, id)
    set_len = np.bincount(owner, minlength=len(sets))  # (S,) distinct ids per set
    set_off = np.zeros(len(sets) + 1, np.int64)
    np.cumsum(set_len, out=set_off[1:])
    id_sets = owner[np.argsort(ids, kind="stable")]  # (L,) the sets holding each id, grouped by id
    del owner
    n_sets = np.bincount(ids, minlength=n_ids)  # (N,) sets holding each id: the diagonal of X^T X
    id_off = np.zeros(n_ids + 1, np.int64)
    np.cumsum(n_sets, out=id_off[1:])
    pairs = np.zeros(n_ids, np.int64)  # (N,) pairs each id expands to: the summed sizes of its sets
    has = n_sets > 0
    if len(id_sets):
        pairs[has] = np.add.reduceat(set_len[id_sets], id_off[:-1][has])
    cum = np.cumsum(pairs)
    # the result's size is at most min(k, distinct partners) <= min(k, pairs - n_sets) per id: one
    # buffer of that bound is filled block by block (no list of blocks concatenated at the end)
    bound = np.minimum(k, pairs - n_sets)
    cols = np.zeros(int(bound.sum()), np.int32)
    values = np.zeros(len(cols), np.float32)
    lens = np.zeros(n_ids, np.int64)
    # float32, as baselines.Cooccurrence: 1 / sqrt(max(n_i, 1)) of the float32 diagonal
    norm = np.float32(1.0) / np.sqrt(np.maximum(n_sets.astype(np.float32), np.float32(1.0)))  # (N,)
    edges = [0]  # the blocks: ids edges[j]..edges[j + 1] - 1, each's pairs about the budget
    while edges[-1] < n_ids:
        a = edges[-1]
        base = cum[a - 1] if a else 0
        edges.append(int(min(n_ids, max(a + 1, np.searchsorted(cum, base + pair_budget, side="right")))))

    def block(j: int):
        a, b = edges[j], edges[j + 1]
        return a, b, _block(a, b, ids, set_len, set_off, id_sets[id_off[a]:id_off[b]], n_sets[a:b], n_ids, k,
                            norm if by == "cosine" else None)

    bar = progress_bar(total=n_ids, desc="co-occurring ids", unit="id", progress=progress, leave=False)
    used = 0
    # blocks on the cores at once (numpy's sorts release the GIL), their results written in block order
    with ThreadPoolExecutor(max(1, min(BLOCK_THREADS, os.cpu_count() or 1))) as pool:
        for a, b, (c, count, row_lens) in pool.map(block, range(len(edges) - 1)):
            r = np.repeat(np.arange(a, b), row_lens)
            cols[used:used + len(c)] = c
            values[used:used + len(c)] = (count if counts else  # the cosine as diag(norm) @ C @ diag(norm):
                                          (norm[r] * count.astype(np.float32)) * norm[c])
            lens[a:b] = row_lens
            used += len(c)
            bar.update(b - a)
    bar.close()
    indptr = np.zeros(n_ids + 1, np.int64)
    np.cumsum(lens, out=indptr[1:])
    return indptr, cols[:used], values[:used]


def _block(a, b, ids, set_len, set_off, sets_of_block, n_sets_block, n_ids, k, norm=None):
    """Ids a..b-1 (their sets `sets_of_block`, grouped by id): their k most frequent co-occurring ids
    (norm (N,): of largest count x norm[id], the cosine's order within a row).
    -> (cols (nnz,) int32, counts (nnz,) int64, lens (b - a,) int64), rows in id order, each sorted
    by column."""
    lens = set_len[sets_of_block]  # (P1,) size of each set of each id
    total = int(lens.sum())
    start = np.cumsum(lens) - lens  # (P1,) where each membership's pairs begin
    # (P,) key (row, co-occurring id) = local row x N + id, the id read from its set's slice of ids
    pos = np.arange(total, dtype=np.int64)
    pos += np.repeat(set_off[sets_of_block] - start, lens)
    # 32-bit keys where they fit: the sort, most of the time here, takes half as long (1M keys: 33 ms / 69 ms)
    kind = np.uint32 if (b - a) * n_ids <= KEY32_MAX else np.int64
    key = np.repeat(np.repeat(np.arange(b - a, dtype=kind) * kind(n_ids), n_sets_block), lens)
    key += ids[pos].astype(kind, copy=False)
    del pos
    key.sort()
    first = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])) if total else np.zeros(0, np.int64)
    count = np.diff(np.append(first, total))  # (U,) sets holding both ids
    key = key[first].astype(np.int64)
    row_lens = np.diff(np.searchsorted(key, np.arange(b - a + 1, dtype=np.int64) * n_ids))  # (B,)
    r = np.repeat(np.arange(b - a, dtype=np.int64), row_lens)  # (U,) local row
    c = key - r * n_ids  # (U,) co-occurring id
    other = c != r + a  # no diagonal
    r, c, count = r[other], c[other], count[other]
    row_lens = np.bincount(r, minlength=b - a)
    if (row_lens > k).any():  # keep each row's k largest counts, ties by the smaller id
        if norm is not None:  # row, count x norm descending, then id
            order = _row_major_descending(r, count.astype(np.float32) * norm[c])
        else:
            big = count.max() + 1
            order = np.argsort(r * big + (big - 1 - count), kind="stable")  # row, count descending, then id
        row_start = np.cumsum(row_lens) - row_lens
        rank = np.arange(len(order)) - row_start[r[order]]
        kept = np.sort(order[rank < k])  # back in (row, id) order
        r, c, count = r[kept], c[kept], count[kept]
        row_lens = np.minimum(row_lens, k)
    return c.astype(np.int32), count, row_lens
