"""The model settings without torch: ModelConfig, MaskConfig and the names of the model's registries.

The command line shows their defaults and choices without importing torch (every `--help` starts
fast). encoder.py (ModelConfig) and batches.py (MaskConfig) use them and re-export them. The names
stand for registries whose entries are torch code: attention.ATTENTIONS, embeddings.INPUTS,
warmstart.INITS; tests/test_cli_flags.py checks that each names list equals its registry's keys.
"""
from __future__ import annotations

from dataclasses import dataclass

from .._bounds import bad

ATTENTION_NAMES = ("softmax", "kernel", "kernel-auto")  # attention.ATTENTIONS
INPUT_NAMES = ("hashed",)  # embeddings.INPUTS: the input embeddings
INIT_NAMES = ("auto", "normal", "cooccurrence")  # warmstart.INITS: a new run's token embedding


@dataclass(frozen=True)
class ModelConfig:
    d: int = 128
    heads: int = 4
    d_ff: int = 512
    layers: int = 2
    dropout: float = 0.1  # on embeddings and residual branches
    attn_dropout: float = 0.0  # on attention weights (costly on CPU: ~2.5x the attention time)
    positions: int = 0  # > 0: learned position embeddings for up to this many elements
    norm_first: bool = True  # pre-LN blocks (stabler at high learning rates); False: paper's post-LN
    embedding: str = "hashed"  # input embedding (embeddings.py)
    attention: str = "softmax"  # softmax | kernel (kernel_attention.py: linear in the set size)
    causal: bool = False  # True: element i attends to elements <= i only (next-item models, sequence.py)
    dynamic: bool = False  # True: + the dynamic embedding of each id's string (embeddings.DynamicIdInput)

    def __post_init__(self):
        for name in ("d", "heads", "d_ff", "layers"):
            if getattr(self, name) < 1:
                raise bad(name, f"{name} must be >= 1, got {getattr(self, name)}")
        if self.d % self.heads:
            raise bad("d", f"d={self.d} must be divisible by heads={self.heads}")
        if not 0.0 <= self.dropout < 1.0 or not 0.0 <= self.attn_dropout < 1.0:
            raise ValueError(f"dropout and attn_dropout must be in [0, 1), got {self.dropout}, {self.attn_dropout}")
        if self.positions < 0:
            raise bad("positions", f"positions must be >= 0, got {self.positions}")
        if self.attention not in ATTENTION_NAMES:
            raise bad("attention", f"attention must be one of {sorted(ATTENTION_NAMES)}, got {self.attention!r}")
        if self.embedding not in INPUT_NAMES:
            raise bad("embedding", f"embedding must be one of {sorted(INPUT_NAMES)}, got {self.embedding!r}")
        if self.causal and self.attention != "softmax":
            raise ValueError(f"causal attention needs attention='softmax', got {self.attention!r}")

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        """From config.json; older model directories also stored vocab_size and m (now derived)."""
        return cls(**{k: v for k, v in d.items() if k not in ("vocab_size", "m")})


@dataclass(frozen=True)
class MaskConfig:
    n: int = 32  # max elements per segment
    mask_rate: float = 0.5  # the paper: 0.15; 0.5 learns faster on small data (benchmarks/results/recipe.md)
    p_mask: float = 0.6  # of masked elements: fed as [MASK] (BERT, the paper: 0.8; 0.6 measured better for sets)
    p_random: float = 0.2  # ... fed as a random id (the rest: unchanged) (BERT: 0.1)
    element_dropout: float = 0.2  # each unmasked context element dropped (fed as padding) with this probability

    def __post_init__(self):
        if self.n < 2:
            raise ValueError(f"segment length n must be >= 2 (a context and a target), got {self.n}")
        if not 0.0 < self.mask_rate <= 1.0:
            raise bad("mask_rate", f"mask_rate must be in (0, 1], got {self.mask_rate}")
        if not (0.0 <= self.p_mask and 0.0 <= self.p_random and self.p_mask + self.p_random <= 1.0):
            raise ValueError(f"p_mask and p_random must be >= 0 with a sum <= 1, got {self.p_mask}, {self.p_random}")
        if not 0.0 <= self.element_dropout < 1.0:
            raise bad("element_dropout", f"element_dropout must be in [0, 1), got {self.element_dropout}")
