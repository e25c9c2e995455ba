"""Output heads: one interface, several implementations, one factory.

Every head maps the m output vectors of an element, hidden (M, m, d), to
  loss(hidden, targets, rows=None)         mean over the M targets of -log p(target | hidden[rows[i]])
                                           (for the hashed head: summed over the m hashes); rows
                                           lets several targets share one hidden row (default: own)
  topk(hidden, k, exclude=None, decode=DecodeConfig())  -> decode.Ranking of ids, best first

`superbloom` is the hashed softmax of the paper (sec. 2.3-2.5): the output embedding is the input
token embedding (tied, sec. 3.2), m distributions over hash buckets, ids recovered by Algorithm 1.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .decode import DecodeConfig, Ranking, decode_topk
from .hashing import BloomHash


@dataclass(frozen=True)
class HeadConfig:
    name: str = "superbloom"
    per_hash_softmax: bool = False  # superbloom: softmax j over map j's token range only
    label_smoothing: float = 0.0


class SuperbloomHead(nn.Module):
    """Hashed softmax tied to the token embedding: p_j = softmax(y_j E^T + b)."""

    def __init__(self, embedding: nn.Embedding, hashing: BloomHash, cfg: HeadConfig):
        super().__init__()
        self.embedding = embedding  # shared with the encoder (saved once by safetensors)
        self.cfg = cfg
        self.m, self.n_buckets = hashing.m, hashing.n_buckets
        self.bias = nn.Parameter(torch.zeros(hashing.vocab_size))
        buckets, inverse = hashing.tables()
        self.register_buffer("buckets", buckets, persistent=False)  # (m, N)
        self.register_buffer("inverse", inverse, persistent=False)  # (m, nb, alpha)
        self.offsets = [int(o) for o in hashing.offsets]

    def _map_logits(self, hidden: torch.Tensor, j: int) -> torch.Tensor:
        """(M, d) -> (M, nb): logits of map j's tokens only."""
        lo, hi = self.offsets[j], self.offsets[j] + self.n_buckets
        return hidden @ self.embedding.weight[lo:hi].T + self.bias[lo:hi]

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """(M, m, d) -> (M, m, nb): log p_j over the buckets of map j."""
        if self.cfg.per_hash_softmax:
            return torch.stack([F.log_softmax(self._map_logits(hidden[:, j], j), -1) for j in range(self.m)], 1)
        lp = F.log_softmax(hidden @ self.embedding.weight.T + self.bias, dim=-1)  # (M, m, V)
        return torch.stack([lp[:, j, o:o + self.n_buckets] for j, o in enumerate(self.offsets)], 1)

    def loss(self, hidden: torch.Tensor, targets: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """hidden (U, m, d), targets (M,), rows (M,) index into hidden (default: arange(M))."""
        if rows is None:
            rows = torch.arange(len(targets), device=targets.device)
        local = self.buckets[:, targets].T  # (M, m) bucket of each target under each map
        if self.cfg.per_hash_softmax:
            logp = self.log_probs(hidden)  # (U, m, nb)
            tok = local
        else:
            logp = F.log_softmax(hidden @ self.embedding.weight.T + self.bias, dim=-1)  # (U, m, V)
            tok = local + torch.tensor(self.offsets, device=local.device)  # global token ids
        j = torch.arange(self.m, device=targets.device)
        nll = -logp[rows[:, None], j[None, :], tok]  # (M, m)
        ls = self.cfg.label_smoothing
        if ls:  # uniform part of the smoothed target, over the classes of each softmax
            nll = (1 - ls) * nll - ls * logp.mean(-1)[rows]
        return nll.sum(1).mean()

    def topk(self, hidden, k: int, exclude=None, decode: DecodeConfig = DecodeConfig()) -> Ranking:
        return decode_topk(self.log_probs(hidden), self.buckets, self.inverse, k, exclude, decode)


HEADS = {"superbloom": SuperbloomHead}


def build_head(cfg: HeadConfig, embedding: nn.Embedding, hashing: BloomHash, counts=None) -> nn.Module:
    """The head named cfg.name. `counts` (training id counts) is for heads that need them."""
    if cfg.name not in HEADS:
        raise ValueError(f"unknown head {cfg.name!r}; choose from {sorted(HEADS)}")
    return HEADS[cfg.name](embedding, hashing, cfg)
