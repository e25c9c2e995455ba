"""The head registry: name -> (config class, head class), and build_head.

The heads and their interface are described in heads/__init__.py; a new head is one entry in HEADS
(and its config's in config.HEAD_CONFIGS, which head_config and head_settings read without torch).
"""
from __future__ import annotations

import torch.nn as nn

from ..hashing.bloom import BloomHash
from .base import HeadBase
from .full import FullConfig, FullHead
from .hashed_hybrid import HashedHybridConfig, HashedHybridHead
from .hierarchical import TREES, HierarchicalConfig, HierarchicalHead
from .hybrid import HybridConfig, HybridHead
from .sampled import PROPOSALS, SampledConfig, SampledHead
from .superbloom import SuperbloomConfig, SuperbloomHead
from .config import HeadConfig, head_config, head_config_dict, head_config_from_dict, head_settings  # noqa: F401

Head = HeadBase  # the interface every output head implements (base.py)

HEADS: dict[str, tuple[type, type]] = {  # name -> (config class, head class)
    "superbloom": (SuperbloomConfig, SuperbloomHead),
    "full": (FullConfig, FullHead),
    "sampled": (SampledConfig, SampledHead),
    "hierarchical": (HierarchicalConfig, HierarchicalHead),
    "hybrid": (HybridConfig, HybridHead),
    "hashed-hybrid": (HashedHybridConfig, HashedHybridHead),
}


def scores_every_id(name: str) -> bool:
    """Does the head `name` give the network's log p of every id (HeadBase.network_scores): what an
    ensemble's members need (inference/ensemble.py, training/members.py)."""
    return HEADS[name][1].network_scores is not HeadBase.network_scores


def build_head(cfg: HeadConfig, embedding: nn.Embedding, hashing: BloomHash, counts=None) -> HeadBase:
    """The head `cfg` configures. `counts` (training id counts, (N,)) builds proposals and trees."""
    return HEADS[cfg.name][1](embedding, hashing, cfg, counts)


__all__ = ["HEADS", "PROPOSALS", "TREES", "FullConfig", "FullHead", "HashedHybridConfig", "HashedHybridHead", "Head", "HeadBase", "HeadConfig", "HierarchicalConfig",
           "HierarchicalHead", "HybridConfig", "HybridHead", "SampledConfig", "SampledHead", "SuperbloomConfig", "SuperbloomHead", "build_head", "scores_every_id",
           "head_config", "head_config_dict", "head_config_from_dict", "head_settings"]
