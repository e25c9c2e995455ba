"""Output heads: one interface (base.py), six implementations, one factory.

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
                                 (a linear item-item term only as its own, named head); its
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

A new head is one module with a HeadBase subclass, its config in config.py, and one entry in HEADS
(and in config.HEAD_CONFIGS).

The registry (HEADS, build_head) is registry.py, the configs by name (HEAD_CONFIGS, head_config,
head_settings) config.py (no torch); every name here is imported lazily
(so `superbloom.heads.decode_config` and `superbloom.heads.beam` can be imported without the heads).
"""
from .._lazy import lazy_exports

_EXPORTS = {
    "HEADS": ".registry",
    "HEAD_CONFIGS": ".config",
    "PROPOSALS": ".config",
    "TREES": ".config",
    "FullConfig": ".config",
    "FullHead": ".full",
    "HashedHybridConfig": ".config",
    "HashedHybridHead": ".hashed_hybrid",
    "Head": ".registry",
    "HeadBase": ".base",
    "HeadConfig": ".config",
    "HierarchicalConfig": ".config",
    "HierarchicalHead": ".hierarchical",
    "HybridConfig": ".config",
    "HybridHead": ".hybrid",
    "SampledConfig": ".config",
    "SampledHead": ".sampled",
    "SuperbloomConfig": ".config",
    "SuperbloomHead": ".superbloom",
    "build_head": ".registry",
    "head_config": ".config",
    "head_config_dict": ".config",
    "head_config_from_dict": ".config",
    "head_settings": ".config",
}
lazy_exports(globals(), _EXPORTS)

__all__ = ["FullConfig", "FullHead", "HEADS", "HEAD_CONFIGS", "HashedHybridConfig", "HashedHybridHead", "Head", "HeadBase", "HeadConfig", "HierarchicalConfig", "HierarchicalHead", "HybridConfig", "HybridHead", "PROPOSALS", "SampledConfig", "SampledHead", "SuperbloomConfig", "SuperbloomHead", "TREES", "build_head", "head_config", "head_config_dict", "head_config_from_dict", "head_settings"]
