"""The model settings without torch: ModelConfig, MaskConfig and the names of the model's registries.

The command line shows their defaults and choices without importing torch (every `--help` starts
fast). encoder.py (ModelConfig) and batches.py (MaskConfig) use them and re-export them. The names
stand for registries whose entries are torch code: attention.ATTENTIONS, embeddings.INPUTS,
warmstart.INITS; tests/test_cli_flags.py checks that each names list equals its registry's keys.
"""
from __future__ import annotations

from dataclasses import dataclass

from .._bounds import bad, within_ranges
from .._settings import setting

ATTENTION_NAMES = ("softmax", "kernel", "kernel-auto")  # attention.ATTENTIONS
INPUT_NAMES = ("hashed",)  # embeddings.INPUTS: the input embeddings
INIT_NAMES = ("auto", "normal", "cooccurrence")  # warmstart.INITS: a new run's token embedding


@dataclass(frozen=True)
class ModelConfig:
    d: int = setting(128, range=(1, 65_536), help="embedding / hidden size (the vector size)")
    heads: int = setting(4, range=(1, 4096), help="attention heads")
    d_ff: int = setting(512, range=(1, 1 << 20), help="feed-forward size")
    layers: int = setting(2, range=(1, 1024), help="Transformer layers")
    dropout: float = setting(0.1, range=(0.0, 0.999999), what="a fraction in [0, 1)",
                             help="dropout on embeddings and residual branches")
    attn_dropout: float = setting(0.0, range=(0.0, 0.999999), what="a fraction in [0, 1)",
                                  help="dropout on attention weights (costly on CPU: ~2.5x the attention time)")
    positions: int = setting(0, range=(0, 1 << 20), help="learned position embeddings for ordered data, up to "
                             "this many elements (0: a set)")
    norm_first: bool = setting(True, flag="post-ln", negate=True,
                               help="post-LN blocks as in the paper (default: pre-LN, stabler at high learning rates)")
    embedding: str = setting("hashed", cli=False, help="the input embedding (embeddings.py); always hashed")
    attention: str = setting("softmax", choices=ATTENTION_NAMES, help="softmax, or the blog's kernelized "
                             "attention, linear in the set size (kernel_attention.py; kernel-auto: its cheaper form)")
    causal: bool = setting(False, help="causal attention: each id sees the ids before it only (implied by "
                           "--objective next-item)")
    dynamic: bool = setting(False, flag="dynamic-embedding", help=(
        "add to each id's token embeddings the dynamic embedding of its string (MD5 -> 64 trits -> a learned 64 x d "
        "projection): an id the table never trained, e.g. one added by `superbloom extend`, still gets an input "
        "of its own"))

    def __post_init__(self):
        within_ranges(self, ("d", "heads", "d_ff", "layers", "positions"))  # as the flags allow
        if self.d % self.heads:
            raise bad("d", f"d={self.d} must be divisible by heads={self.heads}")
        if not 0.0 <= self.dropout < 1.0 or not 0.0 <= self.attn_dropout < 1.0:
            raise ValueError(f"dropout and attn_dropout must be in [0, 1), got {self.dropout}, {self.attn_dropout}")
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
    n: int = setting(32, flag="segment", range=(2, 1 << 20), help="max ids per segment (the paper's n)")
    mask_rate: float = setting(0.5, range=(0.0, 1.0), lo_open=True, help="fraction of a segment's ids masked, at "
                               "least one (the paper: 0.15; 0.5 learns faster on small data)")
    p_mask: float = setting(0.6, cli=False, help="of the masked ids: fed as [MASK] (BERT: 0.8); the objective's")
    p_random: float = setting(0.2, cli=False, help="of the masked ids: fed as a random id (BERT: 0.1); the objective's")
    element_dropout: float = setting(0.2, range=(0.0, 0.999999), what="a fraction in [0, 1)", help=(
        "probability that an unmasked context id is dropped from a training example (fed as padding)"))

    def __post_init__(self):
        if self.n < 2:
            raise ValueError(f"segment length n must be >= 2 (a context and a target), got {self.n}")
        if not 0.0 < self.mask_rate <= 1.0:
            raise bad("mask_rate", f"mask_rate must be in (0, 1], got {self.mask_rate}")
        if not (0.0 <= self.p_mask and 0.0 <= self.p_random and self.p_mask + self.p_random <= 1.0):
            raise ValueError(f"p_mask and p_random must be >= 0 with a sum <= 1, got {self.p_mask}, {self.p_random}")
        if not 0.0 <= self.element_dropout < 1.0:
            raise bad("element_dropout", f"element_dropout must be in [0, 1), got {self.element_dropout}")
