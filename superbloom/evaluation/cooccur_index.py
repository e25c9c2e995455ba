"""Co-occurrence baselines for millions of ids: an inverted index instead of an N x N matrix.

    index = CooccurIndex(data.train, data.n_ids)
    ids, scores = index.touched(context)                 # one query's sparse co-occurrence term
    top = index.rank(contexts, exclude, k, "cosine")      # (Q, k) ids

The training sets are held twice, as CSR: set -> its ids (`set_ptr`, `set_ids`) and its transpose
id -> the sets that hold it (`id_ptr`, `id_sets`), int32 ids, an id repeated within a set counted once
(X below is the binary sets x ids incidence matrix). For a query with context ids i:

    score(j) = b_j * sum_s w_s X[s, j],   w_s = sum_{i in context} a_i X[s, i]

i.e. b_j * sum_i a_i (X^T X)[i, j] without ever forming X^T X: the sets of the context ids (with the
weight w_s of the context ids they hold), then the ids of those sets, summed per candidate by one
bincount (or np.unique + bincount when the candidates are few next to the ids). The weightings, a
registry (`WEIGHTS`: name -> (a, b) from each id's set count df):

  count   a = b = 1: how often j shares a training set with the context ids (X^T X summed over them)
  idf     a = 1, b_j = log(S / df_j): the count times the candidate's inverse document frequency
          over the S training sets (tf-idf with the co-occurrence count as the term frequency), which
          discounts the ids that are everywhere
  cosine  a_i = 1 / sqrt(df_i), b_j = 1 / sqrt(df_j): sum_i cos(i, j) of the incidence columns, the
          dense baselines.Cooccurrence (which builds the N x N matrix) without the matrix

Ranking (`rank`): each query's touched candidates with a positive score, best first; ties go to the
more popular id (training count), then the smaller id, exactly as baselines.Popularity orders ids; a
query that touches fewer than k candidates is filled from that popularity order, so the result equals
ranking the dense score row (with zeros for the untouched ids). Context ids and the `exclude` ids are
never returned. Queries are batched: a batch holds as many queries as keep the candidate entries it
gathers (bounded by `reach`, the sum of the context ids' sets' lengths) under `CANDIDATE_BUDGET`.
Registry entries for baselines.BASELINES: `cooc-count`, `cooc-idf`, `cooc-cosine` (one class each,
`fit(train, n_ids)` -> the fitted baseline, whose `rank(contexts, exclude, k)` gives (Q, k) ids).

Memory (L links, S sets, N ids): the two CSRs, 8 L + 8 (S + N) bytes, plus ~6 int64 arrays of N (df,
reach, the popularity order and rank, a, b). Building holds ~10 L bytes at its peak (scipy's copy of
the ids and its transpose, one byte per link for each matrix's data). Measured: 4.49M links, 52K
sets, 200K ids: +61 MB kept, +80 MB at the peak of the build; 18.0M links, 1M ids: +0.30 GB at the
peak, the pages of the memory-mapped ids included.
At the paper's Wikipedia size (5.3M ids, 462M links, ~5M sets): ~4.0 GB kept, ~5 GB while building
(estimated from these sizes, not run). Ranking adds ~40 bytes per candidate entry gathered at once
(at most CANDIDATE_BUDGET: ~0.3 GB; a query that gathers more is summed in chunks) and the dense
accumulator, 8 bytes per (query, id) of a batch (at most DENSE_ENTRIES: 128 MB); measured +0.11 GB.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..data.dataset import SetArray
from ..heads.dot_topk import id_counts

CANDIDATE_BUDGET = 8 << 20  # candidate entries (query, set, id) gathered per batch of queries
DENSE_ENTRIES = 16 << 20  # a batch sums on a dense (queries x ids) accumulator up to this size
MAX_BATCH = 1024  # queries per batch


def _count_weights(df: np.ndarray, n_sets: int) -> tuple[np.ndarray, np.ndarray]:
    one = np.ones(len(df))
    return one, one


def _idf_weights(df: np.ndarray, n_sets: int) -> tuple[np.ndarray, np.ndarray]:
    return np.ones(len(df)), np.log(max(n_sets, 1) / np.maximum(df, 1))


def _cosine_weights(df: np.ndarray, n_sets: int) -> tuple[np.ndarray, np.ndarray]:
    norm = 1.0 / np.sqrt(np.maximum(df, 1).astype(np.float64))
    return norm, norm


# name -> f(df (N,), number of training sets) -> (a (N,) context-id weight, b (N,) candidate weight)
WEIGHTS = {"count": _count_weights, "idf": _idf_weights, "cosine": _cosine_weights}


def _ragged(ptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR rows `rows` (R,) concatenated -> (positions into the CSR's indices, index into `rows` of each)."""
    starts = ptr[rows]  # (R,)
    lens = ptr[rows + 1] - starts  # (R,)
    owner = np.repeat(np.arange(len(rows)), lens)  # (T,)
    before = np.cumsum(lens) - lens  # (R,) entries of the rows ahead
    return np.repeat(starts - before, lens) + np.arange(int(lens.sum())), owner


def _top_row(cand: np.ndarray, score: np.ndarray, poprank: np.ndarray, k: int) -> np.ndarray:
    """The k best of one query's candidates (C,), (C,): score descending, then popularity rank -> (<= k,) ids."""
    if len(score) > k:
        t = np.partition(score, len(score) - k)[len(score) - k]  # the k-th largest score
        above = np.flatnonzero(score > t)
        tied = np.flatnonzero(score == t)
        need = k - len(above)
        if len(tied) > need:  # the most popular of the tied
            tied = tied[np.argpartition(poprank[cand[tied]], need - 1)[:need]]
        keep = np.concatenate([above, tied])
        cand, score = cand[keep], score[keep]
    return cand[np.lexsort((poprank[cand], -score))]


class CooccurIndex:
    """The inverted index of the training sets (module docstring)."""

    def __init__(self, train: SetArray, n_ids: int):
        self.n_ids = n_ids
        self.n_sets = len(train)
        # copy=True: scipy's own copy of the ids (it sorts each set in place) is the only one made
        x = sp.csr_matrix((np.ones(len(train.ids), bool), np.asarray(train.ids, np.int32), np.asarray(train.offsets)),
                          shape=(self.n_sets, n_ids), copy=True)
        x.sum_duplicates()  # an id repeated within a set counts once
        self.set_ptr = x.indptr.astype(np.int64)  # (S + 1,)
        self.set_ids = x.indices.astype(np.int32, copy=False)  # (L,) ids of each set
        xt = x.tocsc()
        del x
        self.id_ptr = xt.indptr.astype(np.int64)  # (N + 1,)
        self.id_sets = xt.indices.astype(np.int32, copy=False)  # (L,) sets of each id
        del xt
        self.df = np.diff(self.id_ptr)  # (N,) sets holding each id
        counts = id_counts(train.ids, n_ids)  # (N,) training count (popularity)
        self.order = np.argsort(-counts, kind="stable")  # (N,) most popular first, ties: smaller id
        self.poprank = np.empty(n_ids, np.int64)
        self.poprank[self.order] = np.arange(n_ids)
        self.reach = self._reach()

    def _reach(self, step: int = 1 << 20) -> np.ndarray:
        """(N,) int64: for each id, the summed length of its sets (the candidate entries it gathers)."""
        lens = np.diff(self.set_ptr)
        reach = np.zeros(self.n_ids, np.int64)
        a = 0
        while a < self.n_ids:  # chunks of about `step` links: no (L,) temporary
            b = max(a + 1, int(np.searchsorted(self.id_ptr, self.id_ptr[a] + step, "right")) - 1)
            b = min(b, self.n_ids)
            lo = self.id_ptr[a]
            cs = np.concatenate([[0], np.cumsum(lens[self.id_sets[lo:self.id_ptr[b]]])])
            reach[a:b] = cs[self.id_ptr[a + 1:b + 1] - lo] - cs[self.id_ptr[a:b] - lo]
            a = b
        return reach

    def weights(self, weight: str) -> tuple[np.ndarray, np.ndarray]:
        if weight not in WEIGHTS:
            raise ValueError(f"unknown co-occurrence weight {weight!r}; choose from {sorted(WEIGHTS)}")
        return WEIGHTS[weight](self.df, self.n_sets)

    def _accumulate(self, contexts: np.ndarray, a: np.ndarray, b: np.ndarray):
        """Scores of a batch of contexts (B, c) (-1 padded) -> qptr (B + 1,), cand (T,) int64 ids
        sorted within each query, score (T,) float64: query q's touched ids are cand[qptr[q]:qptr[q+1]]."""
        n_q = len(contexts)
        q, col = np.nonzero(contexts >= 0)
        ctx = contexts[q, col]  # (E,) context ids, query-major
        pos, own = _ragged(self.id_ptr, ctx)  # the sets of each context id
        keys = q[own] * self.n_sets + self.id_sets[pos]  # (query, set)
        uk, inv = np.unique(keys, return_inverse=True)
        w = np.bincount(inv.reshape(-1), a[ctx][own], minlength=len(uk))  # (U,) w_s per (query, set)
        qs, sets = np.divmod(uk, self.n_sets)
        lens = self.set_ptr[sets + 1] - self.set_ptr[sets]  # (U,) candidate entries of each (query, set)
        cum = np.concatenate([[0], np.cumsum(lens)])
        cuts = [0]  # chunks of (query, set) pairs gathering <= CANDIDATE_BUDGET entries (one pair at least)
        while cuts[-1] < len(sets):
            nxt = int(np.searchsorted(cum, cum[cuts[-1]] + CANDIDATE_BUDGET, "right")) - 1
            cuts.append(min(max(nxt, cuts[-1] + 1), len(sets)))
        size = n_q * self.n_ids
        dense = size <= DENSE_ENTRIES and (size <= 8 * int(cum[-1]) or len(cuts) > 2)
        acc = np.zeros(size) if dense else None
        parts = []
        for c0, c1 in zip(cuts[:-1], cuts[1:]):
            pos, own = _ragged(self.set_ptr, sets[c0:c1])  # the ids of those sets
            keys = qs[c0:c1][own] * self.n_ids + self.set_ids[pos]  # (T,) (query, candidate)
            weights = w[c0:c1][own]
            if dense and len(cuts) == 2:
                acc = np.bincount(keys, weights, minlength=size)
            elif dense:  # the same sums, in the same order, as one bincount over all chunks
                np.add.at(acc, keys, weights)
            else:
                uk, inv = np.unique(keys, return_inverse=True)
                parts.append((uk, np.bincount(inv.reshape(-1), weights, minlength=len(uk))))
        if dense:
            uk = np.flatnonzero(acc)  # every weight is > 0, so these are the touched pairs
            sums = acc[uk]
        elif len(parts) == 1:
            uk, sums = parts[0]
        else:  # no chunk (empty contexts), or the partial sums of several (a huge query, more than DENSE_ENTRIES ids)
            keys = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
            uk, inv = np.unique(keys, return_inverse=True)
            sums = np.bincount(inv.reshape(-1), np.concatenate([p[1] for p in parts]) if parts else None,
                               minlength=len(uk)).astype(np.float64)
        qq, cand = np.divmod(uk, self.n_ids)
        qptr = np.searchsorted(qq, np.arange(n_q + 1))
        return qptr, cand, sums * b[cand]

    def touched(self, context: np.ndarray, weight: str = "count") -> tuple[np.ndarray, np.ndarray]:
        """One query's context ids (c,) (-1 ignored) -> (ids (T,) int64 ascending, scores (T,) float64):
        every id sharing a training set with the context, and its score (module docstring); context ids
        included (their own sets count), nothing excluded."""
        a, b = self.weights(weight)
        _, cand, score = self._accumulate(np.asarray(context, np.int64).reshape(1, -1), a, b)
        return cand, score

    def batches(self, contexts: np.ndarray):
        """(start, end) of consecutive queries whose summed reach stays under CANDIDATE_BUDGET (at least one each)."""
        est = np.where(contexts >= 0, self.reach[np.maximum(contexts, 0)], 0).sum(1)  # (Q,)
        cum = np.concatenate([[0], np.cumsum(est)])
        start = 0
        while start < len(contexts):
            end = int(np.searchsorted(cum, cum[start] + CANDIDATE_BUDGET, "right")) - 1
            end = min(max(end, start + 1), start + MAX_BATCH, len(contexts))
            yield start, end
            start = end

    def rank(self, contexts: np.ndarray, exclude: np.ndarray | None, k: int, weight: str = "count") -> np.ndarray:
        """Top-k ids (Q, k) int64 for contexts (Q, c) (-1 padded), never a context id nor an id of
        `exclude` (Q, X) (-1 padded; None: nothing more); -1 where fewer than k ids are left."""
        contexts = np.asarray(contexts, np.int64).reshape(len(contexts), -1)
        # the banned ids are gathered per query: a (Q, c + X) copy was 0.95 GB for 22K histories of 5,356 ids
        exclude = contexts[:, :0] if exclude is None else np.asarray(exclude).reshape(len(contexts), -1)
        a, b = self.weights(weight)
        out = np.full((len(contexts), k), -1, np.int64)
        mark = np.zeros(self.n_ids, bool)  # scratch: the current query's banned (and chosen) ids
        fill_from = self.order[:k + contexts.shape[1] + exclude.shape[1]]  # enough popular ids to fill any query
        for start, end in self.batches(contexts):
            qptr, cand, score = self._accumulate(contexts[start:end], a, b)
            for q in range(end - start):  # per query: its own candidates (no loop per id)
                c, s = cand[qptr[q]:qptr[q + 1]], score[qptr[q]:qptr[q + 1]]
                ban = np.concatenate([contexts[start + q], exclude[start + q]])
                ban = ban[ban >= 0]
                mark[ban] = True
                keep = ~mark[c] & (s > 0)
                top = _top_row(c[keep], s[keep], self.poprank, k)
                if len(top) < k:  # too few touched: the most popular of the rest, as the dense row would
                    mark[top] = True
                    top = np.concatenate([top, fill_from[~mark[fill_from]][:k - len(top)]])
                    mark[top] = False
                mark[ban] = False
                out[start + q, :len(top)] = top
        return out


class CoocBaseline:
    """A co-occurrence baseline over the inverted index: `weight` names the WEIGHTS entry."""

    name = "cooc-count"
    weight = "count"

    def __init__(self, train: SetArray, n_ids: int):
        self.index = CooccurIndex(train, n_ids)

    @classmethod
    def fit(cls, train: SetArray, n_ids: int) -> "CoocBaseline":
        return cls(train, n_ids)

    def rank(self, contexts: np.ndarray, exclude: np.ndarray | None, k: int) -> np.ndarray:
        return self.index.rank(contexts, exclude, k, self.weight)


class CoocCount(CoocBaseline):
    name, weight = "cooc-count", "count"


class CoocIdf(CoocBaseline):
    name, weight = "cooc-idf", "idf"


class CoocCosine(CoocBaseline):
    name, weight = "cooc-cosine", "cosine"
