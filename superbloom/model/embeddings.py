"""Input embeddings: how the tokens of a set's elements become vectors (the input family).

    hashed   the paper's (sec. 3.2): every element is m Bloom tokens (hashing.py) looked up in one
             table of n_tokens x d rows, which the superbloom head (and the full head, unhashed)
             ties as its output embedding
    + dynamic  (ModelConfig.dynamic) DynamicIdInput adds to every token of an element the dynamic
             embedding of its id's string (dynamic.py: MD5 -> 64 trits -> 64 x d projection)

The table's size is derived from the input vocabulary object (the hash maps), never configured by
hand. A new input embedding is one builder here and one entry in INPUTS.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .dynamic import N_TRITS, DynamicEmbedding, TritVocab
from ..hashing.bloom import BloomHash
from ..heads.rows import declare_rows, gather_rows


class TokenEmbedding(nn.Embedding):
    """nn.Embedding (the same weights and state dict) whose gradient is row-sparse, the rows of the
    batch's tokens only, while the training loop has turned sparse rows on (heads/rows.py)."""

    def __init__(self, n: int, d: int):
        super().__init__(n, d)
        declare_rows(self, ("weight",))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if self.sparse_rows:
            return gather_rows(self.weight, tokens, True)
        return F.embedding(tokens, self.weight)


def hashed_embedding(hashing: BloomHash, d: int) -> nn.Embedding:
    """(B, T) tokens -> (B, T, d): one row per token of the hashed vocabulary."""
    return TokenEmbedding(hashing.n_tokens, d)


INPUTS = {"hashed": hashed_embedding}


def build_embedding(name: str, hashing: BloomHash, d: int) -> nn.Module:
    if name not in INPUTS:
        raise ValueError(f"unknown input embedding {name!r}; choose from {sorted(INPUTS)}")
    return INPUTS[name](hashing, d)


class DynamicIdInput(nn.Module):
    """The dynamic embedding of each element's id string (dynamic.py), per token: an extra input of
    the id model (ModelConfig.dynamic). tokens (B, T) -> (B, T, d), added to the hashed
    token embedding, so an id's input is its m token rows + the projection of its string's 64 trits:
    an id the table never trained (one added by `superbloom extend`) still gets an input of its own.

    The id of an element is read back from its m tokens (element-major, hashing.py): map 0's bucket
    names at most a few ids (the inverse index), and the one whose buckets under the other maps
    match is the id (unique: no two ids share all m buckets). Special tokens ([PAD], [MASK], ...)
    get zeros, i.e. keep their plain embedding. Vectorised: gathers over (B, T / m, width) only.
    The trits (N, 64) int8 and the hash tables are buffers rebuilt from the vocabulary and the
    hashing (not saved); only the 64 x d projection is a parameter."""

    def __init__(self, hashing: BloomHash, strings, d: int):
        super().__init__()
        if len(strings) != hashing.n_ids:
            raise ValueError(f"the dynamic input needs one string per id: {len(strings):,} strings for "
                             f"{hashing.n_ids:,} ids")
        self.m, self.n_special = hashing.m, hashing.n_special_tokens
        self.embed = DynamicEmbedding(d, TritVocab(strings))  # table: (N, 64) int8 buffer
        # the same per-coordinate scale as the token rows (std 0.02, model._init): trits have E[t^2] = 3/4
        nn.init.normal_(self.embed.proj.weight, std=0.02 * (N_TRITS * 0.75) ** -0.5)
        self.register_buffer("offsets", torch.as_tensor(hashing.offsets, dtype=torch.long), persistent=False)
        self.hashing_changed(hashing)

    def hashing_changed(self, hashing: BloomHash) -> None:
        """The tables from `hashing` (at build, and when train adopts new maps)."""
        buckets, inverse = hashing.tables(self.offsets.device)
        self.register_buffer("buckets", buckets, persistent=False)  # (m, N)
        self.register_buffer("first", inverse[0], persistent=False)  # (nb, width) ids of map 0's buckets

    def ids(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) element-major -> (B, T / m) id of each element, -1 for special elements."""
        b, t = tokens.shape
        tok = tokens.view(b, t // self.m, self.m)  # (B, n, m)
        special = tok[..., 0] < self.n_special
        local = (tok - self.offsets).clamp(min=0)  # (B, n, m) bucket under each map
        cand = self.first[local[..., 0].clamp(max=len(self.first) - 1)]  # (B, n, w) ids, -1 padded
        ok = cand >= 0
        safe = cand.clamp(min=0)
        for j in range(1, self.m):
            ok &= self.buckets[j][safe] == local[..., j:j + 1]
        found = ok.any(-1)
        ids = torch.where(found, safe.gather(-1, ok.float().argmax(-1, keepdim=True)).squeeze(-1), -1)
        return torch.where(special, -1, ids)  # (B, n)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        ids = self.ids(tokens)  # (B, n)
        x = self.embed(ids.clamp(min=0)) * (ids >= 0).unsqueeze(-1)  # (B, n, d); zeros for specials
        return x.repeat_interleave(self.m, dim=1)  # (B, n*m, d): every token of an element
