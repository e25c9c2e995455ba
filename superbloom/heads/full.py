"""The full softmax head: one output embedding row per id (the paper's `baseline`, sec. 3.3).

p = softmax(v W^T + b), v the mean of the element's m output vectors. With identity hashing
(alpha = 1, m = 1) the rows are the input token embedding rows of the ids (tied, like the paper's
baseline); otherwise the head owns an N x d output embedding. Top-k is exact: every id is scored
(ranking.chunked_topk), so the decoding options beam/exact do not apply.

Training without label smoothing, where every target has its own hidden row (the next-item
objective: a loss at every position, sequence.py), goes through `fused_softmax_nll`: one (M, N)
logits buffer, the gradient softmax - one-hot written into it in place (no log_softmax copy, no
zero-filled index gradient), the bias added by addmm; the same loss and gradients as the
log_softmax path (tests/test_heads.py), measured ~25% less time per step on S3-Rec Beauty.
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .beam import DecodeConfig
from ..hashing.bloom import BloomHash
from .losses import smoothed_nll
from .ranking import Ranking, chunked_topk, exact_ranking, positions_in
from .rows import declare_rows, gather_rows
from .base import HeadBase
from .config import FullConfig  # noqa: F401 (re-exported: callers import it here)


def target_rows(rows: torch.Tensor | None, targets: torch.Tensor) -> torch.Tensor:
    """The hidden row of each target: `rows`, or one row per target."""
    return torch.arange(len(targets), device=targets.device) if rows is None else rows


class _FusedSoftmaxNLL(torch.autograd.Function):
    """mean_i -log softmax(v_i W^T + b)[t_i] with hand-written backward (see module docstring); with
    `rows`, (1 / n) sum_i -log softmax(v_{rows_i} W^T + b)[t_i]: several targets may read one row."""

    @staticmethod
    def forward(ctx, v, w, b, targets, rows=None, n=None):  # v (R, d), w (N, d), b (N,), targets (T,) -> scalar
        logits = torch.addmm(b, v, w.T)  # (R, N)
        lse = torch.logsumexp(logits, 1, keepdim=True)  # (R, 1)
        if rows is None:
            loss = (lse.squeeze(1) - logits.gather(1, targets[:, None]).squeeze(1)).mean()
        else:
            loss = (lse.squeeze(1)[rows] - logits[rows, targets]).sum() / n
        ctx.save_for_backward(v, w, logits, lse, targets, rows)
        ctx.n = n
        return loss

    @staticmethod
    def backward(ctx, grad):
        v, w, logits, lse, targets, rows = ctx.saved_tensors
        g = logits.sub_(lse).exp_()  # (R, N) softmax, in the saved buffer (forward is done with it)
        if rows is None:
            g[torch.arange(len(targets), device=g.device), targets] -= 1.0
            g.mul_(grad / len(targets))
        else:  # a row read by c targets: c x its softmax, minus each target's one-hot
            g.mul_(torch.bincount(rows, minlength=len(g)).to(g.dtype)[:, None])
            g.index_put_((rows, targets), torch.full((), -1.0, dtype=g.dtype, device=g.device), accumulate=True)
            g.mul_(grad / ctx.n)
        return g @ w, g.T @ v, g.sum(0), None, None, None


_TWICE = threading.local()


@contextlib.contextmanager
def differentiable_twice():
    """Within the block fused_softmax_nll is autograd's own log_softmax (its hand-written backward
    cannot be differentiated again): for a forward whose gradient is differentiated (AdapSGD's
    Hessian steps, training/adapsgd.py)."""
    before = getattr(_TWICE, "on", False)
    _TWICE.on = True
    try:
        yield
    finally:
        _TWICE.on = before


def fused_softmax_nll(v: torch.Tensor, w: torch.Tensor, b: torch.Tensor, targets: torch.Tensor,
                      rows: torch.Tensor | None = None, n: int | None = None) -> torch.Tensor:
    """Mean full-softmax NLL of targets (M,) from rows v (M, d), output rows w (N, d), bias b (N,);
    with rows (T,): target i reads row rows[i] of v, and the sum over the T targets is divided by n."""
    if getattr(_TWICE, "on", False):
        logp = F.log_softmax(torch.addmm(b, v, w.T), -1)
        if rows is None:
            return -logp[torch.arange(len(targets), device=targets.device), targets].mean()
        return -logp[rows, targets].sum() / n
    return _FusedSoftmaxNLL.apply(v, w, b, targets, rows, n)


class FullHead(HeadBase):
    """One output embedding row per id, full softmax: p = softmax(v W^T + b), v = mean_j hidden_j."""

    label_smoothing = 0.0

    def __init__(self, embedding: nn.Embedding, hashing: BloomHash, cfg: FullConfig, counts=None):
        super().__init__()
        self.cfg = cfg
        self.label_smoothing = cfg.label_smoothing
        self._init_rows(embedding, hashing)

    def _init_rows(self, embedding: nn.Embedding, hashing: BloomHash) -> None:
        """The output layer: tied token rows (identity hashing) or an own (N, d) table, and a bias."""
        self.n_ids = n = hashing.n_ids
        self.tied = hashing.alpha == 1 and hashing.m == 1
        if self.tied:  # the input token embedding rows of the ids are the output embedding
            self.embedding = embedding  # shared with the encoder (saved once by safetensors)
            tokens = torch.from_numpy(hashing.tokens(np.arange(n))[:, 0])  # (N,) token of each id
            self.register_buffer("token_of", tokens, persistent=False)
            contiguous = bool((tokens == tokens[0] + torch.arange(n)).all())
            self.first = int(tokens[0]) if contiguous else None  # rows(None) is then a view
        else:
            self.weight = nn.Parameter(torch.randn(n, embedding.embedding_dim) * 0.02)  # (N, d)
        self.bias = nn.Parameter(torch.zeros(n))
        declare_rows(self, ("bias",) if self.tied else ("weight", "bias"))  # read by rows when sampled (rows.py)

    def rows(self, ids: torch.Tensor | None = None) -> torch.Tensor:
        """Output embedding rows of ids (..., d), or of every id (N, d) when ids is None; rows of ids
        get a row-sparse gradient while sparse rows are on (rows.py)."""
        if not self.tied:
            return self.weight if ids is None else gather_rows(self.weight, ids, self.sparse_rows)
        if ids is None and self.first is not None:
            return self.embedding.weight[self.first:self.first + self.n_ids]
        if ids is None:
            return self.embedding.weight[self.token_of]
        return gather_rows(self.embedding.weight, self.token_of[ids], self.sparse_rows)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """(M, m, d) -> (M, N)."""
        return hidden.mean(1) @ self.rows().T + self.bias

    def log_probs(self, v: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
        """(M, d) averaged output vectors -> (M, N) log p over the ids; w: self.rows(), if at hand."""
        return F.log_softmax(v @ (self.rows() if w is None else w).T + self.bias, -1)

    def network_scores(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.log_probs(hidden.mean(1))

    def loss(self, hidden: torch.Tensor, targets: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """hidden (U, m, d), targets (M,), rows (M,) index into hidden (default: arange(M))."""
        if not self.label_smoothing and len(hidden) == len(targets) and (
                rows is None or bool((rows == torch.arange(len(rows), device=rows.device)).all())):
            return fused_softmax_nll(hidden.mean(1), self.rows(), self.bias, targets)  # own row per target
        logp = self.log_probs(hidden.mean(1))  # (U, N): each element's softmax once
        rows = target_rows(rows, targets)
        nll = -logp[rows, targets]  # (M,)
        if self.label_smoothing:
            nll = smoothed_nll(nll, logp.mean(-1)[rows], self.label_smoothing)
        return nll.mean()

    @torch.no_grad()
    def topk(self, hidden, k: int, exclude=None, decode: DecodeConfig = DecodeConfig(), context=None,
             chunk_elems: int = 1 << 24) -> Ranking:
        """Exact top-k by the full softmax, chunked over queries; `beam` of the result is N (ids scored)."""
        v, w, n = hidden.mean(1), self.rows(), self.n_ids
        vals, ids = chunked_topk(lambda a, b: self.log_probs(v[a:b], w), len(v), n, k, exclude,
                                 chunk_elems, like=v)
        return exact_ranking(vals, ids, k, decode.score, torch.full((len(v),), n))

    @torch.no_grad()
    def topk_allowed(self, hidden, k: int, allow, exclude=None, decode: DecodeConfig = DecodeConfig(), context=None,
                     chunk_elems: int = 1 << 24) -> Ranking:
        """Exact top-k among the allowed ids (A,): only their log-probabilities are ranked (the softmax
        still normalises over every id, so scores equal topk's); `beam` is A (ids ranked)."""
        v, w, a = hidden.mean(1), self.rows(), allow.numel()
        vals, pos = chunked_topk(lambda s, e: self.log_probs(v[s:e], w)[:, allow], len(v), a, k,
                                 positions_in(allow, exclude), chunk_elems, like=v)
        ids = torch.where(pos >= 0, allow[pos.clamp(min=0)], -1) if a else pos
        return exact_ranking(vals, ids, k, decode.score, torch.full((len(v),), a))
