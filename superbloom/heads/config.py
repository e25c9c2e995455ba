"""The output heads' settings without torch: each head's small frozen config and the names it allows.

Each head has its own config (saved in config.json as {"name": ..., its fields}). The command line
shows their defaults and choices without importing torch (every `--help` starts fast); the head
modules (superbloom.py, full.py, ...) use them and re-export them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

PROPOSALS = ("uniform", "unigram", "log_uniform")
TREES = ("balanced", "huffman", "fano")


@dataclass(frozen=True)
class SuperbloomConfig:
    name: ClassVar[str] = "superbloom"
    per_hash_softmax: bool = False  # softmax j over map j's token range only
    label_smoothing: float = 0.0  # over the classes of each softmax

    def __post_init__(self):
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")


@dataclass(frozen=True)
class FullConfig:
    name: ClassVar[str] = "full"
    label_smoothing: float = 0.0

    def __post_init__(self):
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")


@dataclass(frozen=True)
class SampledConfig:
    name: ClassVar[str] = "sampled"
    samples: int = 1024  # ids drawn per training step, shared by the batch
    proposal: str = "log_uniform"  # uniform | unigram | log_uniform

    def __post_init__(self):
        if self.samples < 1:
            raise ValueError(f"samples must be >= 1, got {self.samples}")
        if self.proposal not in PROPOSALS:
            raise ValueError(f"proposal must be one of {PROPOSALS}, got {self.proposal!r}")


@dataclass(frozen=True)
class HierarchicalConfig:
    name: ClassVar[str] = "hierarchical"
    tree: str = "huffman"  # balanced | huffman | fano, built from the training counts

    def __post_init__(self):
        if self.tree not in TREES:
            raise ValueError(f"tree must be one of {TREES}, got {self.tree!r}")


@dataclass(frozen=True)
class HybridConfig:
    name: ClassVar[str] = "hybrid"
    neighbours: int = 200  # item-item values per id (EASE: its largest; cosine: its most frequent co-occurring ids)
    term: str = "auto"  # ease | cooccurrence | transition | auto (resolve_term)
    window: int = 10  # transition: j counts for c when it comes at most this many ids after c in a sequence
    gap_decay: float = 0.8  # transition: a pair `gap` ids apart counts gap_decay ** (gap - 1)
    label_smoothing: float = 0.0
    samples: int = 0  # > 0: train the network with sampled softmax, this many log-uniform negatives per step

    def __post_init__(self):
        if self.samples < 0:
            raise ValueError(f"samples must be >= 0 (0: full softmax), got {self.samples}")
        if self.samples and self.label_smoothing:
            raise ValueError("label_smoothing applies to the full softmax only (samples 0)")
        check_term_settings(self)
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")


TERMS = ("auto", "ease", "cooccurrence", "transition")


def check_term_settings(cfg) -> None:
    """The item-item term's settings of a hybrid config (HybridConfig, HashedHybridConfig), checked alike."""
    if cfg.neighbours < 1:
        raise ValueError(f"neighbours must be >= 1, got {cfg.neighbours}")
    if cfg.term not in TERMS:
        raise ValueError(f"term must be one of {TERMS}, got {cfg.term!r}")
    if cfg.window < 1:
        raise ValueError(f"window must be >= 1, got {cfg.window}")
    if not 0.0 < cfg.gap_decay <= 1.0:
        raise ValueError(f"gap_decay must be in (0, 1], got {cfg.gap_decay}")


@dataclass(frozen=True)
class HashedHybridConfig(SuperbloomConfig):
    name: ClassVar[str] = "hashed-hybrid"
    neighbours: int = 200  # item-item values per id (cosine: its most frequent co-occurring ids; EASE: its largest)
    term: str = "auto"  # ease | cooccurrence | transition | auto (EASE up to EASE_MAX_IDS ids, else cooccurrence)
    window: int = 10  # transition: j counts for c when it comes at most this many ids after c in a sequence
    gap_decay: float = 0.8  # transition: a pair `gap` ids apart counts gap_decay ** (gap - 1)

    def __post_init__(self):
        super().__post_init__()
        check_term_settings(self)
