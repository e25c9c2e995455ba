"""Output heads: one interface, four implementations, one factory (`build_head`, `HEADS`).

Every head maps the m output vectors of an element, hidden (M, m, d), to
  loss(hidden, targets, rows=None)         mean over the M targets of -log p(target | hidden[rows[i]])
                                           (for the hashed head: summed over the m hashes); rows
                                           lets several targets share one hidden row (default: own)
  topk(hidden, k, exclude=None, decode=DecodeConfig())  -> decode.Ranking of ids, best first;
                                           exclude (Q, X) ids, -1 padded, are never returned

  superbloom    the hashed softmax of the paper (sec. 2.3-2.5): the output embedding is the input
                token embedding (tied, sec. 3.2), m distributions over hash buckets, ids recovered
                by Algorithm 1 (decode.py: approximate, or exact with a certificate)
  full          one output embedding row per id and a full softmax (the paper's `baseline`,
                sec. 3.3). With identity hashing (alpha = 1, m = 1) the rows are the input token
                embedding rows of the ids (tied, like the paper's baseline); otherwise the head owns
                an N x d output embedding
  sampled       the same output layer trained with sampled softmax (sampled.py; the paper's
                `sampled-softmax`); evaluation uses the full softmax
  hierarchical  a binary tree over the ids with a logistic unit per internal node, top-k by A*
                (hierarchical.py; the seed notes on hierarchical softmax)

The heads that are not hashed average the m output vectors of an element into one, score ids
with one distribution and return an exact top-k (`Ranking.exact` all True): the decoding options
beam/exact do not apply to them; a score gamma is applied to the single log-probability (the
identity for sum_log/min/max); exhaustive scores every id (hierarchical: every leaf, instead of A*).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .decode import DecodeConfig, Ranking, decode_topk, exact_ranking, mask_excluded, topk_last
from .hashing import BloomHash
from .hierarchical import TREES, HierarchicalHead
from .sampled import PROPOSALS, Proposal, sampled_softmax_loss


@dataclass(frozen=True)
class HeadConfig:
    name: str = "superbloom"  # superbloom | full | sampled | hierarchical (HEADS)
    per_hash_softmax: bool = False  # superbloom: softmax j over map j's token range only
    label_smoothing: float = 0.0  # superbloom, full
    samples: int = 1024  # sampled: ids drawn per training step, shared by the batch
    proposal: str = "log_uniform"  # sampled: uniform | unigram | log_uniform (sampled.py)
    tree: str = "huffman"  # hierarchical: balanced | huffman | fano (hierarchical.py)

    def __post_init__(self):
        if self.samples < 1:
            raise ValueError(f"samples must be >= 1, got {self.samples}")
        if self.proposal not in PROPOSALS:
            raise ValueError(f"proposal must be one of {PROPOSALS}, got {self.proposal!r}")
        if self.tree not in TREES:
            raise ValueError(f"tree must be one of {TREES}, got {self.tree!r}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")


class SuperbloomHead(nn.Module):
    """Hashed softmax tied to the token embedding: p_j = softmax(y_j E^T + b)."""

    def __init__(self, embedding: nn.Embedding, hashing: BloomHash, cfg: HeadConfig, counts=None):
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


def _rows(rows: torch.Tensor | None, targets: torch.Tensor) -> torch.Tensor:
    """The hidden row of each target: `rows`, or one row per target."""
    return torch.arange(len(targets), device=targets.device) if rows is None else rows


class FullHead(nn.Module):
    """One output embedding row per id, full softmax: p = softmax(v W^T + b), v = mean_j hidden_j."""

    def __init__(self, embedding: nn.Embedding, hashing: BloomHash, cfg: HeadConfig, counts=None):
        super().__init__()
        if cfg.per_hash_softmax:
            raise ValueError(f"per_hash_softmax applies to the superbloom head only, not {cfg.name!r}")
        self.cfg = cfg
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

    def rows(self, ids: torch.Tensor | None = None) -> torch.Tensor:
        """Output embedding rows of ids (..., d), or of every id (N, d) when ids is None."""
        if not self.tied:
            return self.weight if ids is None else self.weight[ids]
        if ids is None and self.first is not None:
            return self.embedding.weight[self.first:self.first + self.n_ids]
        return self.embedding.weight[self.token_of if ids is None else self.token_of[ids]]

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """(M, m, d) -> (M, N)."""
        return hidden.mean(1) @ self.rows().T + self.bias

    def loss(self, hidden: torch.Tensor, targets: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """hidden (U, m, d), targets (M,), rows (M,) index into hidden (default: arange(M))."""
        logp = F.log_softmax(self.logits(hidden), -1)  # (U, N): each element's softmax once
        rows = _rows(rows, targets)
        nll = -logp[rows, targets]  # (M,)
        ls = self.cfg.label_smoothing
        if ls:  # uniform part of the smoothed target
            nll = (1 - ls) * nll - ls * logp.mean(-1)[rows]
        return nll.mean()

    @torch.no_grad()
    def topk(self, hidden, k: int, exclude=None, decode: DecodeConfig = DecodeConfig(),
             chunk_elems: int = 1 << 24) -> Ranking:
        """Exact top-k by the full softmax, chunked over queries; `beam` of the result is N (ids scored)."""
        v, w, n = hidden.mean(1), self.rows(), self.n_ids
        step = max(1, chunk_elems // n)
        vals, ids = [], []
        for a in range(0, len(v), step):
            lp = F.log_softmax(v[a:a + step] @ w.T + self.bias, -1)  # (q', N)
            lp = mask_excluded(lp, exclude[a:a + step] if exclude is not None else None)
            top = topk_last(lp, min(k, n))
            vals.append(top[0]), ids.append(top[1])
        if not vals:
            vals, ids = [v.new_zeros(0, min(k, n))], [torch.zeros(0, min(k, n), dtype=torch.long)]
        return exact_ranking(torch.cat(vals), torch.cat(ids), k, decode.score, torch.full((len(v),), n))


class SampledHead(FullHead):
    """The full head's output layer trained with sampled softmax (sampled.py). In eval mode the
    loss, and always the top-k, use the full softmax."""

    def __init__(self, embedding: nn.Embedding, hashing: BloomHash, cfg: HeadConfig, counts=None):
        if cfg.label_smoothing:
            raise ValueError("the sampled head does not support label_smoothing")
        super().__init__(embedding, hashing, cfg, counts)
        self.proposal = Proposal(cfg.proposal, hashing.n_ids, counts)

    def loss(self, hidden: torch.Tensor, targets: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        if not self.training:
            return super().loss(hidden, targets, rows)
        s = self.cfg.samples
        neg = torch.unique(self.proposal.sample(s))  # (S',) distinct drawn ids
        v = hidden.mean(1)[_rows(rows, targets)]  # (M, d)
        return sampled_softmax_loss(v, self.rows(targets), self.bias[targets], targets,
                                    self.rows(neg), self.bias[neg], neg, self.proposal.log_inclusion(neg, s))


HEADS = {"superbloom": SuperbloomHead, "full": FullHead, "sampled": SampledHead, "hierarchical": HierarchicalHead}


def build_head(cfg: HeadConfig, embedding: nn.Embedding, hashing: BloomHash, counts=None) -> nn.Module:
    """The head named cfg.name. `counts` (training id counts, (N,)) builds proposals and trees."""
    if cfg.name not in HEADS:
        raise ValueError(f"unknown head {cfg.name!r}; choose from {sorted(HEADS)}")
    return HEADS[cfg.name](embedding, hashing, cfg, counts)
