"""The head registry: name -> (config class, head class), head_config(name, **settings), build_head.

Output heads: one interface (base.py), five implementations, one factory.

Every head is an nn.Module subclassing HeadBase (base.py: the interface and its default hooks) that
maps the m output vectors of an element, hidden (M, m, d), to
  loss(hidden, targets, rows=None)         mean over the M targets of -log p(target | hidden[rows[i]])
                                           (for the hashed head: summed over the m hashes); rows
                                           lets several targets share one hidden row (default: own)
  topk(hidden, k, exclude=None, decode=DecodeConfig(), context=None)  -> ranking.Ranking of ids, best
                                           first; exclude (Q, X) ids, -1 padded, are never returned;
                                           context (Q, T) the query's context ids, -1 padded, oldest
                                           first (every caller passes it; most heads ignore it)
and has the hooks generic code calls instead of asking which head it holds: uses_context, fit,
choose, variants, describe, fixed_weights (base.py).

  superbloom    superbloom.py    the hashed softmax of the paper, tied to the token embedding,
                                 decoded by Algorithm 1 (approximate, or exact with a certificate)
  full          full.py          one output row per id and a full softmax (the paper's `baseline`)
  sampled       sampled.py       the full head's output layer trained with sampled softmax
  hierarchical  hierarchical.py  a binary tree over the ids, top-k by A* (the hierarchical softmax notes)
  hybrid        hybrid.py        the full softmax plus a sparse learned item-item term over the context
                                 (issue 16: a linear item-item term only as its own, named head); its
                                 topk scores with the context ids (`uses_context`); itemitem.py
  hashed-hybrid hashed_hybrid.py the superbloom head plus the same kind of item-item term, at any hashing
                                 (millions of ids): exact top-k by Algorithm 1 on the ids the term does
                                 not touch, merged with the touched ids scored exactly

Each head has its own small frozen config (`SuperbloomConfig`, `FullConfig`, `SampledConfig`,
`HierarchicalConfig`, `HybridConfig`), saved in config.json as {"name": ..., its fields}. The heads that are not
hashed average the m output vectors of an element into one, score ids with one distribution and
return an exact top-k (`Ranking.exact` all True): the decoding options beam/exact do not apply to
them; a score gamma is applied to the single log-probability (the identity for sum_log/min/max);
exhaustive scores every id (hierarchical: every leaf, instead of A*).

A new head is one module with a config and a HeadBase subclass, and one entry in HEADS.
"""
from __future__ import annotations

import dataclasses
from typing import Union

import torch.nn as nn

from ..hashing import BloomHash
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
