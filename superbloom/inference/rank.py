"""The one rank loop: a model and its head on batches of queries -> a Ranking (every caller: the
predictor, validation, evaluation, the text MLM, fill and the benchmarks). The query's context ids
are passed to the head once (heads/base.py: topk(..., context)).
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


@torch.no_grad()
def rank_contexts(model: SetModel, hashing: BloomHash, contexts: np.ndarray, k: int,
                  decode: DecodeConfig = DecodeConfig(), batch_size: int = 256, progress: bool = False,
                  exclude: np.ndarray | None = None, allow: np.ndarray | None = None) -> Ranking:
    """Top-k ids for each context row (Q, c) of ids (-1 padded). Never returned: the ids of `exclude`
    (Q, X), -1 padded, or by default (None) the context ids themselves. Only returned, when given:
    the ids of `allow` (A,) (the head's topk_allowed: exact among them where topk is exact).
    Runs on the model's device; the Ranking comes back on the CPU. Order matters for a model with
    positions (oldest id first): a causal one scores its newest element (model/sequence_batches.py's ordered_query_batch)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
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
        return model.head.topk(hidden, k, exclude=exclude, decode=decode, context=context).cpu()
    return model.head.topk_allowed(hidden, k, allowed, exclude, decode, context).cpu()
