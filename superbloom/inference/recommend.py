"""Recommendations and similar items for many queries at once, as arrays (the in-memory API).

    recs = model.recommend([["milk", "bread"], ["coffee"]], k=10, deny=["milk"])   # Predictor.recommend
    recs.ids, recs.scores, recs.exact          # (Q, k) id strings, (Q, k) scores, (Q,) certified exact
    recs.to_arrow(); recs.to_pandas()          # one row per (query, rank): key, rank, id, score, exact
    sims = model.similar_items(["Jazz", "Blues"], k=5, allow=Path("jazz_ids.txt"))   # cosine of item vectors

Filters, the same for both and for every query of a call: `allow` (only these ids are returned) and
`deny` (never returned), each a list of id strings or a `pathlib.Path` to a file of one id per line;
ids not in the vocabulary are ignored. `exclude_seen=True` (the default) never returns a query's own
ids (a context's ids, a similar-items query's id); False lets them back in (re-purchase), the deny
list still applies.

recommend ranks with the model's own rank loop (rank.py, or an ensemble's), `batch_size` contexts
at a time, so every certificate of Algorithm 1 is kept: `exact[q]` says the row is the exact top-k
among the allowed ids. similar_items is exhaustive: every candidate's cosine with the query's item
vector (vectors.py), in blocks (heads/dot_topk.py), so it is always exact.

k beyond the vocabulary is clamped to it (the arrays have min(k, ids) columns); a set model's repeated
context ids count once (Predictor.read_context; `repeated` counts them per query); a bad argument is
an ArgumentError naming it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from .. import _bounds as check
from ..heads.decode_config import DecodeConfig
from ..heads.dot_topk import table_topk


@dataclass
class Recommendations:
    """Top-k answers of Q queries: `ids` (Q, k) object array of id strings (None past the last answer),
    `index` (Q, k) int64 vocabulary ids (-1 there), `scores` (Q, k) float32 (-inf there; the model's
    gamma for recommend, the cosine for similar_items), `exact` (Q,) bool (the row is the certified
    exact top-k), `unknown` the query ids not in the vocabulary, per query."""
    ids: np.ndarray
    index: np.ndarray
    scores: np.ndarray
    exact: np.ndarray
    unknown: list[list[str]] = field(default_factory=list)
    repeated: list[int] = field(default_factory=list)  # per query: known ids given again, counted once

    def __len__(self) -> int:
        return len(self.index)

    def items(self, q: int) -> list[tuple[str, float]]:
        """Row q as (id, score) pairs, best first."""
        q = check.integer("q", q, -len(self), len(self) - 1)
        keep = self.index[q] >= 0
        return list(zip(self.ids[q][keep].tolist(), self.scores[q][keep].astype(float).tolist()))

    def to_arrow(self, keys: Sequence | None = None):
        """A pyarrow Table, one row per answer: key (string; the query's position unless `keys` gives
        one per query), rank (int32, 1 = best), id (string), score (float64), exact (bool) -- the
        columns of `superbloom predict --input ... --out recs.parquet`."""
        import pyarrow as pa

        if keys is not None and len(keys) != len(self):
            raise check.ArgumentError("keys", f"{len(keys)} given for {len(self)} queries")
        q, r = np.nonzero(self.index >= 0)  # row-major: each query's answers best first
        key = np.asarray([str(x) for x in keys] if keys is not None else np.arange(len(self)).astype(str),
                         dtype=object)
        return pa.table({"key": pa.array(key[q].tolist() if len(q) else [], pa.string()),
                         "rank": pa.array(r + 1, pa.int32()),
                         "id": pa.array(self.ids[q, r].tolist() if len(q) else [], pa.string()),
                         "score": pa.array(self.scores[q, r].astype(np.float64)),
                         "exact": pa.array(self.exact[q].astype(bool))})

    def to_pandas(self, keys: Sequence | None = None):
        """to_arrow's table as a pandas DataFrame (pandas is not a dependency: install it to use this)."""
        return self.to_arrow(keys).to_pandas()


def id_list(ids, name: str) -> list[str] | None:
    """An allow- or deny-list as given: None, an iterable of id strings, or an os.PathLike (a file of one
    id per line) -> the id strings. A bare string is an ArgumentError: one id or a file name? Say which."""
    if ids is None:
        return None
    if isinstance(ids, (str, bytes)):
        raise check.ArgumentError(name, f"expected a list of ids, or a pathlib.Path to a file of one id per line; got "
                                        f"the string {ids!r} (write [{ids!r}] for one id, Path({ids!r}) for a file)")
    if isinstance(ids, os.PathLike):
        from .bulk import read_ids

        return read_ids(ids)
    return check.id_list(name, ids)


def resolved(model, ids, name: str) -> np.ndarray | None:
    """id_list -> its known vocabulary ids, sorted unique int64 (model.resolve: an allow-list with none
    known is a ValueError)."""
    got = id_list(ids, name)
    return None if got is None else model.resolve(got, name)[0]


def _known_rows(model, queries: Sequence[Sequence[str]], skip_empty: bool, what: str):
    """Each query's known vocabulary ids (a set model's distinct: Predictor.read_context), unknown strings
    and repeats; a query with none known is an ArgumentError naming its row, unless skip_empty (it then
    gets an empty answer)."""
    known, unknown, repeated = [], [], []
    name = "ids" if what == "id" else "contexts"
    for q, ids in enumerate(queries):
        kn, un, rep = model.read_context(ids, f"{name}[{q}]")
        if len(kn) == 0 and not skip_empty:
            if what == "id":
                raise check.ArgumentError(name, f"{un[0]!r} is not in the model's vocabulary", f"id {q}")
            shown = ", ".join(un[:5]) + (", ..." if len(un) > 5 else "")
            raise check.ArgumentError(name, f"none of its {len(un)} ids is in the model's vocabulary "
                                            f"(unknown: {shown or 'no ids given'})", f"{what} {q}")
        known.append(kn)
        unknown.append(list(un))
        repeated.append(rep)
    return known, unknown, repeated


def _answer(model, index: np.ndarray, scores: np.ndarray, exact: np.ndarray, unknown, repeated) -> Recommendations:
    strings = model.vocab.strings
    ids = np.full(index.shape, None, dtype=object)
    rows, cols = np.nonzero(index >= 0)
    ids[rows, cols] = [strings[i] for i in index[rows, cols].tolist()]
    return Recommendations(ids, index, scores.astype(np.float32), exact.astype(bool), unknown, repeated)


ANSWER_BYTES = 28  # per answer of Recommendations: int64 index, float32 score, an object pointer, its share


def _checked_k(model, k, queries: int) -> int:
    """k >= 1, clamped to the vocabulary; the (queries, k) arrays must fit the memory available."""
    k = min(check.integer("k", k, 1), max(1, len(model.vocab)))
    check.fits_memory("k", queries * k * ANSWER_BYTES, f"{queries:,} answers of {k:,} ids",
                      "ask for fewer ids, or fewer queries at a time")
    return k


def recommend(model, contexts: Iterable[Sequence[str]], k: int = 10, allow=None, deny=None, exclude_seen: bool = True,
              decode: DecodeConfig = DecodeConfig(), batch_size: int = 256, skip_empty: bool = False,
              progress: bool = False) -> Recommendations:
    """Top-k ids for every context (a sequence of id strings, oldest first for a sequence model) -> one
    Recommendations, in input order (module docstring). `model` is a Predictor or an Ensemble: its
    `rank` does the work, `batch_size` contexts a call, so memory holds one batch's exclusions at a time.
    A context with no known id is an ArgumentError naming it, unless skip_empty (an empty, non-exact row)."""
    contexts = [check.id_list(f"contexts[{i}]", c) for i, c in enumerate(check.contexts(contexts))]
    k = _checked_k(model, k, len(contexts))
    check.instance("decode", decode, DecodeConfig, "a superbloom.DecodeConfig")
    batch_size = check.integer("batch_size", batch_size, 1)
    for name, value in (("exclude_seen", exclude_seen), ("skip_empty", skip_empty), ("progress", progress)):
        check.flag(name, value)
    allow_ids, deny_ids = resolved(model, allow, "allow"), resolved(model, deny, "deny")
    known, unknown, repeated = _known_rows(model, contexts, skip_empty, "context")
    rows = [q for q, kn in enumerate(known) if len(kn)]
    index = np.full((len(contexts), k), -1, np.int64)
    scores = np.full((len(contexts), k), -np.inf, np.float32)
    exact = np.zeros(len(contexts), bool)
    deny_ids = np.zeros(0, np.int64) if deny_ids is None else deny_ids
    for a in range(0, len(rows), batch_size):
        part = rows[a:a + batch_size]
        width = max(len(known[q]) for q in part)
        mat = np.full((len(part), width), -1, np.int64)  # (b, c) -1 padded
        for r, q in enumerate(part):
            mat[r, :len(known[q])] = known[q]
        seen = mat if exclude_seen else np.zeros((len(part), 0), np.int64)
        exclude = np.concatenate([seen, np.broadcast_to(deny_ids, (len(part), len(deny_ids)))], 1)  # (b, c + D)
        r = model.rank(mat, k, decode, batch_size, progress and a == 0, exclude=exclude, allow=allow_ids)
        index[part] = r.ids.numpy()
        scores[part] = r.scores.float().numpy()
        exact[part] = r.exact.numpy()
    return _answer(model, index, scores, exact, unknown, repeated)


def similar_items(model, ids: Sequence[str], k: int = 10, allow=None, deny=None, exclude_seen: bool = True,
                  skip_empty: bool = False) -> Recommendations:
    """For each id of `ids`, the k ids of largest cosine between item vectors (vectors.py), among the
    allowed ids less the denied, the id itself left out unless exclude_seen=False -> Recommendations
    (scores: cosines; exact: every row, by exhaustive scoring). An unknown id is a ValueError naming it,
    unless skip_empty (an empty, non-exact row)."""
    ids = check.id_list("ids", ids)
    k = _checked_k(model, k, len(ids))
    for name, value in (("exclude_seen", exclude_seen), ("skip_empty", skip_empty)):
        check.flag(name, value)
    known, unknown, _ = _known_rows(model, [[i] for i in ids], skip_empty, "id")
    model.item_vectors()
    unit = model._unit  # (N, d) unit rows, computed once by item_vectors
    allow_ids, deny_ids = resolved(model, allow, "allow"), resolved(model, deny, "deny")
    cand = None  # (M,) sorted candidate ids; None: every id (no copy of the table)
    if allow_ids is not None or deny_ids is not None:
        cand = np.arange(len(unit), dtype=np.int64) if allow_ids is None else allow_ids
        if deny_ids is not None and len(deny_ids):
            cand = cand[~np.isin(cand, deny_ids)]
    rows = [q for q, kn in enumerate(known) if len(kn)]
    query = np.asarray([known[q][0] for q in rows], np.int64)  # (R,)
    index = np.full((len(ids), k), -1, np.int64)
    scores = np.full((len(ids), k), -np.inf, np.float32)
    exact = np.zeros(len(ids), bool)
    if rows:
        if cand is None:
            table, own = unit, query
        else:
            table = unit[cand]  # (M, d)
            own = np.full(len(query), -1, np.int64)  # (R,) each query's own row in the table, -1: none
            if len(cand):
                pos = np.searchsorted(cand, query).clip(max=len(cand) - 1)
                own = np.where(cand[pos] == query, pos, -1)
        ex = (own if exclude_seen else np.full(len(query), -1, np.int64))[:, None]  # (R, 1) table rows
        top, cos = table_topk(unit[query], table, ex, k)  # (R, k) x 2
        if cand is not None:
            top = np.where(top >= 0, cand[np.maximum(top, 0)], -1) if len(cand) else np.full_like(top, -1)
        index[rows], scores[rows], exact[rows] = top, cos, True
    return _answer(model, index, scores, exact, unknown, [0] * len(ids))
