"""The hybrid head: the full softmax plus a fixed sparse item-item term over the context.

    score(j | context) = log softmax(v W^T + b)_j  +  mix * sum_{c in context} decay ** age(c) * A[c, j]

The network trains exactly as the full head (full.py), or with `samples` > 0 negatives per step as
the sampled head (sampled.py); the term never enters training. A is a sparse N x N matrix fitted
once from the training sets before training (`fit`; the validation sets unseen), at most
`neighbours` values per row, no diagonal, built by the terms' registry (terms.py: ease, local-ease,
cooccurrence, transition), shared with the baselines. Term auto picks by the number of ids; with a
sequence objective the transition term is built beside it (the `alt` slot) and the validation
chooses between them.

A late fusion: `choose` (run at every validation on the held-out training sets) sets mix from
MIXES (0, the network alone, always a candidate), and for ordered contexts the recency `decay`
(DECAYS, age 0 for the newest id) and the term, from one network pass scored for every candidate;
so the BEST checkpoint carries the weight that was best for its weights. The term alone (mix
TERM_ALONE, the limit mix -> infinity: the "term alone" variant) is a candidate too, which train
validates before the first step: the model serves its term, certified exact, at once, and BEST never
drops below it. cfg.mix fixes the weight instead.

Variants reported beside the head on the same examples (`variants()`): "network alone" (mix 0) and
"term alone" (the chosen term with its decay and no network; ties by the smaller id). Decoding
scores every id, so top-k is exact; the scores are these sums, not log-probabilities.

Storage: the patterns and values (`fixed_buffers`) are written once per model folder
(storage/fixed.py); mix, decay and alt go with each checkpoint. A model is built with an empty
pattern and takes the saved one's size when its weights load (`_load_from_state_dict`).
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import time
import weakref
from dataclasses import dataclass
from typing import Callable, ClassVar

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .beam import DecodeConfig
from ..hashing.bloom import BloomHash
from ..storage.fixed import declare_fixed
from .terms import auto_term, build_term as registry_build, term_entry
from .ranking import Ranking, chunked_topk_variants, exact_ranking, mask_excluded, sparse_best
from .term_sums import SparseSums, age_weights, term_sum, term_topk  # noqa: F401 (re-exported)
from .full import FullHead
from .parts import (TERM_ALONE, first_best, hybrid_label, mixed, network_only, parts_note, ranked_alongside,
                    term_alone, term_only)
from .base import HeadBase, Validation
from .sampled import Proposal, head_sampled_loss
from .config import MIXES, TERMS, HybridConfig, check_term_settings  # noqa: F401 (re-exported: callers import them here)

log = logging.getLogger(__name__)


def resolve_term(term: str, n_ids: int, ordered: bool = False) -> tuple[str, ...]:
    """The terms a head builds (the registry, terms.py): auto -> EASE where it fits, else the
    registry's choice above (terms.auto_term);
    with ordered training data (a sequence objective) the transition term first and that one beside
    it, the validation choosing between them."""
    if term == "auto":
        unordered = auto_term(n_ids)
        return ("transition", unordered) if ordered else (unordered,)
    term_entry(term, n_ids, "hybrid")  # refused here, before any work, where it cannot serve
    return (term,)


class HybridHead(FullHead):
    """Full softmax + mix x a fixed sparse item-item term over the context (see the module docstring)."""

    uses_context = True
    # the added term changes the ranking: the allow-list goes through this head's own topk (base.py)
    topk_allowed = HeadBase.topk_allowed
    fixed_buffers = ("indptr", "cols", "values", "alt_indptr", "alt_cols", "alt_values")  # once per folder

    def __init__(self, embedding: nn.Embedding, hashing: BloomHash, cfg: HybridConfig, counts=None):
        if not (hashing.alpha == 1 and hashing.m == 1):
            raise ValueError(f"the hybrid head needs identity hashing (alpha 1, m 1): its item-item term is over "
                             f"ids; got alpha {hashing.alpha}, m {hashing.m} (pass --alpha 1 --m 1)")
        super().__init__(embedding, hashing, cfg, counts)
        if self.first is None:
            raise ValueError("the hybrid head needs the ids' tokens to be contiguous (identity hashing)")
        self.proposal = Proposal(cfg.proposal, self.n_ids, counts) if cfg.samples else None
        self.register_buffer("indptr", torch.zeros(self.n_ids + 1, dtype=torch.long))
        self.register_buffer("cols", torch.zeros(0, dtype=torch.long))
        self.register_buffer("values", torch.zeros(0))
        self.register_buffer("mix", torch.zeros(()))
        self.register_buffer("decay", torch.ones(()))
        # a second term (term auto on ordered data: the validation chooses; `alt` 1 = this one is used)
        self.register_buffer("alt_indptr", torch.zeros(0, dtype=torch.long))
        self.register_buffer("alt_cols", torch.zeros(0, dtype=torch.long))
        self.register_buffer("alt_values", torch.zeros(0))
        self.register_buffer("alt", torch.zeros((), dtype=torch.long))
        declare_fixed(self, self.fixed_buffers)  # storage/fixed.py
        self._grid, self._parts = None, None  # choose's candidates and their rankings, while it runs
        self._term_alone = False  # inside the "term alone" variant: topk ranks by the term only
        self._alone_scores = weakref.WeakKeyDictionary()  # choose: a validation's rank() -> its term-alone metrics

    def loss(self, hidden: torch.Tensor, targets: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        if self.proposal is not None and self.training:
            return head_sampled_loss(self, self.proposal, self.cfg.samples, hidden, targets, rows)
        return super().loss(hidden, targets, rows)

    def fit(self, sets, ordered: bool = False) -> dict:
        """The item-item term from the training sets (a fresh run, before training); mix 0. `ordered`:
        the sets are sequences, oldest id first, and the model is trained on their order (term auto)."""
        terms = resolve_term(self.cfg.term, self.n_ids, ordered)
        built = [self._build_term(term, sets) for term in terms]
        dev = self.bias.device
        for prefix, (indptr, cols, values) in zip(("", "alt_"), built):
            setattr(self, prefix + "indptr", torch.from_numpy(indptr).to(dev))
            setattr(self, prefix + "cols", torch.from_numpy(cols).to(dev))
            setattr(self, prefix + "values", torch.from_numpy(np.ascontiguousarray(values, np.float32)).to(dev))
        self.mix = torch.zeros((), device=dev)
        self.decay = torch.ones((), device=dev)
        self.alt = torch.zeros((), dtype=torch.long, device=dev)
        return {"item_item_values": sum(len(b[1]) for b in built), "neighbours": self.cfg.neighbours,
                "term": " | ".join(terms)}

    def _build_term(self, term: str, sets) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return build_term(term, sets, self.n_ids, self.cfg)

    def ranks_before_training(self) -> bool:
        """A built term, and the weight chosen on validation (the term alone is a candidate of choose)."""
        return self.cfg.mix is None and bool(self.values.numel())

    def before_training(self) -> None:
        """The term alone (mix TERM_ALONE), until the validation chooses."""
        if self.ranks_before_training():
            self.mix.fill_(TERM_ALONE)

    def term_names(self) -> tuple[str, ...]:
        """The built terms' names, in slot order (slot 1 only with term auto on ordered data)."""
        return resolve_term(self.cfg.term, self.n_ids, ordered=bool(self.alt_indptr.numel()))

    @property
    def term_slots(self) -> int:
        return 2 if self.alt_indptr.numel() else 1

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        if prefix + "decay" not in state_dict:  # saved before the recency weight existed: every id alike
            state_dict[prefix + "decay"] = torch.ones(())
        for name, empty in (("alt_indptr", torch.zeros(0, dtype=torch.long)), ("alt_cols", torch.zeros(0, dtype=torch.long)),
                            ("alt_values", torch.zeros(0)), ("alt", torch.zeros((), dtype=torch.long))):
            state_dict.setdefault(prefix + name, empty)  # saved before a second term existed: one term
        for name in ("indptr", "cols", "values", "alt_indptr", "alt_cols", "alt_values"):  # the saved pattern's size
            t = state_dict.get(prefix + name)
            if t is not None and tuple(t.shape) != tuple(getattr(self, name).shape):
                setattr(self, name, torch.zeros(t.shape, dtype=getattr(self, name).dtype, device=self.bias.device))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def fixed_weights(self) -> int:
        """The item-item values and their mix: counted with the model's parameters (model.count_parameters)."""
        return int(self.values.numel()) + int(self.alt_values.numel()) + 1

    def variants(self) -> dict:
        """With an item-item weight: the network alone (mix 0) and the term alone (no network),
        ranked on the same examples; at weight 0 (fixed by cfg.mix 0, or chosen: the head is its
        network alone) the term alone beside it, once a term is built (fit)."""
        if float(self.mix):
            return {"network alone": network_only(mixed(self, 0.0)), "term alone": term_only(term_alone(self))}
        return {"term alone": term_only(term_alone(self))} if self.values.numel() else {}

    def ranked_alongside(self):
        """The network alone (mix 0) ranked in the hybrid's own passes: the same network scores, one
        more top-k per chunk (HeadBase.ranked_alongside; parts.ranked_alongside)."""
        decay, slot = float(self.decay), int(self.alt)
        if math.isinf(float(self.mix)):  # the head ranks by its term alone: the network alone has a pass of its own
            return contextlib.nullcontext({})
        return ranked_alongside(self, (float(self.mix), decay, slot), {"network alone": (0.0, decay, slot)})

    def describe(self) -> dict:
        """The head's name, and once a term is built (the term is reported beside the head at any
        weight, 0 included: variants) the mix, decay and term."""
        out = super().describe()
        if float(self.mix) or self.values.numel():
            out.update(item_mix=float(self.mix), item_decay=round(float(self.decay), 3),
                       item_term=self.term_names()[int(self.alt)])
        return out

    def label(self) -> str:
        return hybrid_label(self.describe()) if self.variants() else super().label()

    def term_weight(self) -> float:
        return float(self.mix)

    def age_weights(self, context: torch.Tensor, decay: float | None = None) -> torch.Tensor | None:
        """Context ids (U, T), -1 padded, oldest first -> decay ** age (U, T), age 0 for each row's
        newest id; None when decay (default: the head's) is 1 (every id alike)."""
        return age_weights(context, float(self.decay) if decay is None else float(decay), self.values.dtype)

    def item_item(self, context: torch.Tensor, weights: torch.Tensor | None = None, slot: int | None = None
                  ) -> torch.Tensor:
        """Context ids (U, T), -1 padded -> (U, N): sum over the context of A's rows (each row times
        `weights` (U, T) of its context id, if given); A: term `slot` (default: the chosen one)."""
        return term_sum(*self.term_arrays(int(self.alt) if slot is None else slot), self.n_ids, context, weights)

    def term_scores(self, context: torch.Tensor) -> torch.Tensor:
        ctx = context.masked_fill((context < 0) | (context >= self.n_ids), -1)
        return self.item_item(ctx, self.age_weights(ctx))

    def term_arrays(self, slot: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Term `slot`'s A in CSR: (indptr (N + 1,), cols (nnz,), values (nnz,))."""
        return (self.alt_indptr, self.alt_cols, self.alt_values) if slot else (self.indptr, self.cols, self.values)

    @torch.no_grad()
    def topk(self, hidden, k: int, exclude=None, decode: DecodeConfig = DecodeConfig(),
             context: torch.Tensor | None = None, chunk_elems: int = 1 << 22) -> Ranking:
        """Exact top-k of log p_model + mix x item-item (every id scored), chunked over queries.
        While choose runs, every candidate (mix, decay) is ranked from the same network scores
        (one network pass, not one per candidate): the first candidate's Ranking is returned, each
        candidate's kept for choose. Where the term reaches few of the ids (a large vocabulary),
        a candidate's top-k is taken over those ids and the network's best others
        (term_sums.SparseSums, ranking.sparse_best), not over all N. Chunks hold 4M scores (16 MB):
        glibc maps larger blocks fresh from the OS at every allocation, and the page faults cost
        more than the scoring; but 32 queries at the least (ranking.chunk_queries), so that every
        id's output row is not read again for every few queries."""
        if context is None:
            raise ValueError("the hybrid head scores with the context: pass context (the query rows' ids)")
        v, w, n = hidden.mean(1), self.rows(), self.n_ids
        ctx = context.masked_fill((context < 0) | (context >= n), -1)  # (U, T) ids, -1 at specials
        if self._term_alone or (not self._grid and math.isinf(float(self.mix))):  # mix TERM_ALONE: the term alone
            return self._term_topk(ctx, k, exclude, decode, chunk_elems)
        every = self._grid or [(float(self.mix), float(self.decay), int(self.alt))]
        grid = [g for g in every if g[0] != TERM_ALONE]  # the term alone needs no network scores (below)

        def variants(a: int, b: int):  # one network pass per chunk, then each candidate's term added
            s, terms, sparse = self.log_probs(v[a:b], w), {}, {}
            mask_excluded(s, exclude[a:b] if exclude is not None else None)
            for mix, decay, slot in grid:
                if not mix:
                    yield s
                    continue
                if slot not in sparse:  # where few ids get a term, only they and the network's best are scored
                    sums = SparseSums(*self.term_arrays(slot), n, ctx[a:b])
                    best = sparse_best(s, sums, min(k, n))
                    if best is not None:  # the candidates, and the network's scores there (gathered once)
                        cand = torch.cat([best, sums.found], 1)
                        sparse[slot] = (sums, cand, s.gather(1, cand.clamp(min=0)))
                    else:
                        sparse[slot] = None
                if (decay, slot) not in terms:
                    weights = self.age_weights(ctx[a:b], decay)
                    terms[decay, slot] = (self.item_item(ctx[a:b], weights, slot) if sparse[slot] is None else
                                          F.pad(sparse[slot][0].at_found(weights), (min(k, n), 0)))
                if sparse[slot] is None:
                    yield s + mix * terms[decay, slot]
                else:
                    _, cand, base = sparse[slot]
                    yield cand, base + mix * terms[decay, slot]  # the same `cand` object: its exclusion once

        parts = iter(chunked_topk_variants(variants, len(grid), len(v), n, k, exclude, chunk_elems, like=v))
        work = torch.full((len(v),), n)
        rankings = [exact_ranking(*next(parts), k, decode.score, work) if mix != TERM_ALONE else
                    term_topk(*self.term_arrays(slot), n, ctx, decay, k, exclude, decode, chunk_elems)
                    for mix, decay, slot in every]
        if self._grid:
            for c, r in enumerate(rankings):
                self._parts[c].append(r.cpu())
        return rankings[0]

    def _term_topk(self, ctx: torch.Tensor, k: int, exclude, decode: DecodeConfig, chunk_elems: int) -> Ranking:
        """The "term alone" variant: score = the chosen term's sum over the context ids (U, T), with
        the chosen decay; every id scored, ties by the smaller id (a stable sort), the context and
        `exclude` ids never returned."""
        return term_topk(*self.term_arrays(int(self.alt)), self.n_ids, ctx, float(self.decay), k, exclude, decode,
                         chunk_elems)

    def choose(self, rank: Callable[[], Ranking], summarize: Callable[[Ranking], dict], select: str,
               decays: tuple[float, ...] = (1.0,)) -> Validation:
        """Set `mix` (and `decay`, and the term where two were built) to the candidate whose validation
        scores best by `select`: mix 0 (the pure model), the MIXES values x `decays` values x terms, and
        each (decay, term)'s term alone (mix TERM_ALONE, ranked as the "term alone" variant), so that
        the kept weights never score below the term alone (ties: the earlier: mix 0, first term, smaller
        mix, first decay, the term alone last). With a fixed cfg.mix only the decay and the term are
        chosen, and the term alone is no candidate (mix 0: nothing, the validation scores the network
        alone, so BEST is the network's best checkpoint). `rank()` ranks the validation queries once
        (every mix is scored in that pass, see topk, and the first time each setting's term alone,
        which no training moves), `summarize(ranking)` -> its metrics. -> the chosen candidate's
        metrics, with its mix, decay, term, the pure model's (mix 0) and the chosen setting's term
        alone's `select` scores."""
        fixed = self.cfg.mix  # a fixed weight (HybridConfig.mix): only the decay and the term are chosen
        mixes = MIXES[1:] if fixed is None else (fixed,) if fixed else ()
        grid = [(0.0, 1.0, 0)] + [(mix, decay, slot) for slot in range(self.term_slots)
                                  for decay in decays for mix in mixes]
        # each (decay, term)'s term alone, ranked in the same pass the first time (no training moves it)
        seen = self._alone_scores.setdefault(rank, {})
        alone = [s for s in dict.fromkeys((decay, slot) for _, decay, slot in grid[1:]) if s not in seen]
        every = grid + [(TERM_ALONE, decay, slot) for decay, slot in alone]
        self._grid, self._parts = every, [[] for _ in every]
        try:
            rank()
            results = [summarize(Ranking.concat(parts)) for parts in self._parts]
        finally:
            self._grid, self._parts = None, None
        seen.update(zip(alone, results[len(grid):]))
        allowed = range(len(grid)) if fixed is None else range(1, len(grid)) if fixed else range(1)
        options = [(grid[c] if c else (0.0, float(self.decay), int(self.alt)), results[c]) for c in allowed]
        if fixed is None:  # the term alone of each (decay, term), after the hybrids: ties go to them
            options += [((TERM_ALONE, decay, slot), self._term_summary(rank, summarize, decay, slot))
                        for decay, slot in dict.fromkeys((decay, slot) for _, decay, slot in grid[1:])]
        (mix, decay, slot), chosen = options[first_best([r for _, r in options], select)]
        self.mix.fill_(mix)
        self.decay.fill_(decay)
        self.alt.fill_(slot)
        return Validation(dict(chosen), dict(mix=mix, decay=decay, term=self.term_names()[slot]),
                          {"network": {select: results[0][select]},
                           "term": {select: self._term_summary(rank, summarize, decay, slot)[select]}})

    def _term_summary(self, rank: Callable[[], Ranking], summarize: Callable[[Ranking], dict], decay: float,
                      slot: int) -> dict:
        """The validation metrics of term `slot` alone at `decay` (the "term alone" variant). They do not
        depend on the network (the term alone ranks by the term, ties by the smaller id), so each setting
        is ranked once per validation queries (`rank`): in choose's pass, else in a pass of its own."""
        seen = self._alone_scores.setdefault(rank, {})
        if (decay, slot) not in seen:
            saved = float(self.decay), int(self.alt)
            self.decay.fill_(decay)
            self.alt.fill_(slot)
            try:
                with term_alone(self):
                    seen[decay, slot] = summarize(rank())
            finally:
                self.decay.fill_(saved[0])
                self.alt.fill_(saved[1])
        return seen[decay, slot]

    def parts_note(self, best: Validation, select: str, step: int | None = None) -> str | None:
        return parts_note(best, select, step, self.cfg.mix == 0)


_SHARED: dict | None = None  # inside shared_terms(): the terms built so far, by what they were built from
SHARED_MAX = 3  # terms kept at once


@contextlib.contextmanager
def shared_terms():
    """Within the block, a term asked for again with the same sets and settings is built once
    (train --members: every member fits the same term on the same training sets, and EASE's costs
    minutes at 50,000 ids). Callers get copies; the terms are dropped when the block ends."""
    global _SHARED
    outer = _SHARED
    _SHARED = {} if outer is None else outer
    try:
        yield
    finally:
        if outer is None:
            _SHARED = None


def _digest(sets) -> str:
    h = hashlib.blake2b(digest_size=16)
    for a in (sets.offsets, sets.ids):
        h.update(np.ascontiguousarray(a).view(np.uint8).data)
    return h.hexdigest()


def build_term(term: str, sets, n_ids: int, cfg: HybridConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Term `term` ("ease", "transition" or "cooccurrence") of the training sets (a SetArray; ordered,
    oldest id first, for the transition term) with cfg's neighbours (window, gap_decay) -> A in CSR:
    (indptr (N + 1,), cols (nnz,), values (nnz,)), each row sorted by id (the module docstring). Shared
    with the term baselines (evaluation/term_baselines.py). Inside shared_terms(), built once per sets
    and settings."""
    if _SHARED is None:
        return _build(term, sets, n_ids, cfg)
    key = (term, n_ids, cfg.neighbours, cfg.window, cfg.gap_decay, len(sets), _digest(sets))
    if key not in _SHARED:
        t0 = time.time()
        _SHARED[key] = _build(term, sets, n_ids, cfg), time.time() - t0
        while len(_SHARED) > SHARED_MAX:
            _SHARED.pop(next(iter(_SHARED)))
    else:
        log.info(f"the {term} term of these {len(sets):,} sets was built already: reused "
                 f"({_SHARED[key][1]:.0f} s saved)")
    return tuple(a.copy() for a in _SHARED[key][0])


def _build(term: str, sets, n_ids: int, cfg: HybridConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    indptr, cols, values = registry_build(term, sets, n_ids, cfg, "hybrid")
    return indptr, np.asarray(cols, np.int64), values
