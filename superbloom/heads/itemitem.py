"""Item-item math: the linear item-to-item weights that the hybrid head's term (heads/hybrid.py) and
the classical baselines (baselines.py) are both built from, so that no head imports evaluation code.

  ease_weights(sets, N, lam)         EASE (Steck, WWW 2019): B = I - P / diag(P), P = (X^T X + lam I)^-1,
                                     diagonal 0; dense (N, N), so only up to EASE_MAX_IDS ids (float64
                                     up to EASE_FLOAT64_MAX_IDS, float32 above: N^2 x 4 bytes, 60K ids 14 GB)
  cooccurrence_cosine(sets, N)       the cosine of the set-incidence columns: C_ij / sqrt(C_ii C_jj),
                                     C = X^T X, diagonal 0; sparse (N, N)
  spd_inverse(g)                     the in-place Cholesky inverse EASE uses

and the sparse patterns the hybrid head keeps of them (N + 1 row pointers, one column per kept value,
each row sorted by column, never the diagonal):

  neighbour_pattern(sets, N, k)      every id's k most frequent co-occurring ids
  largest_pattern(B, k)              the k largest |B_ij| of every row of a dense matrix
  transition_pattern(seqs, N, k, window, gap_decay)
                                     the directed "j comes after c" term of ordered sets, log(1 + count)

X is the (S, N) binary set-incidence matrix of the training sets (dataset.SetArray.incidence).
"""
from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp

log = logging.getLogger(__name__)

EASE_FLOAT64_MAX_IDS = 25_000  # float64 up to here (23K ids: 4.3 GB + 2.2 GB of float32 weights, 4 min on one thread)
EASE_MAX_IDS = 60_000  # float32 above, inverted in place: 40K ids 6.3 GB, 9 min; 53K ids 11.2 GB, 20 min


def ease_memory_check(n_ids: int) -> None:
    """Refuse a dense EASE fit that cannot fit in the memory available now (/proc/meminfo's MemAvailable),
    before allocating N x N: a clear error instead of the kernel's out-of-memory kill. Where the system
    does not say (no /proc), no check."""
    need = n_ids * n_ids * (8 + 4 if n_ids <= EASE_FLOAT64_MAX_IDS else 4) * 1.1  # float64: + the float32 weights
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return
    if need > avail:
        raise MemoryError(f"EASE is dense: {n_ids:,} ids need about {need / 2**30:.1f} GiB for the N x N matrix, "
                          f"{avail / 2**30:.1f} GiB is available (use the co-occurrence term or baseline instead)")


def spd_inverse(g: np.ndarray) -> np.ndarray:
    """Inverse of a symmetric positive definite float64 or float32 matrix, in place (g is overwritten): Cholesky
    (LAPACK potrf) then potri, half the flops of an LU inverse. scipy.linalg.inv (LU, getrf/getri)
    crashed the process with a segmentation fault inside OpenBLAS on the 23,326-id SASRec Video
    Gram matrix (twice, dmesg), and so did potrf with OpenBLAS's threads; with one BLAS thread the
    same fit ran to the end (774 s, 10.9 GB peak, on the shared machine; since the copy below was
    removed: 235 s, 6.7 GB peak with the float32 weights, idle core). So: potrf/potri, one
    thread. float32 (s-routines) halves the memory and runs about twice as fast (8,000 ids: 4.2 s
    against 8.6 s on one thread)."""
    from scipy.linalg import lapack

    from threadpoolctl import threadpool_limits

    # symmetric: g or its transpose is the same matrix; pass the Fortran-ordered one so LAPACK works in place
    # (a C-ordered one is copied first: twice the memory; scipy's csc.toarray() gives Fortran order)
    f = g if g.flags.f_contiguous else g.T
    potrf, potri = (lapack.spotrf, lapack.spotri) if g.dtype == np.float32 else (lapack.dpotrf, lapack.dpotri)
    with threadpool_limits(limits=1, user_api="blas"):  # see the docstring: threaded OpenBLAS crashed
        c, info = potrf(f, lower=True, overwrite_a=True, clean=False)
        if info != 0:
            raise ValueError(f"EASE: the regularised Gram matrix is not positive definite (potrf info {info})")
        inv, info = potri(c, lower=True, overwrite_c=True)
    if info != 0:
        raise ValueError(f"EASE: inverse failed (potri info {info})")
    n, bs = len(inv), 1024  # potri fills the lower triangle only: mirror it in blocks (bounded temporaries)
    for a in range(0, n, bs):
        b = min(n, a + bs)
        inv[a:b, b:] = inv[b:, a:b].T
        blk = inv[a:b, a:b]
        iu = np.triu_indices(b - a, 1)
        blk[iu] = blk.T[iu]
    return inv


def ease_weights(sets, n_ids: int, lam: float = 100.0) -> np.ndarray:
    """EASE's closed-form weights of the sets (a SetArray) -> B (N, N) float32, zero diagonal:
    score(j | context) = sum_{c in context} B[c, j]."""
    if n_ids > EASE_MAX_IDS:
        raise ValueError(f"EASE is dense (N x N); {n_ids:,} ids exceed the {EASE_MAX_IDS:,} limit")
    ease_memory_check(n_ids)
    x = sets.incidence(n_ids)  # (S, N) binary
    # N x N, inverted and scaled in place: peak ~1 N^2 x 8 bytes (+ the float32 result) in float64, was
    # ~4 copies (23K ids: 17.7 GB); above EASE_FLOAT64_MAX_IDS float32 throughout,
    # N^2 x 4 bytes (lam bounds the condition number by 1 + the Gram matrix's largest eigenvalue / lam)
    dtype = np.float64 if n_ids <= EASE_FLOAT64_MAX_IDS else np.float32
    if n_ids >= 10_000:  # minutes of silence otherwise: n^3 at ~60 (float64) / ~120 (float32) G per s, one thread
        rate = 60e9 if dtype == np.float64 else 120e9
        secs = n_ids ** 3 / rate
        log.info("EASE: inverting a %s x %s %s matrix (%.1f GB), about %s on one thread", f"{n_ids:,}", f"{n_ids:,}",
                 np.dtype(dtype).name, n_ids * n_ids * np.dtype(dtype).itemsize / 1e9,
                 f"{secs:.0f} s" if secs < 120 else f"{secs / 60:.0f} min")
    g = (x.T @ x).astype(dtype).toarray()
    g[np.diag_indices(n_ids)] += lam
    p = spd_inverse(g)
    if not p.flags.c_contiguous:  # P is symmetric: its transpose is the same matrix, C-ordered, so B's rows
        p = p.T  # are contiguous (a Fortran-ordered B was copied whole by every scipy sparse @ B of a ranking)
    p /= -np.diag(p)[None, :]  # B = -P / diag(P)
    p[np.diag_indices(n_ids)] = 0.0
    return p.astype(np.float32, copy=False)


def cooccurrence_cosine(sets, n_ids: int) -> sp.csr_matrix:
    """The cosine of every pair of ids' set-incidence columns -> (N, N) sparse float32, zero diagonal
    (stored without zeros): score(j | context) = sum_{c in context} cos(c, j)."""
    x = sets.incidence(n_ids)  # (S, N) binary
    c = (x.T @ x).tocsr()  # (N, N) co-occurrence counts
    norm = 1.0 / np.sqrt(np.maximum(c.diagonal(), 1.0))
    c = sp.diags(norm) @ c @ sp.diags(norm)
    c.setdiag(0.0)
    c.eliminate_zeros()
    return c.tocsr().astype(np.float32)


def neighbour_pattern(sets, n_ids: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k most frequent co-occurring ids of every id in `sets` (a SetArray), diagonal excluded,
    ties broken by the smaller id. -> (indptr (N + 1,) int64, cols (nnz,) int64), each row sorted by id."""
    x = sets.incidence(n_ids)  # (S, N) binary
    indptr, cols, _ = _largest_per_row((x.T @ x).tocsr(), k)  # (N, N) co-occurrence counts
    return indptr, cols


def _largest_per_row(c: sp.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The k largest entries of every row of a square sparse matrix (ties by the smaller column),
    diagonal and zeros left out. -> (indptr (N + 1,), cols (nnz,) int64, values (nnz,)), each row
    sorted by column."""
    n = c.shape[0]
    c = c.tocsr(copy=True)
    c.setdiag(0)
    c.eliminate_zeros()
    c.sort_indices()
    rows = np.repeat(np.arange(n), np.diff(c.indptr))  # (nnz,)
    # within each row: value descending, then column ascending (a stable sort keeps the sorted columns'
    # order on ties); keep the first k of every row
    order = _row_major_descending(rows, c.data)
    rank = np.arange(len(order)) - np.repeat(c.indptr[:-1], np.diff(c.indptr))
    keep = np.sort(order[rank < k])  # back to row-major, column-sorted order
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(rows[keep], minlength=n), out=indptr[1:])
    return indptr, c.indices[keep].astype(np.int64), c.data[keep]


def _row_major_descending(rows: np.ndarray, data: np.ndarray) -> np.ndarray:
    """The stable order of entries by row ascending, then value descending. Values exact in float32 (the
    counts, the cosine) sort as one uint64 key, row << 32 | the value's bits flipped to order descending:
    one stable argsort, about 2x faster than lexsort's two passes (8x faster than the three-key lexsort
    it replaced; 30M entries: 2.2 s against 4.3 s and 17.9 s on this machine)."""
    f = data.astype(np.float32)
    if not np.array_equal(f, data) or np.isnan(f).any():
        return np.lexsort((-data, rows))
    bits = (f + np.float32(0.0)).view(np.uint32)  # -0.0 -> 0.0: equal values, equal keys
    ascending = np.where(bits >> np.uint32(31), ~bits, bits | np.uint32(0x80000000))  # the float order
    key = (rows.astype(np.uint64) << np.uint64(32)) | (~ascending).astype(np.uint64)
    return np.argsort(key, kind="stable")


def transition_pattern(sets, n_ids: int, k: int, window: int, gap_decay: float
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The directed item -> later item term of ordered sets (sequences, oldest id first): T[c, j] =
    the sum, over every time j comes `gap` <= window ids after c in one sequence, of gap_decay **
    (gap - 1); kept: the k largest of every row (ties by the smaller id), as log(1 + T) (a damped
    count: a transition seen 100 times is not worth 100 seen once). No diagonal (an id after itself).
    -> (indptr (N + 1,), cols (nnz,), values (nnz,) float32), each row sorted by id."""
    ids = np.asarray(sets.ids, np.int64)
    owner = np.repeat(np.arange(len(sets)), sets.lengths)  # (L,) the sequence of each position
    rows, cols, vals = [], [], []
    for gap in range(1, min(window, max(len(ids) - 1, 0)) + 1):
        same = owner[:-gap] == owner[gap:]  # (L - gap,) pairs inside one sequence
        rows.append(ids[:-gap][same])
        cols.append(ids[gap:][same])
        vals.append(np.full(int(same.sum()), gap_decay ** (gap - 1), np.float64))
    cat = lambda parts, dtype: np.concatenate(parts) if parts else np.zeros(0, dtype)  # noqa: E731
    t = sp.csr_matrix((cat(vals, np.float64), (cat(rows, np.int64), cat(cols, np.int64))), shape=(n_ids, n_ids))
    t.sum_duplicates()  # (N, N) weighted counts
    indptr, cols, values = _largest_per_row(t, k)
    return indptr, cols, np.log1p(values).astype(np.float32)


def largest_pattern(b: np.ndarray, k: int, block: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """The k entries of largest |value| of every row of a dense (N, N) matrix, zeros and the diagonal
    left out (EASE's weights reach ids that never co-occur, through shared neighbours: a pattern by
    co-occurrence count would drop those). -> (indptr (N + 1,), cols (nnz,)), each row sorted by id."""
    n = b.shape[0]
    k = min(k, n - 1)
    cols, lens = [], []
    for a in range(0, n, block):  # (block, N) rows at a time: one |B| copy of a block, not of B
        mag = np.abs(b[a:a + block])
        mag[np.arange(len(mag)), np.arange(a, a + len(mag))] = 0.0
        top = np.argpartition(-mag, k - 1, axis=1)[:, :k] if k > 0 else np.zeros((len(mag), 0), np.int64)
        top.sort(axis=1)
        keep = np.take_along_axis(mag, top, 1) > 0
        cols.append(top[keep])
        lens.append(keep.sum(1))
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.concatenate(lens), out=indptr[1:])
    return indptr, np.concatenate(cols).astype(np.int64)

