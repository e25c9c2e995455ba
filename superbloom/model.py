"""The set Transformer encoder (Superbloom sec. 2.1-2.2, appendix A).

Tokens -> embeddings (no position embeddings: the input is a *set*; learned positions are an
opt-in for ordered data) -> L blocks of multi-head attention and a ReLU feed-forward network, each
with a residual connection and layer normalisation -> hidden states (B, T, d).

Padding is masked in attention with -inf (PyTorch's scaled_dot_product_attention with a boolean
mask), so padded tokens get exactly zero attention weight and cannot change any real output
(the blog's "properly handle padded input"; tested in tests/test_model.py).

`SetModel` bundles the encoder with an output head (heads.py) that shares its token embedding.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .hashing import BloomHash
from .heads import HeadConfig, build_head


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int  # token vocabulary (BloomHash.vocab_size)
    m: int = 2  # tokens per element
    d: int = 128
    heads: int = 4
    d_ff: int = 512
    layers: int = 4
    dropout: float = 0.0  # short CPU budgets underfit; attention dropout alone costs ~2.5x in attention
    positions: int = 0  # > 0: learned position embeddings for up to this many elements
    norm_first: bool = True  # pre-LN blocks (stabler at high learning rates); False: paper's post-LN

    def __post_init__(self):
        if self.d % self.heads:
            raise ValueError(f"d={self.d} must be divisible by heads={self.heads}")


class Attention(nn.Module):
    def __init__(self, d: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)  # (B, h, T, dh)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep,  # keep: (B, 1, 1, T), False -> -inf
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.norm_first = cfg.norm_first
        self.attn = Attention(cfg.d, cfg.heads, cfg.dropout)
        self.ff = nn.Sequential(nn.Linear(cfg.d, cfg.d_ff), nn.ReLU(), nn.Linear(cfg.d_ff, cfg.d))
        self.norm1, self.norm2 = nn.LayerNorm(cfg.d), nn.LayerNorm(cfg.d)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        if self.norm_first:
            x = x + self.drop(self.attn(self.norm1(x), keep))
            return x + self.drop(self.ff(self.norm2(x)))
        x = self.norm1(x + self.drop(self.attn(x, keep)))
        return self.norm2(x + self.drop(self.ff(x)))


class SetEncoder(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d)
        self.pos = nn.Embedding(cfg.positions, cfg.d) if cfg.positions else None
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.LayerNorm(cfg.d) if cfg.norm_first else nn.Identity()
        self.drop = nn.Dropout(cfg.dropout)
        self.apply(_init)

    def forward(self, tokens: torch.Tensor, pad: torch.Tensor, positions: torch.Tensor | None = None):
        """tokens, pad, positions: (B, T) -> hidden (B, T, d)."""
        x = self.embed(tokens)  # (B, T, d)
        if self.pos is not None:
            if positions is None:
                raise ValueError("this model uses position embeddings; pass positions")
            x = x + self.pos(positions.clamp(max=self.cfg.positions - 1))
        x = self.drop(x)
        keep = ~pad[:, None, None, :]  # (B, 1, 1, T)
        for block in self.blocks:
            x = block(x, keep)
        return self.norm(x)


def _init(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class SetModel(nn.Module):
    """Encoder + output head. `forward` returns the hidden states of the target elements."""

    def __init__(self, encoder: SetEncoder, head: nn.Module):
        super().__init__()
        self.encoder, self.head = encoder, head

    def target_hidden(self, batch) -> torch.Tensor:
        """-> (M, m, d): the m output vectors of every element with a target (targets >= 0)."""
        h = self.encoder(batch.tokens, batch.pad, batch.positions if self.encoder.pos is not None else None)
        b, n = batch.targets.shape
        h = h.view(b, n, self.encoder.cfg.m, -1)  # (B, n, m, d)
        return h[batch.targets >= 0]

    def forward(self, batch) -> torch.Tensor:
        """Mean loss over target elements (summed over their m hashes).

        Without position embeddings every element fed as [MASK] in an example has the same input
        and hence the same output vectors (DESIGN.md, "note on sets"), so the head scores one of
        them per example and all their targets share that row (`rows`): with a high mask rate this
        removes most of the output-layer work. The loss is unchanged, except that with dropout the
        shared row carries one dropout sample instead of several.
        """
        cfg = self.encoder.cfg
        h = self.encoder(batch.tokens, batch.pad, batch.positions if self.encoder.pos is not None else None)
        b, n = batch.targets.shape
        h = h.view(b, n, cfg.m, -1)  # (B, n, m, d)
        tgt = batch.targets >= 0
        if self.encoder.pos is not None:  # positions make [MASK] elements differ: no sharing
            return self.head.loss(h[tgt], batch.targets[tgt])
        shared = batch.fed_mask & tgt  # (B, n) [MASK]-fed targets
        own = tgt & ~shared  # targets fed as a random id or unchanged
        has = shared.any(1)  # (B,)
        first = shared.float().argmax(1)  # (B,) a representative [MASK] element per example
        ex = has.nonzero().squeeze(1)
        hidden = torch.cat([h[ex, first[ex]], h[own]])  # (R + O, m, d)
        rep_row = torch.cumsum(has.long(), 0) - 1  # (B,) row of each example's representative
        rows = torch.cat([rep_row[shared.nonzero()[:, 0]], len(ex) + torch.arange(int(own.sum()))])
        targets = torch.cat([batch.targets[shared], batch.targets[own]])
        return self.head.loss(hidden, targets, rows)


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def build_model(model_cfg: ModelConfig, head_cfg: HeadConfig, hashing: BloomHash, counts=None) -> SetModel:
    """Encoder + the configured head, sharing the token embedding."""
    encoder = SetEncoder(model_cfg)
    return SetModel(encoder, build_head(head_cfg, encoder.embed, hashing, counts))
