"""AttentionPool: one vector per set from the encoder's hidden states.

The blog ("Simple Unsupervised Learning of Contextualized Bag-of-Word Representations") pools a
set with "attention with a learnable token": one learned query attends over the set's hidden
states, so the pooled vector is a weighted mean the model can focus (a mean would give every
token, common or not, the same say). Multi-head: each head has its own slice of the query and
reads its own subspace of keys and values. Padded tokens are masked with -inf exactly like the
encoder's attention (model.py; the blog's "Self-Attention: Properly Handle Padded Input"), so
appending padding, whatever its token content, cannot change the vector. The output is
L2-normalised: dot products of two set vectors are cosines (alignment/uniformity, NCA and kNN
all work on the unit sphere).

A fully padded row has no element to attend to (softmax over nothing); it is an error, named by
its row, not a silent NaN or zero vector.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class AttentionPool(nn.Module):
    def __init__(self, d: int, heads: int = 1):
        super().__init__()
        if d % heads:
            raise ValueError(f"d={d} must be divisible by heads={heads}")
        self.heads = heads
        self.query = nn.Parameter(torch.randn(d) * 0.02)  # (d,) the learned token
        self.kv = nn.Linear(d, 2 * d)
        self.out = nn.Linear(d, d)

    def forward(self, hidden: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        """hidden (B, T, d), pad (B, T) bool (True = padding) -> (B, d) unit vectors."""
        b, t, d = hidden.shape
        if pad.shape != (b, t):
            raise ValueError(f"pad must be (B, T) = {(b, t)}, got {tuple(pad.shape)}")
        empty = pad.all(dim=1)  # (B,)
        if bool(empty.any()):
            rows = torch.nonzero(empty).flatten()[:10].tolist()
            raise ValueError(f"AttentionPool: rows {rows} are fully padded; a set needs at least one element")
        dh = d // self.heads
        k, v = self.kv(hidden).view(b, t, 2, self.heads, dh).permute(2, 0, 3, 1, 4)  # (B, h, T, dh) each
        q = self.query.view(1, self.heads, 1, dh).expand(b, -1, -1, -1)  # (B, h, 1, dh)
        keep = ~pad[:, None, None, :]  # (B, 1, 1, T) bool: False -> -inf
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)  # (B, h, 1, dh)
        return F.normalize(self.out(y.reshape(b, d)), dim=1)  # (B, d)
