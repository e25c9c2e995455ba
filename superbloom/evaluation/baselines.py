"""Classical baselines, fitted on the training sets and evaluated on the very same examples as the
model (evaluate.py):

  popularity    rank by training count
  cooccurrence  item-item cosine of the set-incidence matrix: score(c) = sum_{i in context} cos(i, c);
                from `heads.ranking.SPARSE_MIN_IDS` (65,536) ids the same sums come from the inverted
                index (cooc-cosine: no N x N matrix, float64, ties to the more popular id), below that
                from the dense float32 matrix as before (so small vocabularies rank bit for bit as they
                did). Epinions sequences, 287,851 ids: 110 s and 7.9 GB -> 25 s and 2.9 GB
  ease          EASE (Steck, WWW 2019): closed-form linear item-item model, B = I - P / diag(P) with
                P = (X^T X + lambda I)^-1; dense, so only for vocabularies up to `EASE_MAX_IDS` (60,000;
                float32 above 25,000 ids: N^2 x 4 bytes, 53K ids 11.2 GB and about 20 min on one thread)
  puresvd       PureSVD (Cremonesi et al., RecSys 2010): score = x V V^T with V the top-r right
                singular vectors of the set-incidence matrix; N x r parameters, the linear model with
                about as many parameters as ours (r = 128, the default d), where EASE has N^2
  transition, ease-term, cooc-term, local-ease
                the hybrid head's item-item term alone (term_baselines.py): the directed transition
                term, EASE's 200 largest weights per id, the cosine on 200 neighbours per id, EASE on
                each id's neighbourhood (heads/local_ease.py); ranked as the head's "term alone"
                variant ranks, with no network trained
  sansa         SANSA (Spisak et al., RecSys 2023), a sparse approximate EASE (sansa.py; the [sansa]
                extra, which needs scikit-sparse and SuiteSparse)

The registry `BASELINES` maps a name to a `BaselineEntry`; a new baseline is one entry (and its
name in config.BASELINE_NAMES, which `eval --help` lists without torch). The interface:

  entry.fit(train: SetArray, n_ids: int) -> a fitted baseline with
      rank(contexts, exclude, k) -> (E, k) ids, best first (-1: fewer than k rankable ids)
          contexts (E, c) ids (-1 padded; ordered oldest -> newest for sequences), exclude (E, X) ids never
          returned (-1 padded; the set protocol passes the contexts themselves, leave-one-out the history)
  A subclass of `Baseline` only implements scores(contexts) -> (E, N) dense scores: its rank is
  `rank_scores`, the one dense top-k every scored baseline shares (chunked to SCORE_BYTES, popularity
  added as a tiebreak, ties then broken as np.argpartition + a stable sort leave them). A baseline
  whose ranking needs no dense rows (popularity: one order for every context; an index over millions
  of ids) implements rank itself.
  entry.max_ids / entry.too_big: more ids than max_ids: the evaluation reports it skipped, saying why.
  entry.last_context: in the leave-one-out protocol it scores from the last `EvalConfig.cooc_last`
  context ids only (co-occurrence: the next id follows the newest one).
  entry.choose: (setting, values): the protocol sets each value on the fitted baseline and keeps the
  best on its validation examples (leave-one-out: the validation targets, by NDCG@10, as the hybrid
  head chooses its own), reported beside the baseline's metrics; a protocol with no validation
  examples keeps the baseline's default (the transition term's decay: 0.7 fixed, 0.15 chosen on
  Wikispeedia's paths, HR@10 0.376 -> 0.462).
The item-item weights (the cosine, EASE's B) come from itemitem.py, which the hybrid head shares.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp

from .als import ALS, tuned_als
from ..heads import ranking
from ..heads.config import DECAYS
from .cooccur_index import CoocCosine, CoocCount, CoocIdf
from ..data.dataset import SetArray
from ..heads.itemitem import EASE_MAX_IDS, cooccurrence_cosine, ease_weights, spd_inverse  # noqa: F401 (re-exported)
from .item2vec import Item2Vec, tuned_item2vec
from .term_baselines import cooc_term, ease_term, local_ease_term, transition

SCORE_BYTES = 128 << 20  # dense scores per chunk of contexts (Baseline.batch)


def _context_matrix(contexts: np.ndarray, n_ids: int) -> sp.csr_matrix:
    rows, cols = np.nonzero(contexts >= 0)
    return sp.csr_matrix((np.ones(len(rows), np.float32), (rows, contexts[rows, cols])),
                         shape=(len(contexts), n_ids))


def topk_excluding(scores: np.ndarray, exclude: np.ndarray, k: int) -> np.ndarray:
    """(E, k) ids of the k best scores (E, N) per row, never an id of exclude (E, X) (-1 padded)."""
    scores = np.array(scores, dtype=np.float64)
    rows, cols = np.nonzero(exclude >= 0)
    scores[rows, exclude[rows, cols]] = -np.inf
    k = min(k, scores.shape[1])
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, part, 1), axis=1, kind="stable")
    return np.take_along_axis(part, order, 1)


def rank_scores(scores_of: Callable[[np.ndarray], np.ndarray], contexts: np.ndarray, exclude: np.ndarray, k: int,
                batch: int) -> np.ndarray:
    """The dense top-k of every scored baseline: scores_of(contexts (e, c)) -> (e, N) scores, `batch`
    contexts at a time (memory bound), ranked by `topk_excluding` never returning the ids of exclude
    (E, X). -> (E, k) ids best first."""
    out = [topk_excluding(scores_of(contexts[a:a + batch]), exclude[a:a + batch], k)
           for a in range(0, len(contexts), batch)]
    return np.concatenate(out) if out else np.zeros((0, k), np.int64)


def first_not_excluded(order: np.ndarray, exclude: np.ndarray, k: int) -> np.ndarray:
    """The first k ids of one ranking `order` (N,) shared by every context that are not in each row
    of `exclude` (E, X) (-1 padded) -> (E, k). They are among the first k + X of the order, so no
    dense row is built: membership by one sort of (row, id) keys, O(E (k + X) log), memory O(E (k + X))
    (a histories' X of 5,356 ids once asked for a 27.5 GB (e, C, X) comparison)."""
    exclude = np.asarray(exclude, dtype=np.int64).reshape(len(exclude), -1)
    k = min(k, len(order))
    span = int(max(order.max(initial=-1), exclude.max(initial=-1))) + 2  # keys row * span + id, ids < span
    out = []
    for a in range(0, len(exclude), 1024):
        ex = exclude[a:a + 1024]
        cand = order[:k + ex.shape[1]]  # (C,): enough that k of them are never excluded
        rows = np.arange(len(ex), dtype=np.int64)[:, None] * span
        hit = np.isin(rows + cand[None, :], (rows + ex)[ex >= 0])  # (e, C): the candidate is in the row's ids
        first = np.argsort(hit, axis=1, kind="stable")[:, :k]  # the first k candidates not excluded
        out.append(cand[first])
    return np.concatenate(out) if out else np.zeros((0, k), np.int64)


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
        """(E, c) context ids -> (E, N) scores of every id (before the popularity tiebreak)."""
        raise NotImplementedError

    def rank(self, contexts: np.ndarray, exclude: np.ndarray, k: int) -> np.ndarray:
        """(E, k) ids best first for contexts (E, c), never an id of exclude (E, X) (module docstring)."""
        return rank_scores(lambda c: self.scores(c) + self.tiebreak, contexts, exclude, k, self.batch)


class Popularity(Baseline):
    """Rank by training count. `rank` never builds a dense score row: one popularity order serves
    every context (first_not_excluded; O(N) memory once; 5.1M ids: ~80 MB instead of the 13.5 GB of
    the dense path). Ties in count go to the lower id."""

    name = "popularity"

    def __init__(self, train: SetArray, n_ids: int):
        super().__init__(train, n_ids)
        self.order = np.argsort(-self.tiebreak, kind="stable")  # (N,) most popular first

    def scores(self, contexts):
        return np.zeros((len(contexts), self.n_ids))

    def rank(self, contexts: np.ndarray, exclude: np.ndarray, k: int) -> np.ndarray:
        return first_not_excluded(self.order, exclude, k)


class Cooccurrence(Baseline):
    name = "cooccurrence"

    def __init__(self, train: SetArray, n_ids: int):
        super().__init__(train, n_ids)
        self.cos = cooccurrence_cosine(train, n_ids)  # (N, N) sparse, itemitem.py

    def scores(self, contexts):
        return (_context_matrix(contexts, self.n_ids) @ self.cos).toarray()


def cooccurrence(train: SetArray, n_ids: int):
    """The `cooccurrence` entry: the dense cosine below ranking.SPARSE_MIN_IDS ids, the inverted
    index's (CoocCosine, the same sums without X^T X) from there (module docstring)."""
    return (CoocCosine if n_ids >= ranking.SPARSE_MIN_IDS else Cooccurrence)(train, n_ids)


class Ease(Baseline):
    name = "ease"

    def __init__(self, train: SetArray, n_ids: int, lam: float = 100.0):
        super().__init__(train, n_ids)
        self.b = ease_weights(train, n_ids, lam)  # (N, N) float32, itemitem.py

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


class Sansa(Baseline):
    """SANSA's sparse approximate EASE (sansa.py): score = (x A) B with its two sparse factors."""
    name = "sansa"

    def __init__(self, train: SetArray, n_ids: int, **settings):
        super().__init__(train, n_ids)
        from .sansa import fit_sansa  # the [sansa] extra, checked there before any work
        self.a, self.b = fit_sansa(train, n_ids, **settings)

    def scores(self, contexts):
        return ((_context_matrix(contexts, self.n_ids) @ self.a) @ self.b).toarray()


@dataclass(frozen=True)
class BaselineEntry:
    """One baseline of the registry (module docstring)."""
    fit: Callable[[SetArray, int], object]  # (train, n_ids) -> an object with rank(contexts, exclude, k)
    max_ids: int = 0  # more ids than this: skipped (0: no limit)
    too_big: str = ""  # why, in the skip message
    last_context: bool = False  # leave-one-out: scored from the last EvalConfig.cooc_last context ids
    choose: tuple[str, tuple] = ()  # (setting, values) chosen on the protocol's validation examples

    def skipped(self, n_ids: int) -> str | None:
        """Why the baseline is not fitted on `n_ids` ids, or None."""
        if self.max_ids and n_ids > self.max_ids:
            return f"{n_ids:,} ids > {self.max_ids:,} ({self.too_big})"
        return None


BASELINES: dict[str, BaselineEntry] = {
    "popularity": BaselineEntry(Popularity),
    "cooccurrence": BaselineEntry(cooccurrence, last_context=True),
    "ease": BaselineEntry(Ease, max_ids=EASE_MAX_IDS, too_big="dense EASE"),
    "puresvd": BaselineEntry(PureSVD),
    # millions of ids: co-occurrence counting over an inverted index (no N x N matrix), cooccur_index.py
    "cooc-count": BaselineEntry(CoocCount, last_context=True),
    "cooc-idf": BaselineEntry(CoocIdf, last_context=True),
    "cooc-cosine": BaselineEntry(CoocCosine, last_context=True),
    # item2vec.py, als.py (gensim, implicit: the [baselines] extra): their settings chosen on validation sets
    # carved from the training sets, in bounded time (tuning.py); the library's defaults as -untuned
    "item2vec": BaselineEntry(tuned_item2vec), "item2vec-untuned": BaselineEntry(Item2Vec),
    "als": BaselineEntry(tuned_als), "als-untuned": BaselineEntry(ALS),
    # the hybrid head's term alone (term_baselines.py): the whole ordered context, with its decay
    "transition": BaselineEntry(transition, choose=("decay", DECAYS)),
    "ease-term": BaselineEntry(ease_term, max_ids=EASE_MAX_IDS, too_big="dense EASE"),
    "cooc-term": BaselineEntry(cooc_term),
    "local-ease": BaselineEntry(local_ease_term),  # EASE on each id's neighbourhood (heads/local_ease.py)
    "sansa": BaselineEntry(Sansa),  # sansa.py: a sparse approximate EASE (the [sansa] extra)
}


def baseline_entry(name: str) -> BaselineEntry:
    if name not in BASELINES:
        raise ValueError(f"unknown baseline {name!r}; choose from {sorted(BASELINES)}")
    return BASELINES[name]


def fit_baseline(name: str, train: SetArray, n_ids: int):
    return baseline_entry(name).fit(train, n_ids)
