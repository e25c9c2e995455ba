"""Classical baselines, fitted on the training sets and evaluated on the very same examples as the
model (evaluate.py):

  popularity    rank by training count
  cooccurrence  item-item cosine of the set-incidence matrix: score(c) = sum_{i in context} cos(i, c)
  ease          EASE (Steck, WWW 2019): closed-form linear item-item model, B = I - P / diag(P) with
                P = (X^T X + lambda I)^-1; dense, so only for vocabularies up to `EASE_MAX_IDS`
  puresvd       PureSVD (Cremonesi et al., RecSys 2010): score = x V V^T with V the top-r right
                singular vectors of the set-incidence matrix; N x r parameters, the linear model with
                about as many parameters as ours (r = 128, the default d), where EASE has N^2

Each has `rank(contexts, k) -> (E, k)` ids (context ids excluded, ties broken by popularity).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .als import ALS
from .cooccur_index import CoocCosine, CoocCount, CoocIdf
from .dataset import SetArray
from .item2vec import Item2Vec

EASE_MAX_IDS = 25_000
SCORE_BYTES = 128 << 20  # dense scores per chunk of contexts (Baseline.batch)


def _context_matrix(contexts: np.ndarray, n_ids: int) -> sp.csr_matrix:
    rows, cols = np.nonzero(contexts >= 0)
    return sp.csr_matrix((np.ones(len(rows), np.float32), (rows, contexts[rows, cols])),
                         shape=(len(contexts), n_ids))


def _topk_excluding(scores: np.ndarray, contexts: np.ndarray, k: int) -> np.ndarray:
    scores = np.array(scores, dtype=np.float64)
    rows, cols = np.nonzero(contexts >= 0)
    scores[rows, contexts[rows, cols]] = -np.inf
    k = min(k, scores.shape[1])
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, part, 1), axis=1, kind="stable")
    return np.take_along_axis(part, order, 1)


def spd_inverse(g: np.ndarray) -> np.ndarray:
    """Inverse of a symmetric positive definite float64 matrix, in place (g is overwritten): Cholesky
    (LAPACK potrf) then potri, half the flops of an LU inverse. scipy.linalg.inv (LU, getrf/getri)
    crashed the process with a segmentation fault inside OpenBLAS on the 23,326-id SASRec Video
    Gram matrix (twice, dmesg), and so did potrf with OpenBLAS's threads; with one BLAS thread the
    same fit ran to the end (774 s, 10.9 GB peak, on the shared machine). So: potrf/potri, one
    thread."""
    from scipy.linalg import lapack

    from threadpoolctl import threadpool_limits

    f = g.T  # symmetric: the transpose is the same matrix, Fortran-ordered, so LAPACK works in place
    with threadpool_limits(limits=1, user_api="blas"):  # see the docstring: threaded OpenBLAS crashed
        c, info = lapack.dpotrf(f, lower=True, overwrite_a=True, clean=False)
        if info != 0:
            raise ValueError(f"EASE: the regularised Gram matrix is not positive definite (potrf info {info})")
        inv, info = lapack.dpotri(c, lower=True, overwrite_c=True)
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


class Baseline:
    name = "baseline"
    max_batch = 256

    def __init__(self, train: SetArray, n_ids: int):
        self.n_ids = n_ids
        counts = np.bincount(np.asarray(train.ids), minlength=n_ids).astype(np.float64)
        self.tiebreak = 1e-6 * counts / max(1.0, counts.max())  # popularity breaks ties

    @property
    def batch(self) -> int:
        """Contexts scored at once: each is a dense float64 row over every id, copied ~3 times on the
        way to its top-k, so rows are capped at SCORE_BYTES of scores (at 5.1M ids: 3 rows, not 256)."""
        return max(1, min(self.max_batch, SCORE_BYTES // (8 * max(1, self.n_ids))))

    def scores(self, contexts: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def rank(self, contexts: np.ndarray, k: int) -> np.ndarray:
        out = [_topk_excluding(self.scores(contexts[a:a + self.batch]) + self.tiebreak,
                               contexts[a:a + self.batch], k) for a in range(0, len(contexts), self.batch)]
        return np.concatenate(out) if out else np.zeros((0, k), np.int64)


class Popularity(Baseline):
    """Rank by training count. `rank` never builds a dense score row: the top-k excluding X ids are
    among the k + X most popular, so it reads those from one popularity order (O(N) memory once,
    O(E (k + X) X) per call; 5.1M ids: ~80 MB instead of the 13.5 GB of the dense path,
    benchmarks/results/scale/). Ties in count go to the lower id."""

    name = "popularity"

    def __init__(self, train: SetArray, n_ids: int):
        super().__init__(train, n_ids)
        self.order = np.argsort(-self.tiebreak, kind="stable")  # (N,) most popular first

    def scores(self, contexts):
        return np.zeros((len(contexts), self.n_ids))

    def top_excluding(self, exclude: np.ndarray, k: int) -> np.ndarray:
        """The k most popular ids not in each row of `exclude` (E, X) (-1 padded) -> (E, k)."""
        exclude = np.asarray(exclude, dtype=np.int64).reshape(len(exclude), -1)
        k = min(k, self.n_ids)
        out = []
        for a in range(0, len(exclude), 1024):
            ex = exclude[a:a + 1024]
            cand = self.order[:k + ex.shape[1]]  # (C,): enough that k of them are never excluded
            hit = (cand[None, :, None] == ex[:, None, :]).any(2)  # (e, C)
            first = np.argsort(hit, axis=1, kind="stable")[:, :k]  # the first k candidates not excluded
            out.append(cand[first])
        return np.concatenate(out) if out else np.zeros((0, k), np.int64)

    def rank(self, contexts: np.ndarray, k: int) -> np.ndarray:
        return self.top_excluding(contexts, k)


class Cooccurrence(Baseline):
    name = "cooccurrence"

    def __init__(self, train: SetArray, n_ids: int):
        super().__init__(train, n_ids)
        x = train.incidence(n_ids)
        c = (x.T @ x).tocsr()  # (N, N) co-occurrence counts
        norm = 1.0 / np.sqrt(np.maximum(c.diagonal(), 1.0))
        c = sp.diags(norm) @ c @ sp.diags(norm)
        c.setdiag(0.0)
        c.eliminate_zeros()
        self.cos = c.tocsr().astype(np.float32)

    def scores(self, contexts):
        return (_context_matrix(contexts, self.n_ids) @ self.cos).toarray()


class Ease(Baseline):
    name = "ease"

    def __init__(self, train: SetArray, n_ids: int, lam: float = 100.0):
        super().__init__(train, n_ids)
        if n_ids > EASE_MAX_IDS:
            raise ValueError(f"EASE is dense (N x N); {n_ids:,} ids exceed the {EASE_MAX_IDS:,} limit")
        x = train.incidence(n_ids)
        # float64 N x N, inverted and scaled in place: peak ~1 N^2 x 8 bytes (+ the float32 result),
        # was ~4 copies (23K ids: 17.7 GB, benchmarks/results/quality.md)
        g = (x.T @ x).astype(np.float64).toarray()
        g[np.diag_indices(n_ids)] += lam
        p = spd_inverse(g)
        p /= -np.diag(p)[None, :]  # B = -P / diag(P)
        p[np.diag_indices(n_ids)] = 0.0
        self.b = p.astype(np.float32)

    def scores(self, contexts):
        return _context_matrix(contexts, self.n_ids) @ self.b


class PureSVD(Baseline):
    name = "puresvd"

    def __init__(self, train: SetArray, n_ids: int, rank: int = 128):
        super().__init__(train, n_ids)
        from scipy.sparse.linalg import svds

        x = train.incidence(n_ids).astype(np.float64)
        r = max(1, min(rank, min(x.shape) - 1))
        _, _, vt = svds(x, k=r, random_state=0)  # (r, N)
        self.v = np.ascontiguousarray(vt.T.astype(np.float32))  # (N, r)

    def scores(self, contexts):
        return (_context_matrix(contexts, self.n_ids) @ self.v) @ self.v.T


BASELINES = {"popularity": Popularity, "cooccurrence": Cooccurrence, "ease": Ease, "puresvd": PureSVD,
             "cooc-count": CoocCount, "cooc-idf": CoocIdf, "cooc-cosine": CoocCosine,  # cooccur_index.py: millions of ids
             "item2vec": Item2Vec,  # item2vec.py (gensim)
             "als": ALS}  # als.py (implicit)


def fit_baseline(name: str, train: SetArray, n_ids: int) -> Baseline:
    if name not in BASELINES:
        raise ValueError(f"unknown baseline {name!r}; choose from {sorted(BASELINES)}")
    return BASELINES[name](train, n_ids)
