"""The superbloom head: the hashed softmax of the paper (Superbloom sec. 2.3-2.5).

The output embedding is the input token embedding (tied, sec. 3.2): p_j = softmax(y_j E^T + b) for
each of the m output vectors y_j of an element, over the whole hashed vocabulary (or, with
per_hash_softmax, over map j's own token range). The loss sums the m cross-entropies against the
target's m tokens; ids are recovered by Algorithm 1 (decode.py: approximate, or exact with a
certificate). Trained without label smoothing the full softmax goes through full.fused_softmax_nll
(one (U m, V) logits buffer, the gradient written into it; the same loss and gradients).

With `samples` > 0 the training loss is a sampled softmax over the hashed tokens instead (sampled.py's,
log-Q corrected, accidental hits dropped): `samples` tokens drawn once per step for the whole batch
from the `proposal` over the m x n_buckets hashed tokens (uniform, or unigram: each token's share of
the training counts of the ids in its bucket, + 1), against which each of the m output vectors of
an element scores its target's token. A step then reads only the rows of the batch's tokens and
the drawn ones, so with row-sparse gradients on (rows.py) its cost follows the batch, not the
table; the validation and the top-k use the full softmax.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import numpy as np

from .beam import DecodeConfig, decode_topk
from ..hashing.bloom import BloomHash
from .full import fused_softmax_nll
from .losses import smoothed_nll
from .ranking import Ranking
from .rows import declare_rows, gather_rows
from .sampled import Proposal
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
        self.offsets = [int(o) for o in hashing.offsets]
        self.n_special = hashing.n_special_tokens
        declare_rows(self, ("bias",))  # the embedding is the encoder's (declared there)
        self._counts = counts
        self.hashing_changed(hashing)

    def hashing_changed(self, hashing: BloomHash) -> None:
        """The tables and the token proposal from `hashing` (at build, and when train adopts new maps)."""
        device = self.bias.device
        # int32 views of the hashing's arrays (shared across processes when loaded mapped; decode.py
        # widens what it gathers from them): 2 x (m x N) x 4 bytes, not two int64 copies
        buckets, inverse = hashing.tables(dtype=torch.int32)
        self.register_buffer("buckets", buckets.to(device), persistent=False)  # (m, N)
        self.register_buffer("inverse", inverse.to(device), persistent=False)  # (m, nb, alpha)
        self.proposal = None
        if self.cfg.samples:  # over the m x n_buckets hashed tokens, token t + n_special globally
            self.proposal = Proposal(self.cfg.proposal, hashing.m * hashing.n_buckets,
                                     token_counts(hashing, self._counts) if self.cfg.proposal == "unigram" else None).to(device)

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
        j = torch.arange(self.m, device=targets.device)
        if self.proposal is not None and self.training:
            return self._sampled_loss(hidden, local + torch.tensor(self.offsets, device=local.device), rows)
        if not self.cfg.per_hash_softmax and not self.cfg.label_smoothing:
            tok = local + torch.tensor(self.offsets, device=local.device)  # (M, m) global token ids
            flat = (rows[:, None] * self.m + j[None, :]).reshape(-1)  # (M m,) row of hidden.view(U m, d)
            return fused_softmax_nll(hidden.reshape(-1, hidden.shape[-1]), self.embedding.weight, self.bias,
                                     tok.reshape(-1), flat, len(targets))
        if self.cfg.per_hash_softmax:
            logp = self.log_probs(hidden)  # (U, m, nb)
            tok = local
        else:
            logp = F.log_softmax(hidden @ self.embedding.weight.T + self.bias, dim=-1)  # (U, m, V)
            tok = local + torch.tensor(self.offsets, device=local.device)  # global token ids
        nll = -logp[rows[:, None], j[None, :], tok]  # (M, m)
        ls = self.cfg.label_smoothing
        if ls:
            nll = smoothed_nll(nll, logp.mean(-1)[rows], ls)
        return nll.sum(1).mean()

    def _sampled_loss(self, hidden: torch.Tensor, tok: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """The sampled softmax over hashed tokens (module docstring): hidden (U, m, d), tok (M, m) the
        targets' global tokens, rows (M,) -> the mean over targets of the sum over the m maps."""
        s, sparse = self.cfg.samples, self.sparse_rows
        drawn = torch.unique(self.proposal.sample(s))  # (S',) distinct drawn hashed tokens
        neg = drawn + self.n_special  # (S',) their global token ids
        u, m, d = hidden.shape
        w_neg, b_neg = gather_rows(self.embedding.weight, neg, sparse), gather_rows(self.bias, neg, sparse)
        log_pi = self.proposal.log_inclusion(drawn, s).to(hidden.dtype)  # (S',)
        neg_logits = torch.addmm(b_neg - log_pi, hidden.reshape(-1, d), w_neg.T).view(u, m, -1)[rows]  # (M, m, S')
        neg_logits = neg_logits.masked_fill(neg[None, None, :] == tok[..., None], float("-inf"))  # accidental hits
        true = (hidden[rows] * gather_rows(self.embedding.weight, tok, sparse)).sum(-1) + gather_rows(
            self.bias, tok, sparse)  # (M, m)
        nll = torch.logsumexp(torch.cat([true[..., None], neg_logits], -1), -1) - true  # (M, m)
        return nll.sum(1).mean()

    def topk(self, hidden, k: int, exclude=None, decode: DecodeConfig = DecodeConfig(), context=None) -> Ranking:
        return decode_topk(self.log_probs(hidden), self.buckets, self.inverse, k, exclude, decode)

    def topk_allowed(self, hidden, k: int, allow, exclude=None, decode: DecodeConfig = DecodeConfig(),
                     context=None) -> Ranking:
        """Algorithm 1 with only the allowed ids as candidates (beam.py: the bound is unchanged)."""
        return decode_topk(self.log_probs(hidden), self.buckets, self.inverse, k, exclude, decode, allow)


def token_counts(hashing: BloomHash, counts) -> np.ndarray:
    """(m x n_buckets,) float64: the training count of each hashed token (the sum over the ids of its
    bucket), map after map, for the unigram token proposal."""
    if counts is None:
        raise ValueError("the unigram token proposal is built from training counts, and none were given; "
                         "pass counts or use proposal='uniform'")
    counts = np.asarray(counts, dtype=np.float64)
    if len(counts) != hashing.n_ids:
        raise ValueError(f"{len(counts)} counts for {hashing.n_ids} ids")
    buckets = hashing.tables()[0].numpy()  # (m, N)
    return np.concatenate([np.bincount(buckets[j], weights=counts, minlength=hashing.n_buckets)
                           for j in range(hashing.m)])
