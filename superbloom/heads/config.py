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
