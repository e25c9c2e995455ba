"""The set Transformer encoder (Superbloom sec. 2.1-2.2, appendix A).

Tokens -> embeddings (no position embeddings: the input is a *set*; learned positions are an
opt-in for ordered data) -> L blocks of multi-head attention and a ReLU feed-forward network, each
with a residual connection and layer normalisation -> hidden states (B, T, d).

`ModelConfig.causal` (next-item models, sequence.py) additionally masks every later element, so
element i sees elements <= i only (causal_keep; tested in tests/test_sequence_train.py).

Padding is masked in attention with -inf (PyTorch's scaled_dot_product_attention with a boolean
mask), so padded tokens get exactly zero attention weight and cannot change any real output
(the blog's "properly handle padded input"; tested in tests/test_model.py).

`SetModel` bundles the encoder with an output head (heads/) that shares its token embedding.
`build_model(cfg, head_cfg, hashing)` derives every size the hash maps know (the token vocabulary,
m tokens per element) from the hashing: ModelConfig holds only the architecture.
"""
from __future__ import annotations


import torch
import torch.nn as nn
import torch.nn.functional as F

from .embeddings import DynamicIdInput, build_embedding
from ..hashing.bloom import BloomHash
from ..heads import HeadConfig, build_head
from ..heads.base import HeadBase
from .attention import ATTENTIONS
from .config import ModelConfig  # noqa: F401 (re-exported: callers import it here)


class Attention(nn.Module):
    """Multi-head attention over a padded set: softmax (PyTorch's fused kernel), or the blog's
    kernelized attention (kernel_attention.py; padding masked exactly the same way)."""

    def __init__(self, d: int, heads: int, dropout: float, kind: str = "softmax"):
        super().__init__()
        self.heads, self.dropout, self.kind = heads, dropout, kind
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)  # (B, h, T, dh)
        if self.kind == "softmax":
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep,  # keep: (B, 1, 1, T), False -> -inf
                                               dropout_p=self.dropout if self.training else 0.0)
        else:
            y = ATTENTIONS[self.kind](q, k, v, keep)  # (B, h, T, dh)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.norm_first = cfg.norm_first
        self.attn = Attention(cfg.d, cfg.heads, cfg.attn_dropout, cfg.attention)
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
    """Elements of m tokens each -> hidden states. `embed` maps tokens (B, T) -> (B, T, d)."""

    def __init__(self, cfg: ModelConfig, embed: nn.Module, m: int, dynamic: nn.Module | None = None):
        super().__init__()
        if cfg.dynamic and dynamic is None:
            raise ValueError("ModelConfig.dynamic needs the dynamic input module (build_model(..., vocab=strings))")
        self.cfg, self.m = cfg, m
        self.embed = embed
        self.pos = nn.Embedding(cfg.positions, cfg.d) if cfg.positions else None
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.LayerNorm(cfg.d) if cfg.norm_first else nn.Identity()
        self.drop = nn.Dropout(cfg.dropout)
        self.apply(_init)
        self.dynamic = dynamic  # after _init: DynamicIdInput sets its own scale

    def forward(self, tokens: torch.Tensor, pad: torch.Tensor, positions: torch.Tensor | None = None,
                mult: torch.Tensor | None = None):
        """tokens, pad, positions: (B, T) -> hidden (B, T, d).

        mult (B, T / m): element multiplicities (batches.merge_masks); an element standing for c
        identical ones gets a log(c) attention bias, which is exactly what c copies would get."""
        x = self.embed(tokens)  # (B, T, d)
        if self.dynamic is not None:
            x = x + self.dynamic(tokens)  # (B, T, d): the id strings' dynamic embeddings (zeros at specials)
        if self.pos is not None:
            if positions is None:
                raise ValueError("this model uses position embeddings; pass positions")
            x = x + self.pos(positions.clamp(max=self.cfg.positions - 1))
        x = self.drop(x)
        keep = ~pad[:, None, None, :]  # (B, 1, 1, T) bool: False -> -inf
        if mult is not None and bool((mult > 1).any()):
            bias = torch.log(mult.to(x.dtype)).repeat_interleave(self.m, dim=1)  # (B, T), log 0 = -inf
            keep = bias[:, None, None, :]  # (B, 1, 1, T) additive
        if self.cfg.causal:
            keep = causal_keep(keep, self.m)  # (B, 1, T, T)
        for block in self.blocks:
            x = block(x, keep)
        return self.norm(x)


def causal_keep(keep: torch.Tensor, m: int) -> torch.Tensor:
    """A padding mask (B, 1, 1, T) (bool: False -> -inf, or additive) restricted to earlier elements:
    token t (of element t // m) sees token s only if s // m <= t // m (the m tokens of one element see
    each other). -> (B, 1, T, T). With left-aligned sequences every real token sees itself, so no
    real row is all -inf."""
    t = keep.shape[-1]
    elem = torch.arange(t, device=keep.device) // m
    later = elem[None, :] > elem[:, None]  # (T, T) True where the key is a later element
    if keep.dtype == torch.bool:
        return keep & ~later
    return keep.masked_fill(later, float("-inf"))


def _init(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class SetModel(nn.Module):
    """Encoder + output head. `forward` returns the hidden states of the target elements."""

    def __init__(self, encoder: SetEncoder, head: HeadBase):
        super().__init__()
        self.encoder, self.head = encoder, head

    def element_hidden(self, batch) -> torch.Tensor:
        """-> (B * n, m, d): the m output vectors of every element of the batch."""
        h = self.encoder(batch.tokens, batch.pad, batch.positions if self.encoder.pos is not None else None,
                         batch.mult)  # (B, n*m, d)
        return h.view(-1, self.encoder.m, h.shape[-1])

    def target_hidden(self, batch) -> torch.Tensor:
        """-> (M, m, d): the output vectors of each target's element (queries: one per row)."""
        return self.element_hidden(batch)[batch.target_elem]

    def forward(self, batch) -> torch.Tensor:
        """Mean loss over the targets (summed over their m hashes). Targets that share an element
        (merged [MASK]s, batches.py) share its hidden row: the head scores each element once."""
        elements, rows = torch.unique(batch.target_elem, return_inverse=True)
        hidden = self.element_hidden(batch)[elements]
        return self.head.loss(hidden, batch.target_ids, rows)


def rehash(model: nn.Module, hashing: BloomHash, new: BloomHash) -> None:
    """`model`, built on `hashing`, reads `new`'s maps from now on (BloomHash.adopt; every module that
    copied the tables rebuilds them: the dynamic input's and the head's hashing_changed). The weights are kept."""
    hashing.adopt(new)
    if model.encoder.dynamic is not None:
        model.encoder.dynamic.hashing_changed(hashing)
    model.head.hashing_changed(hashing)


def count_parameters(module: nn.Module) -> int:
    """Trained parameters plus the fixed weights a module keeps as buffers (the hybrid head's
    item-item values: fitted in closed form, not by the optimizer, but weights of the model all the same)."""
    return (sum(p.numel() for p in module.parameters())
            + sum(m.fixed_weights() for m in module.modules() if isinstance(m, HeadBase)))


def build_model(model_cfg: ModelConfig, head_cfg: HeadConfig, hashing: BloomHash, counts=None,
                vocab=None) -> SetModel:
    """Encoder + the configured head, sharing the token embedding; sizes come from `hashing`.
    `vocab` (the id strings, (N,)) is needed by a model with the dynamic input (model_cfg.dynamic)."""
    if model_cfg.dynamic and vocab is None:
        raise ValueError("this model has the dynamic input embedding (model.dynamic): build it with the id "
                         "strings, build_model(..., vocab=Vocab.strings)")
    dynamic = DynamicIdInput(hashing, vocab, model_cfg.d) if model_cfg.dynamic else None
    encoder = SetEncoder(model_cfg, build_embedding(model_cfg.embedding, hashing, model_cfg.d), hashing.m, dynamic)
    return SetModel(encoder, build_head(head_cfg, encoder.embed, hashing, counts))
