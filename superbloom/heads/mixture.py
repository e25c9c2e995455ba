"""The mixture-of-softmaxes head: K full softmaxes over the ids, mixed (Yang et al. 2018).

A full head's log-probabilities over N ids for M contexts form a matrix of rank <= d + 1 (v W^T + b):
the softmax bottleneck. An item-item model such as EASE has an N x N weight matrix of full rank. This
head keeps the full head's output rows W and bias b, and mixes K softmaxes of K projections of v:

    p(j | v) = sum_k pi_k(v) softmax(h_k W^T + b)_j,   h_k = v + tanh(v P_k + c_k),   pi(v) = softmax(v Q + e)

so log p is no longer a rank-(d + 1) matrix. P, c, Q and e start at zero but for a small noise in P,
so a new head is the full head (every h_k = v): a first try with h_k = tanh(v P_k) lost the start the
token embedding gets from the co-occurrence factors, and trained to a higher loss than the full head
(Wikispeedia val, 2,000 steps). Costs K times the full head's scoring (training and top-k); loss and
top-k are the full head's, on these log-probabilities (exact: every id scored).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..hashing.bloom import BloomHash
from .config import MixtureConfig  # noqa: F401 (re-exported)
from .full import FullHead


class MixtureHead(FullHead):
    """K softmaxes over the full head's output rows, mixed by a learned prior (module docstring)."""

    fused_loss = False  # the loss is the mixture's, not one softmax's

    def __init__(self, embedding: nn.Embedding, hashing: BloomHash, cfg: MixtureConfig, counts=None):
        super().__init__(embedding, hashing, cfg, counts)
        d, k = embedding.embedding_dim, cfg.components
        self.components = self.score_blocks = k  # K (M, N) softmaxes at once
        self.project = nn.Linear(d, k * d)  # P_k, c_k of every component at once
        self.prior = nn.Linear(d, k)  # Q, e
        with torch.no_grad():  # start as the full head: h_k = v (+ noise, so the components can part), pi uniform
            self.project.weight.normal_(0.0, 0.01)
            self.project.bias.zero_()
            self.prior.weight.zero_()
            self.prior.bias.zero_()

    def log_probs(self, v: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
        """(M, d) -> (M, N) log p(j | v), normalised over the N ids; w: self.rows(), if at hand."""
        m, d = v.shape
        h = v[:, None, :] + torch.tanh(self.project(v)).view(m, self.components, d)  # (M, K, d)
        log_pi = F.log_softmax(self.prior(v), -1)  # (M, K)
        logp = F.log_softmax(torch.matmul(h, (self.rows() if w is None else w).T) + self.bias, -1)  # (M, K, N)
        return torch.logsumexp(logp + log_pi[:, :, None], 1)
