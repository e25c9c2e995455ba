"""Ranking metrics (Superbloom sec. 3.1): pure functions of rankings and targets.

ranked (E, K) ids best first (-1 = empty slot), targets (E,) ids (-1 = a target the model cannot
know, e.g. unseen in training: always a miss). Ranks are 1-based; 0 means "not in the top K", so
MRR is truncated at the depth K that was retrieved.
"""
from __future__ import annotations

import numpy as np

KS = (1, 10, 20)


def target_ranks(ranked: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(E, K), (E,) -> (E,) 1-based rank of the target, 0 if absent."""
    ranked, targets = np.asarray(ranked), np.asarray(targets)
    hit = (ranked == targets[:, None]) & (targets[:, None] >= 0)
    return np.where(hit.any(1), hit.argmax(1) + 1, 0)


def recall_at(ranks: np.ndarray, k: int) -> float:
    return float(np.mean((ranks > 0) & (ranks <= k))) if len(ranks) else 0.0


def mrr(ranks: np.ndarray) -> float:
    return float(np.mean(np.where(ranks > 0, 1.0 / np.maximum(ranks, 1), 0.0))) if len(ranks) else 0.0


def ndcg_at(ranks: np.ndarray, k: int) -> float:
    """One relevant item per example: 1 / log2(rank + 1) if rank <= k."""
    gain = np.where((ranks > 0) & (ranks <= k), 1.0 / np.log2(np.maximum(ranks, 1) + 1), 0.0)
    return float(np.mean(gain)) if len(ranks) else 0.0


def summarize(ranks: np.ndarray, ks=KS) -> dict:
    out = {f"rec@{k}": recall_at(ranks, k) for k in ks}
    out["mrr"] = mrr(ranks)
    out["ndcg@10"] = ndcg_at(ranks, 10)
    return out


def bootstrap_ci(values: np.ndarray, n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of per-example values."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return (0.0, 0.0)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), (n_boot, len(values)))].mean(1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)
