"""An item-item term over a context: its sums, the ids it reaches, and its ranking alone.

A term is a sparse N x N matrix A in CSR (indptr (N + 1,), cols (nnz,), values (nnz,)); a query's
context is its ids (U, T), -1 padded, oldest first. `term_sum` is the dense sum of the context ids'
rows (each weighted `decay ** age` by `age_weights` for ordered data), `SparseSums` the same sums
at the ids those rows reach alone, and `term_topk` the "term alone" ranking (ties by the smaller
id), which the hybrid head's variant and the term baselines (evaluation/term_baselines.py) share. The hybrid heads
(hybrid.py, hashed_hybrid.py) build the terms and mix them with the network.
"""
from __future__ import annotations

import torch

from .beam import DecodeConfig
from . import ranking
from .ranking import NEG_INF, Ranking, exact_ranking, excluded, mask_excluded


def age_weights(context: torch.Tensor, decay: float, dtype=torch.float32) -> torch.Tensor | None:
    """Context ids (U, T), -1 padded, oldest first -> decay ** age (U, T), age 0 for each row's newest
    id; None when decay is 1 (every id alike)."""
    if float(decay) == 1.0:
        return None
    real = context >= 0
    order = real.long().cumsum(1) - 1  # index among the row's real ids
    age = (real.sum(1, keepdim=True) - 1 - order).clamp(min=0)
    return torch.pow(torch.full((), float(decay), dtype=dtype, device=context.device), age.to(dtype))


def term_sum(indptr: torch.Tensor, cols: torch.Tensor, values: torch.Tensor, n_ids: int, context: torch.Tensor,
             weights: torch.Tensor | None = None) -> torch.Tensor:
    """Context ids (U, T), -1 padded -> (U, N): the sum over the context of the rows of A (CSR:
    indptr (N + 1,), cols (nnz,), values (nnz,)), each row times `weights` (U, T) of its context id if
    given. The sums run over the context in its order (one index_add_)."""
    u, t = context.shape
    flat = context.reshape(-1)
    real = flat >= 0
    rows = torch.arange(u, device=context.device).repeat_interleave(t)[real]  # (R,) row of each context id
    ids = flat[real]
    w = weights.reshape(-1)[real] if weights is not None else None  # (R,)
    starts, lens = indptr[ids], indptr[ids + 1] - indptr[ids]  # (R,)
    total = int(lens.sum())
    out = torch.zeros(u * n_ids, dtype=values.dtype, device=context.device)
    if total:
        owner = torch.repeat_interleave(torch.arange(len(ids), device=context.device), lens)  # (E,)
        offset = torch.arange(total, device=context.device) - torch.repeat_interleave(lens.cumsum(0) - lens, lens)
        entry = starts[owner] + offset  # (E,) positions in cols / values
        vals = values[entry] if w is None else values[entry] * w[owner]
        out.index_add_(0, rows[owner] * n_ids + cols[entry], vals)
    return out.view(u, n_ids)


class SparseSums:
    """One term's sums over a chunk of contexts (U, T) kept sparse: the ids each row reaches, `found`
    (U, Z) (-1 padded, each row's in id order), and for any weights the sums at those ids alone
    (`at_found`), as term_sum gives them there (the same entries added in the same order); no (U, N)
    buffer is built. Z: the most ids a row reaches."""

    def __init__(self, indptr: torch.Tensor, cols: torch.Tensor, values: torch.Tensor, n_ids: int,
                 context: torch.Tensor):
        u, t = context.shape
        flat = context.reshape(-1)
        self.real = flat >= 0
        rows = torch.arange(u, device=context.device).repeat_interleave(t)[self.real]
        ids = flat[self.real]
        starts, lens = indptr[ids], indptr[ids + 1] - indptr[ids]
        total = int(lens.sum())
        self.owner = torch.repeat_interleave(torch.arange(len(ids), device=context.device), lens)  # (E,)
        offset = torch.arange(total, device=context.device) - torch.repeat_interleave(lens.cumsum(0) - lens, lens)
        self.entry = starts[self.owner] + offset  # (E,) positions in cols / values
        self.values = values
        keys, self.inverse = torch.unique(rows[self.owner] * n_ids + cols[self.entry], return_inverse=True)
        self.rows, self.ids = keys // n_ids, keys % n_ids  # (K,) each a distinct (row, id), sorted
        counts = torch.bincount(self.rows, minlength=u)
        self.z = int(counts.max()) if u else 0
        self.pos = torch.arange(len(keys), device=context.device) - (counts.cumsum(0) - counts)[self.rows]
        self.found = torch.full((u, self.z), -1, dtype=torch.long, device=context.device)
        self.found[self.rows, self.pos] = self.ids

    def at_found(self, weights: torch.Tensor | None = None) -> torch.Tensor:
        """(U, Z): the sum at each found id, each context id's row times `weights` (U, T) if given."""
        vals = self.values[self.entry]
        if weights is not None:
            vals = vals * weights.reshape(-1)[self.real][self.owner]
        sums = torch.zeros(len(self.rows), dtype=vals.dtype, device=vals.device).index_add_(0, self.inverse, vals)
        out = torch.zeros(self.found.shape, dtype=vals.dtype, device=vals.device)
        out[self.rows, self.pos] = sums
        return out

    def masked(self, base: torch.Tensor) -> torch.Tensor:
        """A copy of base (U, N) with -inf at the found ids."""
        out = base.clone()
        out[self.rows, self.ids] = float("-inf")
        return out


def term_topk(indptr: torch.Tensor, cols: torch.Tensor, values: torch.Tensor, n_ids: int, ctx: torch.Tensor,
              decay: float, k: int, exclude: torch.Tensor | None = None, decode: DecodeConfig = DecodeConfig(),
              chunk_elems: int = 1 << 22) -> Ranking:
    """The "term alone" ranking: score = term_sum of A over the context ids ctx (U, T) (-1 padded,
    oldest first, ids in [0, N)) weighted decay ** age; every id scored, ties by the smaller id (a
    stable sort), the context and `exclude` (U, X) ids never returned (-1 where fewer than k remain).
    The hybrid head's variant and the term baselines (evaluation/term_baselines.py) rank with it.
    Where the context ids' rows reach few ids, only those and the `k` smallest other ids (which tie
    at 0 and come first among the rest) are sorted, from the sparse sums (no (U, N) buffer): the
    same list."""
    n, width = n_ids, min(k, n_ids)
    step = max(1, chunk_elems // max(1, n))
    vals = [torch.zeros(0, width, dtype=values.dtype, device=ctx.device)]
    ids = [torch.zeros(0, width, dtype=torch.long, device=ctx.device)]
    for a in range(0, len(ctx), step):
        c = ctx[a:a + step]  # (u, T)
        ex = exclude[a:a + step] if exclude is not None else None
        v, i = _sparse_term_top(indptr, cols, values, n, c, decay, width, ex)
        if v is None:
            s = mask_excluded(term_sum(indptr, cols, values, n, c, age_weights(c, decay, values.dtype)), c)  # (u, N)
            v, i = mask_excluded(s, ex).sort(dim=1, descending=True, stable=True)  # equal scores keep id order
        vals.append(v[:, :width].clone())  # copies: a view would keep every chunk's (u, N) sort alive
        ids.append(i[:, :width].clone())
    return exact_ranking(torch.cat(vals), torch.cat(ids), k, decode.score, torch.full((len(ctx),), n))


def _sparse_term_top(indptr, cols, values, n: int, c: torch.Tensor, decay: float, width: int,
                     ex: torch.Tensor | None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """term_topk's chunk from the sparse sums: the ids the context reaches and the `width` smallest
    ids outside them, the context and `ex` (those score 0 and, ties going to the smaller id, come
    first among the unreached), sorted by id, then a stable sort by score. -> (vals, ids) (u, C) in
    ranking order (-inf and -1 past the allowed ids), or (None, None) where the candidates would be
    over a quarter of N (or N under SPARSE_MIN_IDS): score every id then."""
    if n < ranking.SPARSE_MIN_IDS:
        return None, None
    sums = SparseSums(indptr, cols, values, n, c)
    span = width + sums.z + c.shape[1] + (ex.shape[1] if ex is not None else 0)  # holds `width` unreached ids
    if 4 * span > n:
        return None, None
    low = torch.arange(span, device=c.device).repeat(len(c), 1)  # (u, span), contiguous for searchsorted
    taken = excluded(low, sums.found) | excluded(low, c) | excluded(low, ex)
    free = ~taken & ((~taken).long().cumsum(1) <= width)  # the `width` smallest free ids of each row
    found_scores = sums.at_found(age_weights(c, decay, values.dtype))  # (u, Z)
    gone = (sums.found < 0) | excluded(sums.found, c) | excluded(sums.found, ex)
    cand = torch.cat([low.masked_fill(~free, n), sums.found.masked_fill(gone, n)], 1)  # n: no candidate
    score = torch.cat([torch.zeros(low.shape, dtype=found_scores.dtype, device=c.device), found_scores], 1)
    cand, at = cand.sort(dim=1)  # id order, the pads (n) last
    score = score.gather(1, at).masked_fill(cand == n, NEG_INF)
    v, pos = score.sort(dim=1, descending=True, stable=True)
    return v, cand.gather(1, pos).masked_fill(v == NEG_INF, -1)
