"""Sampled softmax (Bengio & Senecal 2003, 2008; Jean et al. 2015): the training loss of the
paper's `sampled-softmax` baseline (Superbloom sec. 3.3, Table 1: 128K samples of 5.3M ids).

Each training step draws S ids with replacement from a proposal Q, shared by the whole batch, and
replaces the full softmax normaliser sum_s exp(o_s) by

    exp(o_t) + sum_{s in U, s != t} exp(o_s - log pi_s)

where U is the set of distinct ids drawn, pi_s = 1 - (1 - Q_s)^S is the probability that s is
drawn at least once (~ S * Q_s for rare ids: the log-Q correction), and s = t is dropped
("accidental hits": the target must not count as its own negative). Since P(s in U) = pi_s, the
sum over U is an unbiased (Horvitz-Thompson) estimate of the sum over every other id; as S grows
every pi_s -> 1 and U -> all ids, so the loss tends to the full-softmax loss (tests/test_heads.py).
Evaluation uses the full softmax (`SampledHead` below: the full head's output layer, trained this way).

Proposals:
  uniform      Q_s = 1 / N
  unigram      Q_s proportional to the training count + 1 (+1: every id can be drawn)
  log_uniform  Zipf over the id, ids being numbered by decreasing frequency (vocab.py):
               Q_s = log((s + 2) / (s + 1)) / log(N + 1), the usual default of sampled softmax
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from ..hashing.bloom import BloomHash
from .full import FullHead, target_rows
from .rows import gather_rows
from .config import PROPOSALS, SampledConfig  # noqa: F401 (re-exported: callers import them here)


def proposal_probs(kind: str, n: int, counts=None) -> np.ndarray:
    """Q over ids 0..n-1 as float64 (n,)."""
    if kind == "uniform":
        return np.full(n, 1.0 / n)
    if kind == "log_uniform":
        s = np.arange(n, dtype=np.float64)
        return np.log1p(1.0 / (s + 1)) / np.log(n + 1.0)
    if kind == "unigram":
        if counts is None:
            raise ValueError("the unigram proposal is built from training counts, and none were given; "
                             "pass counts or use proposal='log_uniform'")
        if len(counts) != n:
            raise ValueError(f"{len(counts)} counts for {n} ids")
        w = np.asarray(counts, dtype=np.float64) + 1.0
        return w / w.sum()
    raise ValueError(f"proposal must be one of {PROPOSALS}, got {kind!r}")


class Proposal(nn.Module):
    """Draws ids from Q (inverse CDF, O(S log N) per draw) and gives log pi_s. Buffers only."""

    def __init__(self, kind: str, n: int, counts=None):
        super().__init__()
        q = torch.from_numpy(proposal_probs(kind, n, counts))
        self.kind, self.n = kind, n
        self.register_buffer("q", q, persistent=False)  # (N,) float64
        self.register_buffer("cdf", torch.cumsum(q, 0), persistent=False)  # (N,) float64

    def sample(self, s: int) -> torch.Tensor:
        """S draws with replacement -> (S,) int64 ids."""
        dev = self.q.device
        if self.kind == "uniform":
            return torch.randint(0, self.n, (s,), device=dev)
        u = torch.rand(s, dtype=torch.float64, device=dev) * self.cdf[-1]
        return torch.searchsorted(self.cdf, u, right=True).clamp(max=self.n - 1)

    def log_inclusion(self, ids: torch.Tensor, s: int) -> torch.Tensor:
        """log pi for ids (U,): log P(id drawn at least once in S draws) -> (U,) float64."""
        return torch.log(-torch.expm1(s * torch.log1p(-self.q[ids])))


def sampled_softmax_loss(v: torch.Tensor, w_true: torch.Tensor, b_true: torch.Tensor, targets: torch.Tensor,
                         w_neg: torch.Tensor, b_neg: torch.Tensor, neg_ids: torch.Tensor,
                         neg_log_pi: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
    """Mean sampled-softmax loss (module docstring).

    v (M, d) output vectors; w_true (M, d), b_true (M,) output embedding and bias of the targets
    (M,); w_neg (U, d), b_neg (U,) those of the distinct drawn ids neg_ids (U,); neg_log_pi (U,).
    With rows (M,): v holds one vector per element (E, d), target i reads v[rows[i]] (targets that
    share an element, merged [MASK]s: the negatives' logits are computed once per element)."""
    neg = torch.addmm(b_neg - neg_log_pi.to(v.dtype), v, w_neg.T)  # (M or E, U) corrected logits
    if rows is not None:
        v, neg = v[rows], neg[rows]  # (M, d), (M, U)
    true = (v * w_true).sum(-1) + b_true  # (M,)
    neg = neg.masked_fill(neg_ids[None, :] == targets[:, None], float("-inf"))  # accidental hits
    return (torch.logsumexp(torch.cat([true[:, None], neg], 1), 1) - true).mean()


class SampledHead(FullHead):
    """The full head's output layer trained with sampled softmax. In eval mode the loss, and always
    the top-k, use the full softmax (FullHead's)."""

    def __init__(self, embedding: nn.Embedding, hashing: BloomHash, cfg: SampledConfig, counts=None):
        nn.Module.__init__(self)
        self.cfg = cfg
        self._init_rows(embedding, hashing)
        self.proposal = Proposal(cfg.proposal, hashing.n_ids, counts)

    def loss(self, hidden: torch.Tensor, targets: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        if not self.training:
            return super().loss(hidden, targets, rows)
        return head_sampled_loss(self, self.proposal, self.cfg.samples, hidden, targets, rows)


def head_sampled_loss(head: FullHead, proposal: Proposal, s: int, hidden: torch.Tensor, targets: torch.Tensor,
                      rows: torch.Tensor | None = None) -> torch.Tensor:
    """Sampled softmax over a full head's output rows (`head.rows`, `head.bias`): `s` ids drawn from
    `proposal` once for the whole batch, the log-Q correction applied."""
    neg = torch.unique(proposal.sample(s))  # (S',) distinct drawn ids
    bias = lambda ids: gather_rows(head.bias, ids, head.sparse_rows)  # noqa: E731 (row-sparse gradient: rows.py)
    return sampled_softmax_loss(hidden.mean(1), head.rows(targets), bias(targets), targets, head.rows(neg), bias(neg),
                                neg, proposal.log_inclusion(neg, s), target_rows(rows, targets))
