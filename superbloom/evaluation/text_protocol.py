"""Evaluation of a text model (Superbloom sec. 4, Table 5): masked tokens of held-out documents.

    superbloom eval runs/text data/text            # protocol "auto" picks "text" for a prepare-text dataset

The protocol is the entry `TEXT` of the evaluation registry (protocols.REGISTRY["text"]).

The text protocol (`TextMasking`): from test rows (segments of whole sentences of held-out
documents; at most `max_sets` rows, seeded), a segment of <= n tokens each, round(15% of its
non-[UNK] tokens) (at least one) chosen and ALL fed as [MASK], IN PLACE: the order and every other
token stay. Every masked token is an example; the ranking excludes nothing (no context exclusion:
a word may repeat a word of its context). Examples of one row are not independent, so confidence
intervals resample whole rows. [UNK] is never a target; targets that are [UNK] in the test text are
not chosen, so the rates are over in-vocabulary tokens.

Two baselines rank the same masked positions:
  unigram   the most frequent training tokens (counts.npy), the same list for every position
  bigram    the neighbouring tokens: p(w | left) + p(w | right) from counts of adjacent token pairs in
            the training rows, where a neighbour is a known token (not [MASK], padding or [UNK]), each
            p( . | neighbour) cut to its 1,000 most likely tokens;
            ties and the tail are broken by unigram frequency (a position with no usable neighbour
            gets the unigram list)

Reported per method: rec@1/10/20 (with 95% bootstrap intervals), MRR (truncated at `depth`),
NDCG@10; split by target kind (unigram vs bigram tokens, `miles_davis`) and by frequency decile of
the target (ten equal groups of examples by training count, rarest first; Superbloom Figure 3).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..data.dataset import Dataset, SetArray
from ..hashing.bloom import PAD_ELEM
from .metrics import KS, hits_at, mrr, ndcg_at, summarize_ci
from ..model.text_batches import TEXT_MASK, MaskedRows, masked_rows
from ..inference.rank import rank_masked
from ..heads.bigram import adjacent_pairs, conditional
from ..text.ngrams import SEPARATOR, UNK_ID


@dataclass(frozen=True)
class TextMasking:
    """The text protocol (module docstring)."""
    n: int = TEXT_MASK.n
    mask_rate: float = TEXT_MASK.mask_rate
    max_sets: int = 2000  # test rows evaluated (seeded choice), 0: all
    seed: int = 0
    name: str = "text"

    def examples(self, data: Dataset) -> MaskedRows:
        rows = np.flatnonzero(data.test.lengths > 0)
        if self.max_sets and self.max_sets < len(rows):
            rows = np.sort(np.random.default_rng([self.seed, 3]).choice(rows, self.max_sets, replace=False))
        return masked_rows(data.test, rows, self.n, self.mask_rate, self.seed)

    def describe(self) -> dict:
        return {"protocol": self.name, "n": self.n, "mask_rate": self.mask_rate, "max_sets": self.max_sets,
                "seed": self.seed, "masked_fed_as": "[MASK] (all)", "in_place": True, "context_excluded": False}


# ---------------------------------------------------------------- baselines


def unigram_topk(counts: np.ndarray, k: int) -> np.ndarray:
    """(k,) the k most frequent ids ([UNK] never: it is never a target), ties by id."""
    c = np.asarray(counts, np.float64).copy()
    c[UNK_ID] = -1
    order = np.lexsort((np.arange(len(c)), -c))
    return order[:k]


class BigramContext:
    """p(w | left neighbour) + p(w | right neighbour) from adjacent training pairs (module docstring)."""

    def __init__(self, rows: SetArray, counts: np.ndarray, keep: int = 1000):
        n = len(counts)
        after = adjacent_pairs(rows, n)  # (N, N) [a, b]: b follows a
        self.after, self.before = (conditional(m, keep) for m in (after, after.T.tocsr()))  # [c, b]: b precedes c
        c = np.asarray(counts, np.float64)
        self.tiebreak = (1e-6 * c / max(c.max(), 1)).astype(np.float64)  # < any probability difference
        self.tiebreak[UNK_ID] = -1.0

    def rank(self, left: np.ndarray, right: np.ndarray, k: int, chunk: int = 512) -> np.ndarray:
        """left, right (E,) neighbour ids (-1: none) -> (E, k) ids best first."""
        fallback = unigram_topk(self.tiebreak, k)
        out = []
        for a in range(0, len(left), chunk):
            lft, rgt = left[a:a + chunk], right[a:a + chunk]
            e = len(lft)
            s = (_rows(self.after, lft) + _rows(self.before, rgt)).tocsr()  # (e, N) sparse scores
            s.sum_duplicates()
            r = np.repeat(np.arange(e), np.diff(s.indptr))
            score = s.data.astype(np.float64) + self.tiebreak[s.indices]
            # candidates: the sparse entries, then the unigram list (with its tiebreak score only)
            cr = np.concatenate([r, np.repeat(np.arange(e), k)])
            ci = np.concatenate([s.indices.astype(np.int64), np.tile(fallback, e)])
            cs = np.concatenate([score, np.tile(self.tiebreak[fallback], e)])
            order = np.lexsort((-cs, ci, cr))  # by row, id, best score first: drop repeated ids
            cr, ci, cs = cr[order], ci[order], cs[order]
            first = np.r_[True, (cr[1:] != cr[:-1]) | (ci[1:] != ci[:-1])]
            cr, ci, cs = cr[first], ci[first], cs[first]
            order = np.lexsort((ci, -cs, cr))  # by row, best first
            cr, ci = cr[order], ci[order]
            start = np.searchsorted(cr, np.arange(e))
            rank_in_row = np.arange(len(cr)) - start[cr]
            top = np.full((e, k), -1, np.int64)
            sel = rank_in_row < k
            top[cr[sel], rank_in_row[sel]] = ci[sel]
            out.append(top)
        return np.concatenate(out) if out else np.zeros((0, k), np.int64)


def _rows(m: sp.csr_matrix, ids: np.ndarray) -> sp.csr_matrix:
    """Rows `ids` of m, an empty row where ids < 0."""
    picked = m[np.maximum(ids, 0)]
    return sp.diags((ids >= 0).astype(np.float32)) @ picked


def neighbours(ex: MaskedRows) -> tuple[np.ndarray, np.ndarray]:
    """(left (M,), right (M,)) known neighbour id of every target in ex.flat() order, -1 where the
    neighbour is masked, padding, [UNK] or outside the row."""
    r, c, _ = ex.flat()
    e = ex.elems
    w = e.shape[1]
    left = np.where(c > 0, e[r, np.maximum(c - 1, 0)], PAD_ELEM)
    right = np.where(c < w - 1, e[r, np.minimum(c + 1, w - 1)], PAD_ELEM)
    known = lambda x: np.where((x >= 0) & (x != UNK_ID), x, -1)  # noqa: E731
    return known(left), known(right)


# ---------------------------------------------------------------- the report


def frequency_deciles(target_counts: np.ndarray) -> np.ndarray:
    """(E,) training counts of the targets -> (E,) decile 0 (rarest) .. 9: ten equal groups of examples."""
    order = np.argsort(target_counts, kind="stable")
    dec = np.empty(len(order), np.int64)
    dec[order] = (np.arange(len(order)) * 10) // max(len(order), 1)
    return dec


def _metrics(ranks: np.ndarray, groups: np.ndarray) -> dict:
    out = summarize_ci(ranks, groups, KS)
    out["ndcg@10"] = ndcg_at(ranks, 10)
    return out


def breakdown(ranks: np.ndarray, groups: np.ndarray, bigram: np.ndarray, decile: np.ndarray) -> dict:
    """Overall metrics with intervals, by target kind, by frequency decile."""
    out = _metrics(ranks, groups)
    out["by_kind"] = {name: dict({f"rec@{k}": float(hits_at(ranks[sel], k).mean()) if sel.any() else 0.0
                                  for k in KS}, mrr=mrr(ranks[sel]), examples=int(sel.sum()))
                      for name, sel in (("unigram", ~bigram), ("bigram", bigram))}
    out["by_decile"] = [dict({f"rec@{k}": float(hits_at(ranks[decile == q], k).mean()) if (decile == q).any()
                              else 0.0 for k in KS}, examples=int((decile == q).sum())) for q in range(10)]
    return out


@dataclass
class TextExamples:
    """The masked tokens of the text protocol, with what its metrics split them by."""
    masked: MaskedRows
    targets: np.ndarray  # (M,) target ids in ex.flat() order (the order of rank_masked)
    groups: np.ndarray  # (M,) the test row of each target: intervals resample whole rows
    bigram: np.ndarray  # (M,) bool: the target is a bigram token
    decile: np.ndarray  # (M,) frequency decile of the target, 0 = rarest
    decile_min_counts: list[int]


def _unigram(data: Dataset, ex: TextExamples, k: int) -> np.ndarray:
    return np.broadcast_to(unigram_topk(np.asarray(data.counts), k), (len(ex.targets), k))


def _bigram(data: Dataset, ex: TextExamples, k: int) -> np.ndarray:
    left, right = neighbours(ex.masked)
    return BigramContext(data.train, np.asarray(data.counts)).rank(left, right, k)


TEXT_BASELINES = {"unigram": _unigram, "bigram": _bigram}  # name -> (data, examples, k) -> (M, k) ids


class TextProtocol:
    """The text protocol (module docstring) as an entry of the evaluation registry (protocols.py's
    EvalProtocol hooks). cfg: config.EvalConfig (max_sets, seed, depth, decode, batch_size are used;
    any `baselines`: the two text baselines, none: no baseline); segments are as long as the model's
    training segments (config.json), at most its positions."""
    name = "text"
    recall = "rec"
    unit = "test rows"

    def drawer(self, cfg, model_config: dict) -> TextMasking:
        trained = model_config.get("train", {}).get("mask", {})  # segments as long as the model trained on
        n = int(trained.get("n", TEXT_MASK.n))
        positions = int(model_config.get("model", {}).get("positions", 0) or 0)
        n = min(n, positions) if positions else n
        return TextMasking(n=n, max_sets=cfg.max_sets or 2000, seed=cfg.seed)

    def examples(self, data: Dataset, cfg, model_config: dict) -> TextExamples:
        if "text" not in data.meta:  # ordered text rows only (protocols.REGISTRY's claim): refused, not guessed
            raise ValueError(f"{data.path}: a {data.split!r} dataset, not text from prepare-text; evaluate it with "
                             f"--protocol {data.split}")
        ex = self.drawer(cfg, model_config).examples(data)
        rows, _, targets = ex.flat()
        if len(targets) == 0:
            raise ValueError(f"{data.path}: the test split has no in-vocabulary token to mask; nothing to evaluate")
        counts = np.asarray(data.counts)
        bigram = np.char.find(np.array(data.vocab.strings, dtype=object)[targets].astype(str), SEPARATOR) >= 0
        decile = frequency_deciles(counts[targets])
        edges = [int(np.min(counts[targets][decile == q])) for q in range(10) if (decile == q).any()]
        return TextExamples(ex, targets, ex.rows[rows], bigram, decile, edges)

    def targets(self, ex: TextExamples) -> np.ndarray:
        return ex.targets

    def groups(self, ex: TextExamples) -> np.ndarray:
        return ex.groups

    def rank_model(self, predictor, ex: TextExamples, cfg, progress: bool):
        return rank_masked(predictor.model, predictor.hashing, ex.masked, cfg.depth, cfg.decode,
                           max(1, cfg.batch_size // 8))

    def baselines(self, cfg) -> tuple[str, ...]:
        return tuple(TEXT_BASELINES) if cfg.baselines else ()  # `eval --baselines none`: none

    def baseline_skipped(self, name: str, data: Dataset) -> str | None:
        return None

    def rank_baseline(self, name: str, data: Dataset, ex: TextExamples, cfg, chosen: dict | None = None) -> np.ndarray:
        return TEXT_BASELINES[name](data, ex, cfg.depth)

    def summarize(self, ranks: np.ndarray, ex: TextExamples) -> dict:
        return breakdown(ranks, ex.groups, ex.bigram, ex.decile)

    def counts(self, ex: TextExamples) -> dict:
        return {"examples": int(len(ex.targets)), "rows": int(len(ex.masked.rows)),
                "bigram_targets": int(ex.bigram.sum()), "decile_min_counts": ex.decile_min_counts}

    def settings(self, cfg, model_config: dict) -> dict:
        return self.drawer(cfg, model_config).describe() | {"depth": cfg.depth, "decode": cfg.decode.settings()}

    def report(self, result) -> str:
        """One row per method, then the splits by kind and by decile."""
        r, d = result.to_dict(), result.decoding
        rows = [(result.labels.get("model", "superbloom model"), result.model)]
        rows += [(result.labels.get(k, k), v) for k, v in result.variants.items()]
        rows += [(f"{k} baseline", v) for k, v in result.baselines.items()]
        cols = ["rec@1", "rec@10", "rec@20", "mrr", "ndcg@10"]
        w = max(18, *(len(name) + 1 for name, _ in rows))
        lines = [f"{'method':<{w}}" + "".join(f"{c:>9}" for c in cols) + "   rec@10 95% interval"]
        for name, m in rows:
            lines.append(f"{name:<{w}}" + "".join(f"{m[c]:>9.4f}" for c in cols) +
                         f"   [{m['rec@10_lo']:.4f}, {m['rec@10_hi']:.4f}]")
        for kind in ("unigram", "bigram"):
            lines.append(f"{kind} targets ({r['by_kind'][kind]['examples']:,}): " + "; ".join(
                f"{name} {m['by_kind'][kind]['rec@1']:.3f}/{m['by_kind'][kind]['rec@10']:.3f}/"
                f"{m['by_kind'][kind]['rec@20']:.3f}" for name, m in rows) + "  (rec@1/10/20)")
        lines.append("rec@10 by target frequency decile (rarest first): " + "; ".join(
            f"{name} " + " ".join(f"{d['rec@10']:.2f}" for d in m["by_decile"]) for name, m in rows))
        p = result.settings
        lines.append(f"{r['examples']:,} masked tokens in {r['rows']:,} test rows (segments of <= {p['n']} "
                     f"tokens, {p['mask_rate']:.0%} masked in place, all fed as [MASK], seed {p['seed']}); nothing "
                     "excluded from the rankings; [UNK] never a target; intervals resample whole rows.")
        lines.append(f"decoding: {d['certified_exact']:.1%} of top-{p['depth']} answers certified exact, "
                     f"mean beam {d['mean_beam']:.1f}, {d['queries_per_second']:,} masked tokens/s")
        return "\n".join(lines)


TEXT = TextProtocol()
