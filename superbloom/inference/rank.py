"""The one rank loop: a model and its head on batches of queries -> a Ranking (every caller: the
predictor, validation, evaluation, the text MLM, fill and the benchmarks). The query's context ids
are passed to the head once (heads/base.py: topk(..., context)).

Three rules hold here for every caller (the CLI, the Python API, the HTTP service, bulk predict,
expansion, evaluation):
- k is clamped to the ids that exist (asking for more returns every id that can be ranked: the same
  answer), and a batch holds at most RANK_BATCH_SCORES answers, so no k allocates beyond the vocabulary;
- a set model's context is a set: an id repeated in a row counts once (the first one kept, as
  `prepare` keeps sets), before it is hashed, so `Jazz Jazz` ranks as `Jazz`. A model with positions
  reads a history, whose repeats are kept (as `prepare --split leave-one-out` keeps them);
- an answer with a non-finite score among its ids (NaN or inf weights) is never certified exact.
"""
from __future__ import annotations

import numpy as np
import torch
from .._log import progress_bar

from ..heads.beam import DecodeConfig
from ..hashing.bloom import BloomHash
from ..model.encoder import SetModel
from ..heads.ranking import Ranking
from ..model.batches import to_batch
from ..hashing.bloom import PAD_ELEM
from ..model.sequence_batches import ordered_query_batch
from ..model.text_batches import MaskedRows


RANK_BATCH_SCORES = 1 << 22  # answers (queries x k) in one batch of rank_contexts: 4M, ~50 MB with its work


def bounded_k(k: int, n_ids: int) -> int:
    """k clamped to the n_ids that exist (at least 1): more could never be returned."""
    return max(1, min(int(k), int(n_ids)))


def reads_sets(model_cfg) -> bool:
    """Whether a model reads its context as a set (no positions, not causal): its repeats count once."""
    return not (getattr(model_cfg, "causal", False) or (getattr(model_cfg, "positions", 0) or 0))


def distinct(contexts: np.ndarray) -> np.ndarray:
    """(Q, c) ids, -1 padded -> the same with every repeat of an id within its row set to -1 (its
    first occurrence kept, order kept). Vectorised: a stable sort of each row finds the repeats."""
    ctx = np.asarray(contexts, np.int64)
    if ctx.ndim != 2 or ctx.shape[1] < 2:
        return ctx
    order = np.argsort(ctx, axis=1, kind="stable")
    srt = np.take_along_axis(ctx, order, axis=1)
    repeat = np.zeros(ctx.shape, bool)
    repeat[:, 1:] = (srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0)
    if not repeat.any():
        return ctx
    out = ctx.copy()
    rows = np.nonzero(repeat)[0]
    out[rows, order[repeat]] = -1
    return out


def query_contexts(contexts: np.ndarray, model_cfg) -> np.ndarray:
    """The contexts as the model reads them: a set model's without repeats (distinct), a history as given."""
    return distinct(contexts) if reads_sets(model_cfg) else np.asarray(contexts, np.int64)


def certified(r: Ranking) -> Ranking:
    """`r` with its exact flag cleared on every row whose returned ids have a non-finite score (NaN or
    inf: an arbitrary order, which no bound certifies)."""
    finite = (torch.isfinite(r.scores) | (r.ids < 0)).all(1)
    if bool(finite.all()):
        return r
    return Ranking(r.ids, r.scores, r.exact & finite, r.beam)


@torch.no_grad()
def rank_contexts(model: SetModel, hashing: BloomHash, contexts: np.ndarray, k: int,
                  decode: DecodeConfig = DecodeConfig(), batch_size: int = 256, progress: bool = False,
                  exclude: np.ndarray | None = None, allow: np.ndarray | None = None) -> Ranking:
    """Top-k ids for each context row (Q, c) of ids (-1 padded). Never returned: the ids of `exclude`
    (Q, X), -1 padded, or by default (None) the context ids themselves. Only returned, when given:
    the ids of `allow` (A,) (the head's topk_allowed: exact among them where topk is exact).
    Runs on the model's device; the Ranking comes back on the CPU, (Q, min(k, ids)). Order matters for
    a model with positions (oldest id first): a causal one scores its newest element
    (model/sequence_batches.py's ordered_query_batch); a set model's repeats count once (module docstring)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    k = bounded_k(k, hashing.n_ids)
    batch_size = max(1, min(batch_size, RANK_BATCH_SCORES // k))
    contexts = query_contexts(contexts, model.encoder.cfg)
    exclude = contexts if exclude is None else exclude
    allowed = None if allow is None else torch.from_numpy(np.unique(np.asarray(allow, np.int64))).to(device)
    parts = []
    for a in progress_bar(range(0, len(contexts), batch_size), desc="ranking", progress=progress, leave=False):
        ctx = np.asarray(contexts[a:a + batch_size], dtype=np.int64)
        ex = np.asarray(exclude[a:a + batch_size], dtype=np.int64)
        qb = ordered_query_batch(ctx, hashing, model.encoder.cfg).to(device)
        parts.append(rank_batch(model, qb, k, torch.from_numpy(ex).to(device) if ex.shape[1] else None, decode,
                                allowed))
    model.train(was_training)
    return Ranking.concat(parts) if parts else Ranking.empty(k)


@torch.no_grad()
def rank_masked(model, hashing: BloomHash, ex: MaskedRows, k: int, decode: DecodeConfig = DecodeConfig(),
                batch_rows: int = 32):
    """Top-k ids at every masked position of `ex`, nothing excluded -> ranking.Ranking (M, k), in the
    order of ex.flat(). Each query's context (the row's other tokens) goes to the head as for contexts."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    parts = []
    for a in range(0, len(ex.elems), batch_rows):
        e, t = ex.elems[a:a + batch_rows], ex.targets[a:a + batch_rows]
        w = max(1, int((e != PAD_ELEM).sum(1).max()))  # trim trailing padding columns
        batch = to_batch(e[:, :w], t[:, :w], hashing, merge=False).to(device)
        parts.append(rank_batch(model, batch, k, None, decode))
    model.train(was_training)
    return Ranking.concat(parts) if parts else Ranking.empty(k)


@torch.no_grad()
def rank_batch(model, batch, k: int, exclude: torch.Tensor | None = None,
               decode: DecodeConfig = DecodeConfig(), allowed: torch.Tensor | None = None) -> Ranking:
    """The innermost step every ranking shares: the head's top-k for each target element of `batch`
    (on the model's device), never returning the ids of `exclude` (M, X) (-1 padded), only ids of
    `allowed` (sorted unique ids) when given; each query's context (the ids of its row) handed to the
    head -> Ranking on the CPU."""
    hidden = model.target_hidden(batch)  # (M, m, d)
    context = model.head.query_context(batch, batch.target_elem)  # heads/base.py
    if allowed is None:
        return certified(model.head.topk(hidden, k, exclude=exclude, decode=decode, context=context).cpu())
    return certified(model.head.topk_allowed(hidden, k, allowed, exclude, decode, context).cpu())
