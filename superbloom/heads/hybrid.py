"""The hybrid head: the full softmax plus a sparse, learned item-item term (issue 16).

    logit(j | context) = v W_j^T + b_j  +  sum_{c in context} A[c, j]          p = softmax(logits)

v and W as in the full head (full.py); A is a sparse N x N matrix whose nonzero pattern is fixed
before training: for every id c, its `neighbours` most frequent co-occurring ids in the training
sets (ties by id), the diagonal excluded. Its values start at 0 (the pure model) or, with
init = ease, at `gain` times EASE's closed-form weights (Steck 2019) on that pattern, and are learned
with the rest of the model, in the same softmax, with an optional L2 penalty `l2` (summed over
the values, added to the loss: EASE's ridge in SGD form). A pair's value moves only on the steps
where both ids meet in a batch, so at the model's learning rate the values stay near 0 (measured:
mean |A| 0.19 after 2,000 steps on Beauty): they are stored as A / `scale`, which makes Adam (whose
step does not depend on the gradient's scale) move them `scale` times faster.

Why a separate, named head: the issue asks for a linear item-item term only beside the pure
model, never hidden inside it. EASE (Steck 2019) is exactly a linear item-item model, with a dense
N^2 matrix; here A holds at most N x neighbours values and the deep model explains what a sparse
pairwise term cannot (benchmarks/results/quality.md reports both heads on the same examples).

The head needs the context ids of each row (`needs_context`): SetModel.forward and
predictor.rank_contexts pass the tokens of the row's set, which for this head's identity hashing
(alpha = 1, m = 1, required) are the ids shifted by the special tokens; special tokens ([MASK],
padding) add nothing. Only the masked set objective trains it (train.py checks). Decoding scores
every id, so top-k is exact, as for the full head.

Storage: the pattern (indptr (N + 1,), cols (nnz,)) and the values (nnz,) are tensors of the model,
saved in model.safetensors; a model is built with an empty pattern and takes the saved one's size
when its weights are loaded (`_load_from_state_dict`), so load, resume and serve need nothing new.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..baselines import EASE_MAX_IDS, Ease
from ..decode import DecodeConfig
from ..hashing import BloomHash
from ..losses import smoothed_nll
from ..ranking import Ranking, chunked_topk, exact_ranking
from .full import FullHead, target_rows


@dataclass(frozen=True)
class HybridConfig:
    name: ClassVar[str] = "hybrid"
    neighbours: int = 200  # nonzero item-item values per id (its most frequent co-occurring ids)
    l2: float = 0.0  # L2 penalty on the item-item values, added to the loss
    scale: float = 1.0  # the values are scale x their parameters: Adam moves them scale x faster
    init: str = "zero"  # the values' start: zero (the pure model), or ease (gain x EASE's weights on the pattern)
    gain: float = 10.0  # init ease: the EASE weights' multiplier (EASE scores ~0-1, the model's logits ~10)
    label_smoothing: float = 0.0

    def __post_init__(self):
        if self.neighbours < 1:
            raise ValueError(f"neighbours must be >= 1, got {self.neighbours}")
        if not self.l2 >= 0:
            raise ValueError(f"l2 must be >= 0, got {self.l2}")
        if not self.scale > 0:
            raise ValueError(f"scale must be > 0, got {self.scale}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {self.init!r}")


INITS = ("zero", "ease")


def neighbour_pattern(sets, n_ids: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k most frequent co-occurring ids of every id in `sets` (a SetArray), diagonal excluded,
    ties broken by the smaller id. -> (indptr (N + 1,) int64, cols (nnz,) int64), each row sorted by id."""
    x = sets.incidence(n_ids)  # (S, N) binary
    c = (x.T @ x).tocsr()  # (N, N) co-occurrence counts
    c.setdiag(0)
    c.eliminate_zeros()
    c.sort_indices()
    rows = np.repeat(np.arange(n_ids), np.diff(c.indptr))  # (nnz,)
    # within each row: count descending, then id ascending; keep the first k of every row
    order = np.lexsort((c.indices, -c.data, rows))
    rank = np.arange(len(order)) - np.repeat(c.indptr[:-1], np.diff(c.indptr))
    keep = order[rank < k]
    keep.sort()  # back to row-major, id-sorted order
    kept_rows = rows[keep]
    indptr = np.zeros(n_ids + 1, np.int64)
    np.cumsum(np.bincount(kept_rows, minlength=n_ids), out=indptr[1:])
    return indptr, c.indices[keep].astype(np.int64)


class HybridHead(FullHead):
    """Full softmax + a sparse learned item-item term over the context (see the module docstring)."""

    needs_context = True

    def __init__(self, embedding: nn.Embedding, hashing: BloomHash, cfg: HybridConfig, counts=None):
        if not (hashing.alpha == 1 and hashing.m == 1):
            raise ValueError(f"the hybrid head needs identity hashing (alpha 1, m 1): its item-item term is over "
                             f"ids; got alpha {hashing.alpha}, m {hashing.m} (pass --alpha 1 --m 1)")
        super().__init__(embedding, hashing, cfg, counts)
        if self.first is None:
            raise ValueError("the hybrid head needs the ids' tokens to be contiguous (identity hashing)")
        self.register_buffer("indptr", torch.zeros(self.n_ids + 1, dtype=torch.long))
        self.register_buffer("cols", torch.zeros(0, dtype=torch.long))
        self.values = nn.Parameter(torch.zeros(0))

    def build_from(self, sets) -> dict:
        """Set the nonzero pattern from the training sets (a fresh run, before training); values 0."""
        indptr, cols = neighbour_pattern(sets, self.n_ids, self.cfg.neighbours)
        dev = self.bias.device
        self.indptr = torch.from_numpy(indptr).to(dev)
        self.cols = torch.from_numpy(cols).to(dev)
        start = np.zeros(len(cols), np.float32)
        if self.cfg.init == "ease":  # EASE's closed form (baselines.Ease), kept on the pattern only
            if self.n_ids > EASE_MAX_IDS:
                raise ValueError(f"hybrid init ease: EASE is dense (N x N); {self.n_ids:,} ids exceed the "
                                 f"{EASE_MAX_IDS:,} limit (use --item-init zero)")
            b = Ease(sets, self.n_ids).b  # (N, N) float32
            start = b[np.repeat(np.arange(self.n_ids), np.diff(indptr)), cols] * (self.cfg.gain / self.cfg.scale)
            del b
        self.values = nn.Parameter(torch.from_numpy(np.ascontiguousarray(start, np.float32)).to(dev))
        return {"item_item_values": int(len(cols)), "neighbours": self.cfg.neighbours, "init": self.cfg.init}

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in ("indptr", "cols", "values"):  # the saved pattern's size
            t = state_dict.get(prefix + name)
            if t is not None and tuple(t.shape) != tuple(getattr(self, name).shape):
                new = torch.zeros(t.shape, dtype=getattr(self, name).dtype, device=self.bias.device)
                if name == "values":
                    self.values = nn.Parameter(new)
                else:
                    setattr(self, name, new)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def context_ids(self, tokens: torch.Tensor) -> torch.Tensor:
        """Tokens (U, T) -> ids (U, T), -1 at special tokens (identity hashing: a shift)."""
        ids = tokens - self.first
        return ids.masked_fill((ids < 0) | (ids >= self.n_ids), -1)

    def item_item(self, context: torch.Tensor) -> torch.Tensor:
        """Context ids (U, T), -1 padded -> (U, N): sum over the context of A's rows."""
        u, t = context.shape
        flat = context.reshape(-1)
        real = flat >= 0
        rows = torch.arange(u, device=context.device).repeat_interleave(t)[real]  # (R,) row of each context id
        ids = flat[real]
        starts, lens = self.indptr[ids], self.indptr[ids + 1] - self.indptr[ids]  # (R,)
        total = int(lens.sum())
        out = torch.zeros(u * self.n_ids, dtype=self.values.dtype, device=context.device)
        if total:
            owner = torch.repeat_interleave(torch.arange(len(ids), device=context.device), lens)  # (E,)
            offset = torch.arange(total, device=context.device) - torch.repeat_interleave(lens.cumsum(0) - lens, lens)
            entry = starts[owner] + offset  # (E,) positions in cols / values
            out = out.index_add(0, rows[owner] * self.n_ids + self.cols[entry], self.values[entry] * self.cfg.scale)
        return out.view(u, self.n_ids)

    def loss(self, hidden: torch.Tensor, targets: torch.Tensor, rows: torch.Tensor | None = None,
             context_tokens: torch.Tensor | None = None) -> torch.Tensor:
        """As FullHead.loss, with the item-item term of each hidden row's context (context_tokens (U, T))."""
        if context_tokens is None:
            raise ValueError("the hybrid head scores with the context: pass context_tokens")
        logits = self.logits(hidden) + self.item_item(self.context_ids(context_tokens))  # (U, N)
        logp = F.log_softmax(logits, -1)
        rows = target_rows(rows, targets)
        nll = -logp[rows, targets]  # (M,)
        if self.label_smoothing:
            nll = smoothed_nll(nll, logp.mean(-1)[rows], self.label_smoothing)
        loss = nll.mean()
        if self.cfg.l2:
            loss = loss + self.cfg.l2 * (self.values * self.cfg.scale).pow(2).sum()
        return loss

    @torch.no_grad()
    def topk(self, hidden, k: int, exclude=None, decode: DecodeConfig = DecodeConfig(),
             chunk_elems: int = 1 << 24, context_tokens: torch.Tensor | None = None) -> Ranking:
        """Exact top-k of the hybrid scores (every id scored), chunked over queries."""
        if context_tokens is None:
            raise ValueError("the hybrid head scores with the context: pass context_tokens")
        v, w, n = hidden.mean(1), self.rows(), self.n_ids
        ctx = self.context_ids(context_tokens)
        vals, ids = chunked_topk(
            lambda a, b: F.log_softmax(v[a:b] @ w.T + self.bias + self.item_item(ctx[a:b]), -1),
            len(v), n, k, exclude, chunk_elems, like=v)
        return exact_ranking(vals, ids, k, decode.score, torch.full((len(v),), n))
