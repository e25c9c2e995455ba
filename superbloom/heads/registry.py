"""The head registry: name -> (config class, head class), head_config(name, **settings), build_head.

The heads and their interface are described in heads/__init__.py; a new head is one entry in HEADS.
"""
from __future__ import annotations

import dataclasses
from typing import Union

import torch.nn as nn

from ..hashing.bloom import BloomHash
from .base import HeadBase
from .full import FullConfig, FullHead
from .hashed_hybrid import HashedHybridConfig, HashedHybridHead
from .hierarchical import TREES, HierarchicalConfig, HierarchicalHead
from .hybrid import HybridConfig, HybridHead
from .sampled import PROPOSALS, SampledConfig, SampledHead
from .superbloom import SuperbloomConfig, SuperbloomHead

HeadConfig = Union[SuperbloomConfig, FullConfig, SampledConfig, HierarchicalConfig, HybridConfig, HashedHybridConfig]


Head = HeadBase  # the interface every output head implements (base.py)

HEADS: dict[str, tuple[type, type]] = {  # name -> (config class, head class)
    "superbloom": (SuperbloomConfig, SuperbloomHead),
    "full": (FullConfig, FullHead),
    "sampled": (SampledConfig, SampledHead),
    "hierarchical": (HierarchicalConfig, HierarchicalHead),
    "hybrid": (HybridConfig, HybridHead),
    "hashed-hybrid": (HashedHybridConfig, HashedHybridHead),
}

# settings of the single HeadConfig that config.json files written before the heads package carry
_LEGACY_FIELDS = {"per_hash_softmax", "label_smoothing", "samples", "proposal", "tree"}


def _config_class(name: str) -> type:
    if name not in HEADS:
        raise ValueError(f"unknown head {name!r}; choose from {sorted(HEADS)}")
    return HEADS[name][0]


def head_settings(name: str) -> tuple[str, ...]:
    """The settings of head `name` (its config's fields)."""
    return tuple(f.name for f in dataclasses.fields(_config_class(name)))


def head_config(name: str = "superbloom", **settings) -> HeadConfig:
    """The config of head `name` with the given settings; a setting of another head is an error."""
    cls = _config_class(name)
    wrong = sorted(set(settings) - set(head_settings(name)))
    if wrong:
        own = ", ".join(head_settings(name)) or "none"
        raise ValueError(f"{', '.join(wrong)} {'is not a setting' if len(wrong) == 1 else 'are not settings'} "
                         f"of the {name} head (its settings: {own})")
    return cls(**settings)


def head_config_dict(cfg: HeadConfig) -> dict:
    """{"name": ..., settings...}: how config.json stores a head."""
    return {"name": cfg.name, **dataclasses.asdict(cfg)}


def head_config_from_dict(d: dict) -> HeadConfig:
    """Inverse of head_config_dict; also reads the single HeadConfig of older model directories."""
    d = dict(d)
    name = d.pop("name", "superbloom")
    own = set(head_settings(name))
    return head_config(name, **{k: v for k, v in d.items() if k in own or k not in _LEGACY_FIELDS})


def build_head(cfg: HeadConfig, embedding: nn.Embedding, hashing: BloomHash, counts=None) -> HeadBase:
    """The head `cfg` configures. `counts` (training id counts, (N,)) builds proposals and trees."""
    return HEADS[cfg.name][1](embedding, hashing, cfg, counts)


__all__ = ["HEADS", "PROPOSALS", "TREES", "FullConfig", "FullHead", "HashedHybridConfig", "HashedHybridHead", "Head", "HeadBase", "HeadConfig", "HierarchicalConfig",
           "HierarchicalHead", "HybridConfig", "HybridHead", "SampledConfig", "SampledHead", "SuperbloomConfig", "SuperbloomHead", "build_head",
           "head_config", "head_config_dict", "head_config_from_dict", "head_settings"]
