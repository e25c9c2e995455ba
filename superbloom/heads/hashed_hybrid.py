"""The hashed hybrid head: the superbloom head plus a sparse item-item term, at every size.

    score(j | context) = gamma(log p_1(eta_1(j)), ..., log p_m(eta_m(j)))  +  mix * term(j | context)
    term(j | context)  = sum_{c in context} decay ** age(c) * A[c, j]

The network is the superbloom head (superbloom.py: the hashed softmax tied to the token embedding,
any alpha and m, trained exactly as that head; the term never enters training), so this is the
hybrid (hybrid.py, which needs the full softmax over unhashed ids) where hashing starts: millions of
ids. A is a sparse N x N matrix fixed from the training sets before training: the co-occurrence
cosine of every id's `neighbours` most frequent co-occurring ids (neighbours.py: built in blocks of
ids, bounded memory, bit for bit the hybrid's), EASE's `neighbours` largest weights where EASE fits
(up to itemitem.EASE_MAX_IDS ids, term auto), EASE on each id's neighbourhood above (term auto:
local_ease.py; the registry, terms.py), or, when asked, the directed transition term of
ordered data (hybrid.transition_pattern). `mix` (from hybrid.MIXES, mix 0 = the superbloom head)
and `decay` (sequence objectives: from their DECAYS) are chosen at every validation, and so is the
co-occurrence term's weighting (WEIGHTINGS: the cosine, the pair count, or the count times the
candidate's idf, all three over the same neighbour lists, recovered from the stored cosine and each
id's number of training sets `df`): the count or idf wins where popularity carries the signal (the
synthetic topics: validation picks the count, the hybrid's test rec@10 goes from 0.070 to 0.080 at 50
values per id), the cosine on real word sets.

Text (term `bigram`, heads/bigram.py): A has 2N rows, p(b | left a) and p(b | right c) from the
training rows' adjacent tokens, and a blank's context is its two neighbours [left, N + right]
(query_context); the term enters as log(1 + term / eps), 0 wherever the term is, so the top-k below stays
exact; the validation chooses eps in the place of the decay. At the 1M-id text vocabulary it fuses the
network with the bigram-context baseline (docs/results.md).

Top-k, exact, without scoring every id. Call T(q) the ids that the rows of A of query q's context
ids touch (at most |context| x neighbours). Then
  1. every id outside T(q) has term 0, so its score is its network score gamma(...) alone: Algorithm 1
     (decode.py) on the network, with T(q) added to the excluded ids, ranks exactly these ids;
  2. every id in T(q) is scored exactly: gamma of its m log-probabilities + mix x its term;
  3. the k best of the union of both lists (ties by the smaller id) is the answer.
Why it is exact: the ids split into T(q) and its complement. Every id of T(q) is in the union with
its exact score. An id outside T(q) that is not in list 1 scores (by the network alone, which is its
whole score) at most the k-th score of list 1 when that list is certified (decode.py, Lemma 1), and
list 1 is in the union, so at most the union's k-th score. Nothing here needs the term to be
positive: EASE's negative weights only lower ids of T(q), which are scored exactly; the argument only
needs that every id outside T(q) has term exactly 0. So the answer is certified whenever list 1 is,
and also when the union's k-th score reaches Algorithm 1's bound gamma(p^B) on every id outside the
beams (the same Lemma 1: a term that lifts ids of T(q) above the bound certifies an approximate
pass). With `decode.exact` Algorithm 1 widens its beam until list 1 is certified, so every answer is.
The scores returned are these sums (they can be > 0 and are not log-probabilities).

Variants (evaluation reports them beside the head on the same examples): "network alone" (mix 0:
the superbloom head's own ranking, Algorithm 1 without the term's exclusions) and "term alone" (the
term's ranking, ties broken by the network, the limit mix -> infinity: the ids with a positive term
first, then the untouched ids and those whose term is 0 by the network, then the negative ones;
exact by the same argument, the score returned is the term).

Validation (`choose`): one network pass for every candidate (mix, decay): the log-probabilities and
Algorithm 1 on the untouched ids are computed once per query batch, the term once per decay, and
each candidate only re-scores the touched ids and merges; mix 0 is the plain superbloom ranking, and
the term alone (mix TERM_ALONE) is a candidate too: before any training step (train validates then)
it is what the model serves, and no later checkpoint is kept below it.

The term's build: neighbours.py; the top-k's cost, measured: docs/architecture.md.

Storage: the pattern (indptr (N + 1,) int64, cols (nnz,) int32), its values (nnz,) float32, mix () and decay (),
and for the weightings df (N,) float32, n_sets (), scales (3,) and weighting () are buffers of the model.
The fixed ones (`fixed_buffers`: the pattern, its values, df) are written once per model folder
(storage/fixed.py: MODEL_DIR/fixed-<digest>.safetensors), the chosen ones (mix, decay, weighting) with each
checkpoint's model.safetensors; a model is built with an empty pattern and takes the saved one's size when
its weights are loaded, so load, resume and serve need nothing new.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
import torch
import torch.nn as nn

from .beam import DecodeConfig, decode_topk
from ..hashing.bloom import BloomHash
from ..storage.fixed import declare_fixed
from .neighbours import memberships
from .ranking import NEG_INF, Ranking, combine, excluded, topk_last
from .terms import auto_term, build_term, term_entry
from .hybrid import MIXES, age_weights  # recency weights
from .parts import (TERM_ALONE, first_best, hybrid_label, mixed, network_only, parts_note,  # the variants, the choice,
                    ranked_alongside, term_alone, term_only)  # the note
from .superbloom import SuperbloomHead
from .base import HeadBase, Validation
from .config import WEIGHTINGS, HashedHybridConfig
from .bigram import EPS as BIGRAM_EPS, neighbour_context


def resolve_term(term: str, n_ids: int) -> str:
    """auto -> EASE where it fits (dense N x N), else the registry's choice above (terms.auto_term)."""
    if term == "auto":
        return auto_term(n_ids)
    term_entry(term, n_ids, "hashed-hybrid")  # refused here, before any work, where it cannot serve
    return term


def touched_terms(indptr: torch.Tensor, cols: torch.Tensor, values: torch.Tensor, n_ids: int,
                  context: torch.Tensor, variants: list[tuple[float, tuple | None]]
                  ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The ids the term touches for each query and their term values, without a dense (U, N) row.

    context (U, T) ids, -1 padded, oldest first; A in CSR (indptr (N + 1,), cols, values).
    `variants`: [(decay, factors)], factors None or (row (N,), col (N,)): entry A[c, j] counts as
    A[c, j] x row[c] x col[j] (a weighting of the co-occurrence term).
    -> touched (U, W) ids, -1 padded, each row sorted by id; [term (U, W)] per variant: sum over the
    context of decay ** age x A[c, j] (0 at padding). The sums run over the context in its order,
    as hybrid.item_item's index_add_ into a dense row does."""
    u, t = context.shape
    dev = context.device
    flat = context.reshape(-1)
    real = flat >= 0
    rows = torch.arange(u, device=dev).repeat_interleave(t)[real]  # (R,) query of each context id
    ids = flat[real]
    starts, lens = indptr[ids], indptr[ids + 1] - indptr[ids]  # (R,)
    total = int(lens.sum()) if len(lens) else 0
    owner = torch.repeat_interleave(torch.arange(len(ids), device=dev), lens)  # (E,) context id of each entry
    offset = torch.arange(total, device=dev) - torch.repeat_interleave(lens.cumsum(0) - lens, lens)
    entry = starts[owner] + offset  # (E,) positions in cols / values
    key, inv = torch.unique(rows[owner] * n_ids + cols[entry], return_inverse=True)  # (K,) sorted (query, id)
    qrow = key // n_ids
    per_query = torch.bincount(qrow, minlength=u)  # (U,)
    width = int(per_query.max()) if u and len(key) else 0
    pos = torch.arange(len(key), device=dev) - (per_query.cumsum(0) - per_query)[qrow]
    touched = torch.full((u, width), -1, dtype=torch.long, device=dev)
    touched[qrow, pos] = key % n_ids
    done = {}
    for decay, factors in variants:
        if (decay, id(factors)) in done:
            continue
        vals = values[entry]
        if factors is not None:
            vals = vals * factors[0][ids[owner]] * factors[1][cols[entry].long()]
        w = age_weights(context, decay, values.dtype)
        if w is not None:
            vals = vals * w.reshape(-1)[real][owner]
        sums = torch.zeros(len(key), dtype=values.dtype, device=dev).index_add_(0, inv, vals)
        term = torch.zeros((u, width), dtype=values.dtype, device=dev)
        term[qrow, pos] = sums
        done[(decay, id(factors))] = term
    return touched, [done[(decay, id(factors))] for decay, factors in variants]


def merge_topk(lists: list[tuple[torch.Tensor, torch.Tensor]], k: int, keys: list[torch.Tensor] | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """The k best of the union of (ids (Q, *), scores (Q, *)) lists (no id in two lists; -1 ids
    carry -inf), ties by the smaller id; `keys` (same shapes as the scores): a primary sort key before
    the score (term alone), and then the keys of the k best are returned in place of their scores.
    -> (ids (Q, k), scores or keys (Q, k)), -1 / -inf padded."""
    ids = torch.cat([i for i, _ in lists], 1)
    scores = torch.cat([s for _, s in lists], 1)
    ids = ids.masked_fill(scores == NEG_INF, -1)
    big = torch.iinfo(torch.long).max
    order = torch.sort(ids.masked_fill(ids < 0, big), dim=1, stable=True).indices  # by id, -1 last
    order = order.gather(1, torch.sort(scores.gather(1, order), dim=1, descending=True, stable=True).indices)
    if keys is not None:
        scores = torch.cat(keys, 1).masked_fill(ids < 0, NEG_INF)
        order = order.gather(1, torch.sort(scores.gather(1, order), dim=1, descending=True, stable=True).indices)
    order = order[:, :k]
    ids, scores = ids.gather(1, order), scores.gather(1, order)
    if ids.shape[1] < k:
        pad = k - ids.shape[1]
        ids = torch.cat([ids, ids.new_full((len(ids), pad), -1)], 1)
        scores = torch.cat([scores, scores.new_full((len(scores), pad), NEG_INF)], 1)
    return ids, scores


class HashedHybridHead(SuperbloomHead):
    """The superbloom head + mix x a fixed sparse item-item term over the context (module docstring)."""

    uses_context = True
    # the added term changes the ranking: the allow-list goes through this head's own topk (base.py)
    topk_allowed = HeadBase.topk_allowed
    fixed_buffers = ("indptr", "cols", "values", "df")  # stored once per model folder (storage/fixed.py)

    def __init__(self, embedding: nn.Embedding, hashing: BloomHash, cfg: HashedHybridConfig, counts=None):
        super().__init__(embedding, hashing, cfg, counts)
        self.n_ids = hashing.n_ids
        self.term_name = resolve_term(cfg.term, self.n_ids)
        if cfg.weighting != "auto" and self.term_name != "cooccurrence":
            raise ValueError(f"weighting {cfg.weighting!r} weighs the co-occurrence term; term {cfg.term} is "
                             f"{self.term_name} at {self.n_ids:,} ids (pass --item-term cooccurrence)")
        self.bigram = self.term_name == "bigram"  # text: rows [left, N + right] of heads/bigram.py, log(1 + t / eps)
        rows = 2 * self.n_ids if self.bigram else self.n_ids
        self.register_buffer("indptr", torch.zeros(rows + 1, dtype=torch.long))
        self.register_buffer("cols", torch.zeros(0, dtype=torch.int32))  # ids < 2^31: half of int64
        self.register_buffer("values", torch.zeros(0))
        self.register_buffer("mix", torch.zeros(()))
        self.register_buffer("decay", torch.ones(()))
        # the co-occurrence term's weightings (WEIGHTINGS): sets holding each id, their number, the
        # scales of count and idf, the chosen one (empty df: the cosine only, e.g. an older model)
        self.register_buffer("df", torch.zeros(0))
        self.register_buffer("n_sets", torch.zeros(()))
        self.register_buffer("scales", torch.ones(len(WEIGHTINGS)))
        self.register_buffer("weighting", torch.zeros((), dtype=torch.long))
        declare_fixed(self, self.fixed_buffers)  # storage/fixed.py
        self._factor_cache = {}
        self._grid, self._parts = None, None  # choose's candidates and their rankings, while it runs
        self._term_alone = False  # the "term alone" variant, inside its `with`

    def fit(self, sets, ordered: bool = False) -> dict:
        """The item-item term from the training sets (a fresh run, before training); mix 0, decay 1.
        `ordered` changes nothing: one term is built (term auto never builds the hybrid's second,
        transition term on ordered data; ask for term transition). -> what config.json records."""
        t0 = time.time()
        indptr, cols, values = self._build_term(sets)
        dev = self.bias.device
        self.indptr = torch.from_numpy(np.ascontiguousarray(indptr, np.int64)).to(dev)
        self.cols = torch.from_numpy(np.ascontiguousarray(cols, np.int32)).to(dev)
        self.values = torch.from_numpy(np.ascontiguousarray(values, np.float32)).to(dev)
        self.mix = torch.zeros((), device=dev)
        self.decay = torch.ones((), device=dev)
        self.fit_weightings(sets)
        return {"item_item_values": len(cols), "neighbours": self.cfg.neighbours, "term": self.term_name,
                **({"weightings": [WEIGHTINGS[w] for w in self._weightings()]} if self.term_name == "cooccurrence" else {}),
                "seconds": round(time.time() - t0, 2)}

    def ranks_before_training(self) -> bool:
        """A built term: the term alone is a candidate of choose, ranking with no training."""
        return bool(self.values.numel())

    def before_training(self) -> None:
        """The term alone (mix TERM_ALONE), until the validation chooses."""
        if self.ranks_before_training():
            self.mix.fill_(TERM_ALONE)

    def fit_weightings(self, sets) -> None:
        """The co-occurrence term's df, number of sets and the count / idf scales from the training sets
        (the other terms: none); weighting = the config's, or the cosine until the validation chooses.
        fit calls it; called alone, it gives a model trained before the weightings its three (the
        stored cosine and neighbour lists are unchanged: a pair's count is recovered from them)."""
        dev = self.bias.device
        self._factor_cache = {}
        self.weighting.fill_(WEIGHTINGS.index(self.cfg.weighting) if self.cfg.weighting != "auto" else 0)
        if self.term_name != "cooccurrence":
            self.df = torch.zeros(0, device=dev)
            return
        df = np.bincount(memberships(sets, self.n_ids)[1], minlength=self.n_ids).astype(np.float32)
        self.df = torch.from_numpy(df).to(dev)
        self.n_sets.fill_(float(len(sets)))
        self.scales.fill_(1.0)
        means = np.zeros(len(WEIGHTINGS))
        indptr, cols, values = self.indptr.cpu(), self.cols.cpu(), self.values.cpu()
        raw = {w: self._raw_factors(w) for w in WEIGHTINGS}
        step = 1 << 22
        for a in range(0, len(cols), step):  # mean value of each weighting over the pairs, in chunks
            e = torch.arange(a, min(a + step, len(cols)))
            row = torch.searchsorted(indptr, e, right=True) - 1
            for i, w in enumerate(WEIGHTINGS):
                v = values[e] if raw[w] is None else values[e] * raw[w][0].cpu()[row] * raw[w][1].cpu()[cols[e].long()]
                means[i] += float(v.double().sum())
        if means[0] > 0:
            self.scales.copy_(torch.from_numpy(np.where(means > 0, means / means[0], 1.0)).float())
        self._factor_cache = {}

    def _raw_factors(self, w: str) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Weighting `w` as (row (N,), col (N,)) factors of the stored cosine (None: the cosine itself)."""
        if w == "cosine":
            return None
        root = self.df.clamp(min=1.0).sqrt()  # cosine x sqrt(df_c df_j) = count(c, j)
        if w == "count":
            return root, root
        return root, root * torch.log(self.n_sets.clamp(min=1.0) / self.df.clamp(min=1.0))

    def _factors(self, i: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """WEIGHTINGS[i]'s factors, divided by its scale (cached until the next fit or load)."""
        key = (i, self.df.device)  # .to(device) moves the buffers, not this cache
        if key not in self._factor_cache:
            raw = self._raw_factors(WEIGHTINGS[i])
            self._factor_cache[key] = None if raw is None else (raw[0], raw[1] / self.scales[i])
        return self._factor_cache[key]

    def _weightings(self) -> tuple[int, ...]:
        """The weightings the validation tries: all three for the co-occurrence term with weighting
        auto (and its df), else the one in use."""
        if self.term_name == "cooccurrence" and self.cfg.weighting == "auto" and len(self.df):
            return tuple(range(len(WEIGHTINGS)))
        return (int(self.weighting),)

    def _build_term(self, sets) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return build_term(self.term_name, sets, self.n_ids, self.cfg, "hashed-hybrid")

    def query_context(self, batch, elements: torch.Tensor) -> torch.Tensor:
        """The bigram term reads each blank's two neighbours (heads/bigram.py); the others, the row."""
        if self.bigram:
            return neighbour_context(batch.elems, elements, self.n_ids)
        return batch.context(elements)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        self._factor_cache = {}
        for name, empty in (("df", torch.zeros(0)), ("n_sets", torch.zeros(())), ("scales", torch.ones(len(WEIGHTINGS))),
                            ("weighting", torch.zeros((), dtype=torch.long))):
            state_dict.setdefault(prefix + name, empty)  # a model saved before the weightings: the cosine
        for name in ("indptr", "cols", "values", "df"):  # the saved pattern's size
            t = state_dict.get(prefix + name)
            if t is not None and tuple(t.shape) != tuple(getattr(self, name).shape):
                setattr(self, name, torch.zeros(t.shape, dtype=getattr(self, name).dtype, device=self.bias.device))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def fixed_weights(self) -> int:
        """The item-item values and their mix: counted with the model's parameters."""
        return int(self.values.numel()) + 1

    def variants(self) -> dict:
        """With an item-item weight: the network alone (mix 0) and the term alone; at weight 0 (the
        validation chose the network alone) the term alone beside it, once a term is built (fit)."""
        if not float(self.mix):
            return {"term alone": term_only(term_alone(self))} if self.values.numel() else {}
        return {"network alone": network_only(mixed(self, 0.0)), "term alone": term_only(term_alone(self))}

    def ranked_alongside(self):
        """The network alone and the term alone ranked in the hybrid's own passes, from one network
        pass (HeadBase.ranked_alongside; choose scores its candidates the same way)."""
        decay, w = float(self.decay), int(self.weighting)
        return ranked_alongside(self, (float(self.mix), decay, w),
                                {"network alone": (0.0, decay, w), "term alone": (TERM_ALONE, decay, w)})

    def describe(self) -> dict:
        out = {"name": self.cfg.name}
        if float(self.mix) or self.values.numel():  # a term built: reported beside the head at any weight
            out.update(item_mix=float(self.mix), item_term=self.term_name,
                       **({"item_eps": float(self.decay)} if self.bigram else {"item_decay": round(float(self.decay), 3)}))
            if self.term_name == "cooccurrence":
                out.update(item_weighting=WEIGHTINGS[int(self.weighting)])
        return out

    def label(self) -> str:
        return hybrid_label(self.describe()) if self.variants() else super().label()

    def term_weight(self) -> float:
        return float(self.mix)

    @torch.no_grad()
    def topk(self, hidden, k: int, exclude=None, decode: DecodeConfig = DecodeConfig(), context=None) -> Ranking:
        """Exact top-k of gamma(network) + mix x term (module docstring: Algorithm 1 on the untouched
        ids, the touched ids scored exactly, merged). While choose runs, every candidate (mix, decay)
        is ranked from the same network pass: the first candidate's Ranking is returned, each
        candidate's kept for choose."""
        if context is None:
            raise ValueError("the hashed-hybrid head scores with the context: pass context (the query rows' ids)")
        logp = self.log_probs(hidden)  # (Q, m, nb)
        grid = self._grid or [(float(self.mix), float(self.decay), int(self.weighting))]
        rankings = self._rank(logp, k, exclude, decode, context, grid)
        if self._grid:
            for c, r in enumerate(rankings):
                self._parts[c].append(r.cpu())
        return rankings[0]

    def _rank(self, logp, k, exclude, decode, context, grid) -> list[Ranking]:
        """One Ranking per (mix, decay, weighting) of `grid`, from one network pass `logp` (Q, m, nb)."""
        plain = None
        if any(g[0] == 0.0 for g in grid) and not self._term_alone:  # the superbloom head itself
            plain = decode_topk(logp, self.buckets, self.inverse, k, exclude, decode)
        if all(g[0] == 0.0 for g in grid) and not self._term_alone:
            return [plain for _ in grid]
        n = self.n_ids
        rows = self.indptr.numel() - 1  # the term's rows: N, or 2N for the bigram term
        ctx = context.masked_fill((context < 0) | (context >= rows), -1)  # (Q, T) term rows, -1 at specials
        # the bigram term: the grid's second value is its eps (no recency weights), the term log(1 + t / eps)
        variants = [(1.0 if self.bigram else decay, self._factors(w)) for _, decay, w in grid]
        touched, terms = touched_terms(self.indptr, self.cols, self.values, n, ctx, variants)  # (Q, W)
        if self.bigram:
            terms = [torch.log1p(t / eps) for t, (_, eps, _) in zip(terms, grid)]
        ex = touched if exclude is None else torch.cat([exclude, touched], 1)
        rest = decode_topk(logp, self.buckets, self.inverse, k, ex, decode)  # (Q, k) untouched ids, network alone
        invalid = (touched < 0) | excluded(touched, exclude)  # (Q, W)
        safe = touched.clamp(min=0)
        net = combine(decode.score, [logp[:, j].gather(1, self.buckets[j][safe].long()) for j in range(self.m)])
        net = net.masked_fill(invalid, NEG_INF)  # (Q, W) gamma of the touched ids
        bound = None
        out = []
        for (mix, _, _), term in zip(grid, terms):
            if mix == 0.0 and not self._term_alone:
                out.append(plain)
                continue
            if self._term_alone or mix == TERM_ALONE:  # the term first, the network breaking its ties (rest: term 0)
                ids, scores = merge_topk([(rest.ids, rest.scores), (touched, net)], k,
                                         keys=[torch.zeros_like(rest.scores), term.masked_fill(invalid, NEG_INF)])
                exact = rest.exact.clone()  # the returned scores are the terms: no bound to compare
            else:
                ids, scores = merge_topk([(rest.ids, rest.scores), (touched, net + mix * term)], k)
                if bound is None:
                    bound = self._bound(logp, rest, decode)
                exact = rest.exact | (scores[:, k - 1] >= bound)
            out.append(Ranking(ids, scores, exact, rest.beam.clone()))
        return out

    def _bound(self, logp, rest: Ranking, decode: DecodeConfig) -> torch.Tensor:
        """(Q,) gamma(p^B) for each query's beam B (decode.py, Lemma 1: no id outside the beams scores
        above it); +inf where list 1 is certified anyway (not needed) or B covers every bucket."""
        q, m, nb = logp.shape
        bound = torch.full((q,), float("inf"), dtype=logp.dtype, device=logp.device)
        rows = (~rest.exact & (rest.beam < nb)).nonzero().squeeze(1)
        if rows.numel():
            beam = rest.beam[rows].clamp(1, nb)
            top = topk_last(logp[rows], int(beam.max()))[0]  # (r, m, Bmax) sorted
            at = top.gather(2, (beam - 1)[:, None, None].expand(len(rows), m, 1)).squeeze(2)  # (r, m)
            bound[rows] = combine(decode.score, list(at.unbind(1)))
        return bound

    def choose(self, rank: Callable[[], Ranking], summarize: Callable[[Ranking], dict], select: str,
               decays: tuple[float, ...] = (1.0,)) -> Validation:
        """Set `mix` (and `decay`, and the co-occurrence term's `weighting`) to the candidate whose
        validation scores best by `select`: mix 0 (the superbloom head's own ranking), the MIXES x
        `decays` x weightings, and each setting's term alone (mix TERM_ALONE: the term first, the
        network breaking its ties), so the kept weights never score below the term alone (ties: the
        earlier: smaller mix, first decay, first weighting, the term alone last). `rank()` ranks the
        validation queries once (every candidate scored in that pass), `summarize(ranking)` -> its
        metrics. -> the chosen candidate's metrics, with its mix, decay, weighting, the pure model's
        (mix 0) and the chosen setting's term alone's `select` scores."""
        weightings = self._weightings()
        decays = BIGRAM_EPS if self.bigram else decays  # the bigram term's second setting is its eps
        grid = [(0.0, 1.0, int(self.weighting))] + [(mix, decay, w) for w in weightings for decay in decays
                                                    for mix in MIXES[1:]]
        # each setting's term alone, ranked in the same pass: candidates too (the chosen one's reported beside it)
        alone = list(dict.fromkeys([(TERM_ALONE, d, w) for _, d, w in grid[1:]]
                                   + [(TERM_ALONE, float(self.decay), int(self.weighting))]))
        self._grid, self._parts = grid + alone, [[] for _ in grid + alone]
        try:
            rank()
            ranked = [summarize(Ranking.concat(parts)) for parts in self._parts]
        finally:
            self._grid, self._parts = None, None
        by_setting = dict(zip(((d, w) for _, d, w in alone), ranked[len(grid):]))
        best = first_best(ranked, select)
        mix, decay, w = (grid + alone)[best] if best else (0.0, float(self.decay), int(self.weighting))
        self.mix.fill_(mix)
        self.decay.fill_(decay)
        self.weighting.fill_(w)
        settings = {"mix": mix, "term": self.term_name}
        if self.term_name == "cooccurrence":
            settings["weighting"] = WEIGHTINGS[w]
        settings["eps" if self.bigram else "decay"] = decay
        return Validation(dict(ranked[best]), settings,
                          {"network": {select: ranked[0][select]}, "term": {select: by_setting[decay, w][select]}})

    def parts_note(self, best: Validation, select: str, step: int | None = None) -> str | None:
        return parts_note(best, select, step)
