"""The superbloom head: the hashed softmax of the paper (Superbloom sec. 2.3-2.5).

The output embedding is the input token embedding (tied, sec. 3.2): p_j = softmax(y_j E^T + b) for
each of the m output vectors y_j of an element, over the whole hashed vocabulary (or, with
per_hash_softmax, over map j's own token range). The loss sums the m cross-entropies against the
target's m tokens; ids are recovered by Algorithm 1 (decode.py: approximate, or exact with a
certificate).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .beam import DecodeConfig, decode_topk
from ..hashing.bloom import BloomHash
from .losses import smoothed_nll
from .ranking import Ranking
from .base import HeadBase
from .config import SuperbloomConfig  # noqa: F401 (re-exported: callers import it here)


class SuperbloomHead(HeadBase):
    """Hashed softmax tied to the token embedding: p_j = softmax(y_j E^T + b)."""

    def __init__(self, embedding: nn.Embedding, hashing: BloomHash, cfg: SuperbloomConfig, counts=None):
        super().__init__()
        self.embedding = embedding  # shared with the encoder (saved once by safetensors)
        self.cfg = cfg
        self.m, self.n_buckets = hashing.m, hashing.n_buckets
        self.bias = nn.Parameter(torch.zeros(hashing.n_tokens))
        # int32 views of the hashing's arrays (shared across processes when loaded mapped; decode.py
        # widens what it gathers from them): 2 x (m x N) x 4 bytes, not two int64 copies
        buckets, inverse = hashing.tables(dtype=torch.int32)
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

    def export_scores(self, hidden: torch.Tensor) -> torch.Tensor:
        """(M, m, d) -> (M, m, nb): the per-map log-probabilities Algorithm 1 decodes (beam.decode_topk)."""
        return self.log_probs(hidden)

    def loss(self, hidden: torch.Tensor, targets: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """hidden (U, m, d), targets (M,), rows (M,) index into hidden (default: arange(M))."""
        if rows is None:
            rows = torch.arange(len(targets), device=targets.device)
        local = self.buckets[:, targets].T.long()  # (M, m) bucket of each target under each map
        if self.cfg.per_hash_softmax:
            logp = self.log_probs(hidden)  # (U, m, nb)
            tok = local
        else:
            logp = F.log_softmax(hidden @ self.embedding.weight.T + self.bias, dim=-1)  # (U, m, V)
            tok = local + torch.tensor(self.offsets, device=local.device)  # global token ids
        j = torch.arange(self.m, device=targets.device)
        nll = -logp[rows[:, None], j[None, :], tok]  # (M, m)
        ls = self.cfg.label_smoothing
        if ls:
            nll = smoothed_nll(nll, logp.mean(-1)[rows], ls)
        return nll.sum(1).mean()

    def topk(self, hidden, k: int, exclude=None, decode: DecodeConfig = DecodeConfig(), context=None) -> Ranking:
        return decode_topk(self.log_probs(hidden), self.buckets, self.inverse, k, exclude, decode)

    def topk_allowed(self, hidden, k: int, allow, exclude=None, decode: DecodeConfig = DecodeConfig(),
                     context=None) -> Ranking:
        """Algorithm 1 with only the allowed ids as candidates (beam.py: the bound is unchanged)."""
        return decode_topk(self.log_probs(hidden), self.buckets, self.inverse, k, exclude, decode, allow)
