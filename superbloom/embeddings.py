"""Input embeddings: how the tokens of a set's elements become vectors (the input family).

    hashed   the paper's (sec. 3.2): every element is m Bloom tokens (hashing.py) looked up in one
             table of n_tokens x d rows, which the superbloom head (and the full head, unhashed)
             ties as its output embedding

The table's size is derived from the input vocabulary object (the hash maps), never configured by
hand. A new input embedding is one builder here and one entry in INPUTS.
"""
from __future__ import annotations

import torch.nn as nn

from .hashing import BloomHash


def hashed_embedding(hashing: BloomHash, d: int) -> nn.Embedding:
    """(B, T) tokens -> (B, T, d): one row per token of the hashed vocabulary."""
    return nn.Embedding(hashing.n_tokens, d)


INPUTS = {"hashed": hashed_embedding}


def build_embedding(name: str, hashing: BloomHash, d: int) -> nn.Module:
    if name not in INPUTS:
        raise ValueError(f"unknown input embedding {name!r}; choose from {sorted(INPUTS)}")
    return INPUTS[name](hashing, d)
