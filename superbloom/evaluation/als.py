"""Implicit-feedback ALS (Hu, Koren & Volinsky, ICDM 2008) on the sets x ids incidence matrix, with
the `implicit` library, as a baseline at millions of ids. Optional dependency implicit:
the [baselines] extra
(`pip install -e '.[baselines]'` from a clone, `pip install 'superbloom[baselines]'` from a wheel).

    base = ALS(data.train, data.n_ids)           # 64 factors, BM25 confidences, 15 iterations (`als-untuned`)
    base = tuned_als(data.train, data.n_ids)     # its settings chosen on held-out training sets (`als`; tuning.py)
    top = base.rank(contexts, exclude, k)        # (Q, k) ids

Confidences (implicit's convention: an observed (set, id) pair has confidence c = alpha x value and
adds (c - 1) y y^T to its set's normal equations; unobserved pairs have confidence 1, preference 0):
  bm25   value = implicit.nearest_neighbours.bm25_weight of the ids x sets matrix (K1 100, B 0.8, as in
         implicit's own lastfm example): (K1 + 1) / (K1 * norm_i + 1) * idf_s with
         norm_i = (1 - B) + B * df_i / mean(df) per id and idf_s = log(N) - log1p(|s|) per set
  plain  value = 1 (the binary incidence)
A query is a new set: its vector is recomputed from its context ids alone, with the same
confidences (idf of a set of that many ids), by implicit's `recalculate_user` (the exact least-squares
fold-in against the fixed item factors), then exact top-k of the item factors by the chunked product
of dot_topk.py over the ids seen in training, ties to the more popular id.

Memory (L links, N ids, f 64): the float32 confidence matrix and its transpose while fitting
(2 x 8 L bytes, with int32 indices) plus two float32 factor tables (sets x f and N x f): at 5.3M
ids, 462M links, ~5M sets: 7.4 + 1.3 + 1.4 GB; kept afterwards: the item factors (1.4 GB).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._extras import require_extra
from ..data.dataset import SetArray
from ..heads.dot_topk import excluded_rows, id_counts, popularity_table, table_topk
from .tuning import tuned

QUERY_BATCH = 4096  # queries folded in at a time


@dataclass(frozen=True)
class ALSConfig:
    factors: int = 64
    regularization: float = 0.01
    alpha: float = 1.0
    iterations: int = 15
    confidence: str = "bm25"  # "bm25" or "plain" (module docstring)
    bm25_k1: float = 100.0
    bm25_b: float = 0.8
    threads: int = 1  # implicit's threads (0: all cores)
    seed: int = 0

    def __post_init__(self):
        if self.confidence not in ("bm25", "plain"):
            raise ValueError(f"ALS confidence must be 'bm25' or 'plain', got {self.confidence!r}")


class ALS:
    """implicit's AlternatingLeastSquares fitted on the training sets (module docstring)."""

    name = "als"

    def __init__(self, train: SetArray, n_ids: int, config: ALSConfig = ALSConfig()):
        require_extra("baselines", "the als baseline", ("implicit",))
        from implicit.cpu.als import AlternatingLeastSquares
        from threadpoolctl import threadpool_limits

        self.config, self.n_ids = config, n_ids
        x = train.incidence(n_ids)  # (S, N) binary float32
        self.df = np.bincount(x.indices, minlength=n_ids).astype(np.float64)  # (N,) sets holding each id
        self.mean_df = float(self.df.mean()) if n_ids else 0.0
        x.data = self._values(x)
        self.model = AlternatingLeastSquares(
            factors=config.factors, regularization=config.regularization, alpha=config.alpha,
            iterations=config.iterations, calculate_training_loss=False, num_threads=config.threads,
            random_state=config.seed)
        with threadpool_limits(limits=1, user_api="blas"):  # implicit runs its own threads
            self.model.fit(x, show_progress=False)
        del x
        counts = id_counts(train.ids, n_ids)
        self.seen, self.row_of = popularity_table(counts)  # (M,), (N,): table rows, most popular first
        self.table = np.ascontiguousarray(self.model.item_factors[self.seen], np.float32)  # (M, f)

    @classmethod
    def fit(cls, train: SetArray, n_ids: int) -> "ALS":
        return cls(train, n_ids)

    def _values(self, x: sp.csr_matrix) -> np.ndarray:
        """The confidence values (before alpha) of a binary (sets x ids) CSR's entries (module docstring)."""
        if self.config.confidence == "plain":
            return np.ones(x.nnz, np.float32)
        k1, b = self.config.bm25_k1, self.config.bm25_b
        norm = (1.0 - b) + b * self.df / self.mean_df  # (N,) per id
        per_id = ((k1 + 1.0) / (k1 * norm + 1.0)).astype(np.float32)  # (N,)
        idf = (np.log(float(self.n_ids)) - np.log1p(np.diff(x.indptr).astype(np.float64))).astype(np.float32)  # (S,)
        values = per_id[x.indices]  # (nnz,) float32: 4 bytes a link, and one more array like it below
        values *= np.repeat(idf, np.diff(x.indptr))
        return values

    def query_factors(self, contexts: np.ndarray) -> np.ndarray:
        """(Q, c) context ids (-1 padded) -> (Q, f): each context folded in as a new set."""
        q, col = np.nonzero(contexts >= 0)
        x = sp.csr_matrix((np.ones(len(q), np.float32), (q, contexts[q, col])), shape=(len(contexts), self.n_ids))
        x.sum_duplicates()
        x.data[:] = 1.0  # a repeated context id counts once, as in the training sets
        x.data = self._values(x)
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return np.asarray(self.model.recalculate_user(np.arange(len(contexts)), x), np.float32)

    def rank(self, contexts: np.ndarray, exclude: np.ndarray | None, k: int) -> np.ndarray:
        """Top-k ids (Q, k) for contexts (Q, c), never a context id nor an id of `exclude` (Q, X) (-1
        padded); -1 where fewer than k seen ids are left."""
        contexts = np.asarray(contexts, np.int64).reshape(len(contexts), -1)
        ex = excluded_rows(self.row_of, contexts, exclude)
        out = []
        for a in range(0, len(contexts), QUERY_BATCH):
            rows, _ = table_topk(self.query_factors(contexts[a:a + QUERY_BATCH]), self.table, ex[a:a + QUERY_BATCH], k)
            out.append(np.where(rows >= 0, self.seen[np.maximum(rows, 0)], -1))
        return np.concatenate(out) if out else np.zeros((0, k), np.int64)


# the settings `als` tunes (tuning.py), the defaults first: plain confidences with a larger alpha and
# more factors won on most of the shared set datasets (docs/results.md);
# regularisation and iterations after them
ALS_AXES = [(("confidence", "alpha"), [("plain", 10.0), ("plain", 40.0)]), ("factors", [128, 256]),
            ("regularization", [0.1, 1.0]), ("iterations", [30])]


def tuned_als(train: SetArray, n_ids: int) -> ALS:
    """ALS with factors, confidences, regularisation and iterations chosen on held-out training sets
    (tuning.py); `.chosen` says what was chosen and how."""
    base, chosen = tuned(ALS, ALSConfig(), ALS_AXES, train, n_ids)
    base.chosen = chosen
    return base
