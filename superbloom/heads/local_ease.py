"""EASE on each id's neighbourhood: a sparse EASE-class item-item term in bounded memory and time.

EASE (Steck 2019; itemitem.ease_weights) weighs id c for target j by B[c, j] = -P[c, j] / P[j, j],
P = (G + lam I)^-1, G = X^T X: column j of B is the ridge regression of j's incidence column on all
the others, b = (G[O, O] + lam I)^-1 G[O, j] over O = every id but j. Dense, so N x N. Here the
regression of target j runs over its neighbourhood N(j) only, the `k` ids that co-occur with it most
(by count, or by cosine: a rare id's rare partners first), with G[N, N] read from every id's `lists`
co-occurring ids of largest count (or cosine) (neighbours.py: G[a, b] is known where b is in a's
list or a in b's, taken as 0 elsewhere; the diagonal is each id's number of sets):

    B[N(j), j] = (G[N, N] + lam I)^-1 G[N, j]          P[j, j] = 1 / (G[j, j] + lam - G[j, N] B[N, j])

P is symmetric, so the same solve also gives row j: B[j, c] = B[c, j] P[j, j] / P[c, c] for c in N(j)
(used where c's own regression did not reach j; the direct value wins where both exist). An id that is
no one's top neighbour (a rare one) still gets a row: its own neighbourhood's. With k >= N - 1, lists
holding every co-occurring id and every pair of ids co-occurring, this is dense EASE exactly
(tests/test_local_ease.py). The term keeps the `keep` values of largest magnitude of every row, as
the EASE term does (itemitem.largest_pattern).

The solves are batched: the targets are cut into blocks whose neighbourhoods' union U fits a dense
(|U|, |U|) scratch (BLOCK_IDS), G[U, U] is scattered into it from the lists, every target's K x K
system gathered from it and solved by one batched Cholesky (torch, float64), and the scratch entries
written are zeroed again (no memset per block). Memory: the lists and their symmetric copy (~16 bytes
a value each), the scratch (BLOCK_IDS^2 x 4 bytes), the N x k solutions, and the merge of 2 N k
(row, column) keys (~40 bytes each at the peak). Time: the lists (neighbours.py), then ~N k^2 gathers
and N k^3 / 3 flops of Cholesky, in one Python iteration per block of targets.
"""
from __future__ import annotations

import logging
import time

import numpy as np
import torch

from .._log import progress_bar
from .itemitem import _row_major_descending
from .neighbours import cooccurrence_neighbours, memberships

log = logging.getLogger(__name__)

BLOCK_IDS = 8192  # the most distinct ids of a block's neighbourhoods: a 8192^2 float32 scratch, 268 MB
BYS = ("count", "cosine")  # what picks an id's neighbourhood among its co-occurring ids
SHIFT_STEP = 1e-3  # _cholesky_shifted: the first diagonal shift of a system that does not factor, x its mean diagonal


def local_ease(sets, n_ids: int, k: int = 64, lam: float = 50.0, lists: int | None = None, by: str = "count",
               keep: int = 200, progress: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The neighbourhood EASE term of the training sets (a SetArray) -> A in CSR: (indptr (N + 1,)
    int64, cols (nnz,) int64, values (nnz,) float32), each row sorted by id, at most `keep` values per
    row (the largest |B[c, j]|), no diagonal: score(j | context) = sum_{c in context} A[c, j]. k: the
    neighbourhood of each target; lists (>= k, default k): the co-occurring ids per id G is read from."""
    if k < 1 or keep < 1:
        raise ValueError(f"local EASE: k and keep must be >= 1, got k {k}, keep {keep}")
    if not lam > 0:
        raise ValueError(f"local EASE: lam must be > 0, got {lam}")
    if by not in BYS:
        raise ValueError(f"local EASE: by must be one of {BYS}, got {by!r}")
    lists = max(k, lists or k)
    t0 = time.time()
    fitted = Lists.of(sets, n_ids, lists, progress, by)
    log.info("local EASE: %s ids, neighbourhoods of %d, G from %d co-occurring ids each (%s values, %.1f s)",
             f"{n_ids:,}", k, lists, f"{len(fitted.cols):,}", time.time() - t0)
    return fitted.term(k, lam, by, keep, progress)


class Lists:
    """Every id's most frequent co-occurring ids with their counts (indptr, cols, counts: CSR, rows
    sorted by id) and each id's number of sets `df`: what local EASE reads G from. Built once, they
    serve any k, lam, by and any shorter lists (`shorter`): a validation tries its settings on one build."""

    def __init__(self, indptr, cols, counts, df, by: str = "count"):
        self.indptr, self.cols, self.counts, self.df, self.by = indptr, cols, counts, df, by
        self.rows = np.repeat(np.arange(len(df), dtype=np.int64), np.diff(indptr))

    @classmethod
    def of(cls, sets, n_ids: int, lists: int, progress: bool = False, by: str = "count") -> "Lists":
        indptr, cols, counts = cooccurrence_neighbours(sets, n_ids, lists, counts=True, progress=progress, by=by)
        df = np.bincount(memberships(sets, n_ids)[1], minlength=n_ids).astype(np.float64)  # the diagonal of G
        return cls(indptr, cols, counts, df, by)

    def shorter(self, lists: int) -> "Lists":
        """Each id's `lists` first of these by their order (ties by the smaller id): as Lists.of(sets, N, lists, by)."""
        n = len(self.df)
        nb = _neighbourhoods(self.rows, self.cols, self.counts, self.df, n, lists, self.by)
        real = nb >= 0
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(real.sum(1), out=indptr[1:])
        cols = nb[real]
        at = np.searchsorted(self.rows * n + self.cols, np.repeat(np.arange(n), real.sum(1)) * n + cols)
        return Lists(indptr, cols.astype(np.int32), self.counts[at], self.df, self.by)

    def term(self, k: int, lam: float, by: str = "count", keep: int = 200, progress: bool = False):
        """The local EASE term of these lists (local_ease)."""
        n = len(self.df)
        nb = _neighbourhoods(self.rows, self.cols, self.counts, self.df, n, k, by)  # (N, k), -1 padded
        b, p_diag = _solve_blocks((self.indptr, self.cols, self.counts), self.df, nb, lam, progress)
        return _merge(nb, b, p_diag, n, keep)


def _neighbourhoods(rows, cols, counts, df, n_ids: int, k: int, by: str) -> np.ndarray:
    """Each id's k co-occurring ids of largest count (or cosine), ties by the smaller id -> (N, k)
    int64, each row sorted by id, -1 padded at the end."""
    value = counts if by == "count" else (counts / np.sqrt(np.maximum(df[rows] * df[cols], 1.0))).astype(np.float32)
    order = _row_major_descending(rows, value)  # row, value descending, then id (cols sorted within rows)
    lens = np.bincount(rows, minlength=n_ids)
    rank = np.arange(len(order)) - np.repeat(np.cumsum(lens) - lens, lens)
    kept = order[rank < k]
    nb = np.full((n_ids, k), n_ids, np.int64)
    nb[rows[kept], rank[rank < k]] = cols[kept]
    nb.sort(axis=1)
    nb[nb == n_ids] = -1
    return nb


def _solve_blocks(lists, df: np.ndarray, nb: np.ndarray, lam: float, progress: bool
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Every target's ridge regression over its neighbourhood (module docstring), in blocks of targets;
    G[U, U] scattered from the lists (indptr, cols, counts) of the block's ids, each value at (a, b)
    and (b, a) (a hub is in everyone's list: its own list is scanned, never the ids that list it).
    -> (B (N, k) float32: B[nb[j, i], j] at [j, i]; P's diagonal (N,) float64)."""
    n, k = nb.shape
    per = max(1, (BLOCK_IDS - 1) // (k + 1))  # targets a block: |U| <= per (k + 1) < BLOCK_IDS
    scratch = torch.zeros(BLOCK_IDS * BLOCK_IDS, dtype=torch.float32)
    pos = np.full(n, -1, np.int64)  # an id's index in the block's union U, -1 outside it
    g_ptr, g_col, g_val = lists[0].astype(np.int64), lists[1], lists[2].astype(np.float32, copy=False)
    b_out = np.zeros((n, k), np.float32)
    p_diag = np.zeros(n, np.float64)
    eye = lam * torch.eye(k, dtype=torch.float64)
    bar = progress_bar(total=n, desc="local EASE solves", unit="id", progress=progress, leave=False)
    t0, said = time.time(), False
    for a in range(0, n, per):
        t = np.arange(a, min(n, a + per))
        nbt = nb[t]  # (B, k)
        u = np.unique(np.concatenate([t, nbt[nbt >= 0]]))  # (|U|,) sorted
        m = len(u) + 1  # + one zero row / column that the padding points at
        pos[u] = np.arange(len(u))
        lens = g_ptr[u + 1] - g_ptr[u]
        at = np.repeat(g_ptr[u] - (np.cumsum(lens) - lens), lens) + np.arange(int(lens.sum()))
        lc = pos[g_col[at]]
        inside = lc >= 0
        lr, lc = np.repeat(np.arange(len(u)), lens)[inside], lc[inside]
        flat = torch.from_numpy(np.concatenate([lr * m + lc, lc * m + lr]))  # (a, b) and (b, a)
        diag = torch.from_numpy(np.arange(len(u)) * (m + 1))
        # index_copy_ / index_select, not tensor[index]: 3-5x faster on the CPU for these sizes
        scratch.index_copy_(0, flat, torch.from_numpy(np.tile(g_val[at][inside], 2)))
        scratch.index_copy_(0, diag, torch.from_numpy(df[u].astype(np.float32)))
        li = torch.from_numpy(np.where(nbt >= 0, pos[np.maximum(nbt, 0)], len(u)))  # (B, k)
        lt = torch.from_numpy(pos[t])  # (B,)
        gnn = scratch.index_select(0, (li[:, :, None] * m + li[:, None, :]).view(-1)).view(len(t), k, k).double()
        gnn += eye  # (B, k, k)
        gnj = scratch.index_select(0, (li * m + lt[:, None]).view(-1)).view(len(t), k).double()  # (B, k)
        scratch.index_fill_(0, flat, 0.0)
        scratch.index_fill_(0, diag, 0.0)
        pos[u] = -1
        chol = _cholesky_shifted(gnn)
        sol = torch.cholesky_solve(gnj[:, :, None], chol)[:, :, 0]  # (B, k)
        b_out[t] = sol.float().numpy()
        # the Schur complement of a true Gram matrix is >= lam; a truncated one's is kept there
        p_diag[t] = 1.0 / np.maximum(df[t] + lam - (gnj * sol).sum(1).numpy(), lam)
        bar.update(len(t))
        if not said and time.time() - t0 > 10:
            log.info("local EASE: %s targets solved in %.0f s, about %.0f s to go", f"{t[-1] + 1:,}",
                     time.time() - t0, (time.time() - t0) * (n - t[-1] - 1) / (t[-1] + 1))
            said = True
    bar.close()
    return b_out, p_diag


def _cholesky_shifted(gnn: torch.Tensor) -> torch.Tensor:
    """Batched Cholesky factors of (B, k, k) systems. G[N, N] read from truncated lists (the values
    outside them taken as 0) need not be positive definite: a failing system gets SHIFT_STEP x its mean
    diagonal added to its diagonal, doubled until it factors (an incomplete Cholesky's diagonal shift,
    as SANSA's ICF does)."""
    chol, info = torch.linalg.cholesky_ex(gnn)
    bad = (info != 0).nonzero().squeeze(1)
    step, tries = SHIFT_STEP, 0
    while bad.numel():
        if tries == 60:
            raise ValueError("local EASE: a neighbourhood's Gram matrix did not factor with any diagonal shift")
        sub = gnn[bad]
        mean = sub.diagonal(dim1=1, dim2=2).mean(1)  # (b,)
        sub = sub + (step * mean)[:, None, None] * torch.eye(sub.shape[1], dtype=sub.dtype)
        c, info = torch.linalg.cholesky_ex(sub)
        ok = info == 0
        chol[bad[ok]] = c[ok]
        gnn[bad[ok]] = sub[ok]  # the system solved is the shifted one
        bad, step, tries = bad[~ok], 2 * step, tries + 1
    return chol


def _merge(nb: np.ndarray, b: np.ndarray, p_diag: np.ndarray, n_ids: int, keep: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A from the solves: A[c, j] = B[c, j] for c in N(j) (direct), else B[j, c] P[c, c] / P[j, j]
    for j in N(c) (P's symmetry); each row's `keep` largest |values| -> CSR, rows sorted by id."""
    n, k = nb.shape
    real = nb >= 0
    j = np.repeat(np.arange(n, dtype=np.int64), real.sum(1))  # (E,) the target of each solve's value
    c = nb[real]  # (E,) the neighbour
    v = b[real]
    sym = (v.astype(np.float64) * p_diag[j] / p_diag[c]).astype(np.float32)  # B[j, c] from P's symmetry
    key = np.concatenate([c * n_ids + j, j * n_ids + c])  # (2E,) row * N + col: direct first
    vals = np.concatenate([v, sym])
    del j, c, v, sym
    key, first = np.unique(key, return_index=True)  # the first occurrence: the direct value where both exist
    vals = vals[first]
    del first
    rows = key // n_ids
    lens = np.bincount(rows, minlength=n_ids)
    if lens.max(initial=0) > keep:  # each row's `keep` largest |values|, ties by the smaller id
        order = _row_major_descending(rows, np.abs(vals))
        rank = np.arange(len(order)) - np.repeat(np.cumsum(lens) - lens, lens)
        kept = np.sort(order[rank < keep])
        key, vals, rows = key[kept], vals[kept], rows[kept]
        lens = np.minimum(lens, keep)
    nz = vals != 0
    if not nz.all():
        key, vals, rows = key[nz], vals[nz], rows[nz]
        lens = np.bincount(rows, minlength=n_ids)
    indptr = np.zeros(n_ids + 1, np.int64)
    np.cumsum(lens, out=indptr[1:])
    return indptr, key - rows * n_ids, vals.astype(np.float32)
