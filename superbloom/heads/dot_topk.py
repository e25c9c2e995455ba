"""Exact top-k of dot products between query vectors and a table of item vectors, chunked over both
queries and items, so that no (Q, M) score matrix exists at once (at 5.3M ids one query row is
21 MB of float32; the factor baselines, item2vec.py and als.py, rank with this).

    rows, scores = table_topk(queries, table, exclude_rows, k)   # (Q, d), (M, d), (Q, X) -> (Q, k) x 2

Each block of `SCORE_ENTRIES` float32 scores (queries x items) keeps its exact top k per query and
merges it into the running top k. Ties in score go to the smaller table row, exactly (at a block's
k-th value too), so a caller that lays its table out most popular first breaks ties by popularity.
Memory: the table itself, plus about 20 bytes per entry of one block (the scores, two masks and a
running count): ~170 MB at the default block, whatever Q and M are.
"""
from __future__ import annotations

import numpy as np

SCORE_ENTRIES = 8 << 20  # scores per block (32 MB of float32)
QUERY_BLOCK = 512  # queries per block (fewer when the table is short)


def _block_topk(s: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top k columns of each row of s (B, n) by score, ties to the smaller column -> (B, k) cols, (B, k) scores
    (cols in increasing order, not by score: the caller sorts after merging)."""
    b, n = s.shape
    if n <= k:
        cols = np.broadcast_to(np.arange(n), (b, n))
        return cols, s
    t = -np.partition(-s, k - 1, axis=1)[:, k - 1:k]  # (B, 1) the k-th largest score
    above = s > t  # (B, n)
    tie = s == t  # (B, n)
    need = k - above.sum(1, keepdims=True)  # (B, 1) >= 1: at least the k-th itself ties
    sel = above | (tie & (np.cumsum(tie, 1) <= need))  # exactly k per row: ties to the smaller column
    cols = np.nonzero(sel)[1].reshape(b, k)  # row-major, so k per row in order
    return cols, np.take_along_axis(s, cols, 1)


def table_topk(queries: np.ndarray, table: np.ndarray, exclude_rows: np.ndarray, k: int,
               score_entries: int = SCORE_ENTRIES) -> tuple[np.ndarray, np.ndarray]:
    """The k table rows of largest dot product with each query, best first.

    queries (Q, d) float32; table (M, d) float32; exclude_rows (Q, X) int64 table rows never returned
    (-1: none) -> rows (Q, k) int64 (-1 where fewer than k rows are rankable), scores (Q, k) float32
    (-inf there). Ties go to the smaller row."""
    queries = np.asarray(queries, np.float32)
    n_q, m = len(queries), len(table)
    rows_out = np.full((n_q, k), -1, np.int64)
    scores_out = np.full((n_q, k), -np.inf, np.float32)
    qb = max(1, min(QUERY_BLOCK, n_q))
    nb = max(k, score_entries // qb)  # items per block
    for a in range(0, n_q, qb):
        q = queries[a:a + qb]  # (B, d)
        ex = exclude_rows[a:a + qb]  # (B, X)
        best_r = np.zeros((len(q), 0), np.int64)
        best_s = np.zeros((len(q), 0), np.float32)
        for c in range(0, m, nb):
            s = q @ table[c:c + nb].T  # (B, n) float32
            r, col = np.nonzero((ex >= c) & (ex < c + s.shape[1]))
            s[r, ex[r, col] - c] = -np.inf
            cols, sc = _block_topk(s, k)
            best_r = np.concatenate([best_r, cols + c], 1)  # (B, <= 2k)
            best_s = np.concatenate([best_s, sc], 1)
            order = np.lexsort((best_r, -best_s), axis=-1)[:, :k]  # score desc, then smaller row
            best_r = np.take_along_axis(best_r, order, 1)
            best_s = np.take_along_axis(best_s, order, 1)
        kk = best_r.shape[1]
        rows_out[a:a + len(q), :kk] = np.where(np.isneginf(best_s), -1, best_r)
        scores_out[a:a + len(q), :kk] = best_s
    return rows_out, scores_out


def id_counts(ids: np.ndarray, n_ids: int, step: int = 1 << 22) -> np.ndarray:
    """(N,) int64 occurrences of each id in `ids` (L,) (a memory map is fine), summed over chunks of
    `step`: np.bincount of the whole would first copy int32 ids to int64 (8 L bytes at once)."""
    counts = np.zeros(n_ids, np.int64)
    for a in range(0, len(ids), step):
        counts += np.bincount(np.asarray(ids[a:a + step]), minlength=n_ids)
    return counts


def popularity_table(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ids seen in training (counts > 0), most popular first (ties: smaller id) -> seen (M,) int64
    ids in table order, and row_of (N,) int64: each id's table row (-1: unseen)."""
    order = np.argsort(-np.asarray(counts), kind="stable")
    seen = order[np.asarray(counts)[order] > 0]
    row_of = np.full(len(counts), -1, np.int64)
    row_of[seen] = np.arange(len(seen))
    return seen, row_of


def excluded_rows(row_of: np.ndarray, contexts: np.ndarray, exclude: np.ndarray | None) -> np.ndarray:
    """Table rows never ranked for each query: its context ids and its `exclude` ids (Q, c), (Q, X),
    -1 padded -> (Q, c + X) rows (-1: none or an id without a row)."""
    ids = contexts if exclude is None else np.concatenate([contexts, np.asarray(exclude, np.int64)], 1)
    ids = np.asarray(ids, np.int64)
    return np.where(ids >= 0, row_of[np.maximum(ids, 0)], -1)
