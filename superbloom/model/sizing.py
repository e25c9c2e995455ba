"""Model sizes without training: the parameter count of the model a configuration builds, and the
width whose count is closest to a budget -- for comparing heads or depths at equal parameters
(the paper's Tables 2 and 3 compare models of the same size, sec. 3.3).

    target = count_params(data.n_ids, data.counts, sb.HashConfig(50, 2), model_config(128, 2), sb.SuperbloomConfig())
    cfg, params = matched_width(data.n_ids, data.counts, target, sb.HashConfig(1, 1), 2, sb.FullConfig())

The count builds the model once (embeddings included, the hybrid head's fixed item-item weights too:
model.count_parameters) on random hash maps: only their sizes matter, so a coherent configuration
is counted without computing its co-occurrence tree.
"""
from __future__ import annotations

import numpy as np

from ..hashing.bloom import BloomHash, HashConfig
from ..heads import HeadConfig
from .encoder import ModelConfig, build_model, count_parameters

WIDTHS = (4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384)  # candidate d, increasing


def model_config(d: int, layers: int, heads: int = 4, d_ff: int | None = None, dropout: float = 0.1) -> ModelConfig:
    """The encoder shape these comparisons use: `heads` attention heads, d_ff = 4 d unless given."""
    return ModelConfig(d=d, heads=heads, d_ff=d_ff or 4 * d, layers=layers, dropout=dropout)


def count_params(n_ids: int, counts: np.ndarray | None, hash_cfg: HashConfig, model: ModelConfig,
                 head: HeadConfig) -> int:
    """Parameters (embeddings included) of the model a run would build over `n_ids` ids with training
    `counts` (N,) (heads that need them: hierarchical, sampled), without training it."""
    sizes = BloomHash.build(n_ids, HashConfig(hash_cfg.alpha, hash_cfg.m, hash_cfg.seed))  # random: sizes only
    return count_parameters(build_model(model, head, sizes, counts))


def matched_width(n_ids: int, counts: np.ndarray | None, target: int, hash_cfg: HashConfig, layers: int,
                  head: HeadConfig, widths=WIDTHS) -> tuple[ModelConfig, int]:
    """The model width d from `widths` (increasing; 4 heads, or 2 where d is not a multiple of 4;
    d_ff = 4 d) whose parameter count is closest to `target`; the first wider than `target` ends the
    search. -> (its ModelConfig, its parameter count)."""
    best = None
    for d in widths:
        cfg = model_config(d, layers, heads=4 if d % 4 == 0 else 2)
        p = count_params(n_ids, counts, hash_cfg, cfg, head)
        if best is None or abs(p - target) < abs(best[1] - target):
            best = (cfg, p)
        if p > target:
            break
    return best
