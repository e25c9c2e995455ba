"""Ranking metrics (Superbloom sec. 3.1) and their confidence intervals: pure functions of rankings,
targets and per-example values.

ranked (E, K) ids best first (-1 = empty slot), targets (E,) ids (-1 = a target the model cannot
know, e.g. unseen in training: always a miss). Ranks are 1-based; 0 means "not in the top K", so
MRR is truncated at the depth K that was retrieved.

Confidence intervals are percentile bootstraps of a mean. Examples drawn from one held-out set are
not independent (sec. 3.1 holds out several ids of a set), so `groups` (E,) names the set of each
example and a resample draws whole sets: the examples of one set move together. Paired
differences compare two methods on the very same examples, resampled together, so the interval is
that of the difference itself (narrower than two separate intervals would suggest).
"""
from __future__ import annotations

import numpy as np

KS = (1, 10, 20)
HR_KS = (1, 5, 10, 20)  # sequence recommendation (leave-one-out): hit rate at these cut-offs
NDCG_KS = (5, 10, 20)  # ... and NDCG


def target_ranks(ranked: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(E, K), (E,) -> (E,) 1-based rank of the target, 0 if absent."""
    ranked, targets = np.asarray(ranked), np.asarray(targets)
    hit = (ranked == targets[:, None]) & (targets[:, None] >= 0)
    return np.where(hit.any(1), hit.argmax(1) + 1, 0)


def hits_at(ranks: np.ndarray, k: int) -> np.ndarray:
    """(E,) ranks -> (E,) float64: 1.0 where the target is in the top k, else 0.0."""
    ranks = np.asarray(ranks)
    return ((ranks > 0) & (ranks <= k)).astype(np.float64)


def recall_at(ranks: np.ndarray, k: int) -> float:
    return float(hits_at(ranks, k).mean()) if len(ranks) else 0.0


def mrr(ranks: np.ndarray) -> float:
    return float(np.mean(np.where(ranks > 0, 1.0 / np.maximum(ranks, 1), 0.0))) if len(ranks) else 0.0


def ndcg_at(ranks: np.ndarray, k: int) -> float:
    """One relevant item per example: 1 / log2(rank + 1) if rank <= k."""
    gain = np.where((ranks > 0) & (ranks <= k), 1.0 / np.log2(np.maximum(ranks, 1) + 1), 0.0)
    return float(np.mean(gain)) if len(ranks) else 0.0


def hit_rate_at(ranks: np.ndarray, k: int) -> float:
    """HR@k of the leave-one-out protocol: the fraction of examples whose one target is in the top k
    (recall@k with a single target per example)."""
    return recall_at(ranks, k)


def sequence_summary(ranks: np.ndarray, hr_ks=HR_KS, ndcg_ks=NDCG_KS) -> dict:
    """The sequence-recommendation metrics (SASRec / S3-Rec / BERT4Rec full ranking): HR@k, NDCG@k
    and MRR (truncated at the retrieved depth) of (E,) 1-based target ranks (0: not retrieved)."""
    ranks = np.asarray(ranks)
    out = {f"hr@{k}": hit_rate_at(ranks, k) for k in hr_ks}
    out.update({f"ndcg@{k}": ndcg_at(ranks, k) for k in ndcg_ks})
    out["mrr"] = mrr(ranks)
    return out


def summarize(ranks: np.ndarray, ks=KS) -> dict:
    out = {f"rec@{k}": recall_at(ranks, k) for k in ks}
    out["mrr"] = mrr(ranks)
    out["ndcg@10"] = ndcg_at(ranks, 10)
    return out


def bootstrap_ci(values: np.ndarray, n_boot: int = 1000, level: float = 0.95, seed: int = 0,
                 groups: np.ndarray | None = None) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of per-example `values` (E,).

    groups (E,): any labels; a resample draws whole groups (with replacement) and takes the mean
    over all their examples, so correlated examples of one group move together. None: every
    example is its own group (the plain bootstrap)."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return (0.0, 0.0)
    if groups is None:
        sums, counts = values, np.ones(len(values))
    else:
        _, g = np.unique(groups, return_inverse=True)
        sums = np.bincount(g, weights=values)  # (G,)
        counts = np.bincount(g).astype(np.float64)  # (G,)
    pick = np.random.default_rng(seed).integers(0, len(sums), (n_boot, len(sums)))  # (n_boot, G)
    means = sums[pick].sum(1) / counts[pick].sum(1)  # (n_boot,)
    tail = round(1 - level, 12) / 2  # exactly 0.025 for level 0.95 (1 - 0.95 is 0.05000000000000004)
    lo, hi = np.quantile(means, [tail, 1 - tail])
    return float(lo), float(hi)


def mean_ci(values: np.ndarray, groups: np.ndarray | None = None, n_boot: int = 1000, level: float = 0.95,
            seed: int = 0) -> tuple[float, float, float]:
    """(mean, lo, hi): the mean of per-example `values` (E,) and its bootstrap interval (bootstrap_ci)."""
    values = np.asarray(values, dtype=np.float64)
    lo, hi = bootstrap_ci(values, n_boot, level, seed, groups)
    return (float(values.mean()) if len(values) else 0.0), lo, hi


def paired_difference(a: np.ndarray, b: np.ndarray, groups: np.ndarray | None = None, n_boot: int = 1000,
                      level: float = 0.95, seed: int = 0) -> dict:
    """Per-example values of two methods on the same examples, (E,) each (e.g. hits_at of their
    ranks) -> {"diff": mean(a - b), "lo", "hi"}: the difference with its bootstrap interval, the
    examples (or groups) resampled together for both methods."""
    diff, lo, hi = mean_ci(np.asarray(a, np.float64) - np.asarray(b, np.float64), groups, n_boot, level, seed)
    return {"diff": diff, "lo": lo, "hi": hi}


def summarize_ci(ranks: np.ndarray, groups: np.ndarray | None = None, ks=KS, n_boot: int = 1000,
                 level: float = 0.95, seed: int = 0) -> dict:
    """{"rec@k", "rec@k_lo", "rec@k_hi" for k in ks, "mrr"}: recall with bootstrap intervals (groups:
    as bootstrap_ci), and MRR truncated at the retrieved depth."""
    out = {}
    for k in ks:
        rec, lo, hi = mean_ci(hits_at(ranks, k), groups, n_boot, level, seed)
        out.update({f"rec@{k}": rec, f"rec@{k}_lo": lo, f"rec@{k}_hi": hi})
    out["mrr"] = mrr(ranks)
    return out
