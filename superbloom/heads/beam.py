"""Algorithm 1 of Superbloom (sec. 2.5, appendix C): m hashed distributions -> ranked ids.

Pure functions of tensors: log-probabilities per map `logp` (Q, m, n_buckets), the hash tables
`buckets` (m, N) and `inverse` (m, n_buckets, alpha) from hashing.BloomHash. No model import; the
result type, gamma and exclusion come from ranking.py, shared with the other heads.

For each map j take the B buckets with the highest p_j; every id in those buckets is a candidate;
candidates are scored with gamma(rho(s)), rho(s) = (log p_j(eta_j(s)))_j, for any gamma that is
increasing in every coordinate ("sum_log" = sum_j log p_j, "min", "max", or a callable on a
(..., m) tensor). An id that is *not* a candidate has p_j(eta_j(s)) <= p_j^B for every j, where
p_j^B is the B-th largest value of p_j, so gamma(s) <= gamma(p^B) (Lemma 1). Hence the top-k is
certified exact when the k-th best candidate score is >= gamma(p^B).

Exact mode widens the beam of each uncertified query to the paper's B*: the smallest B' with
gamma(p^B') <= the k-th score found so far (rounded up to a power of two to batch queries), which
is guaranteed to certify; when that many candidates would cost as much as scoring everything, it
scores everything (`exhaustive_topk`, also the reference in tests). B* is found from partial top-T
lists of each map (T growing by 4x), not by sorting whole maps, so a certified query never does
O(N) work.

Cost of one pass: O(m * n_buckets) to find the beams (a two-stage top-k: block maxima, then the
best blocks) + O(m * B * alpha) candidates, against O(m * N) for exhaustive scoring.

Allow-lists (`allow`, sorted unique ids (A,), one list for every query): only allowed ids are
candidates, and Lemma 1 is unchanged (an allowed id outside the beams is still bounded by
gamma(p^B)), so the certificate means exact among the allowed ids. When the allowed ids are no more
than one pass's candidates (A <= m * B * alpha), or a small share of all ids (A <= N * DIRECT_SHARE:
a sparse list leaves few allowed ids in each beam, so certifying needs a wide one), they are scored
directly instead (always exact, O(m * A) per query).
"""
from __future__ import annotations

import torch

from .decode_config import DecodeConfig  # noqa: F401  (its home is decode_config.py: no torch there)
from .ranking import (NEG_INF, Ranking, check_score, chunked_topk, combine, excluded, pad_to_k, positions_in,
                      topk_last)


# allowed ids at most this share of N are scored directly. Measured (1M ids, alpha 50, m 2, 16 peaked
# random queries, exact top-10, a busy shared 2-core CPU): A = 5% of N: Algorithm 1 55 ms, direct 12 ms; A = 50%:
# Algorithm 1 29 ms, direct 38 ms; no allow-list: Algorithm 1 14 ms, scoring all 1M ids 119 ms.
DIRECT_SHARE = 1 / 16


def beam_pass(logp, buckets, inverse, k: int, beam: int, exclude=None, score="sum_log", allowed=None) -> Ranking:
    """One pass of Algorithm 1 with beam width `beam` for every query, with its certificate; only ids
    with allowed[id] (a (N,) bool mask, None: all) are candidates."""
    check_score(score)
    q, m, nb = logp.shape
    beam = max(1, min(beam, nb))
    top_v, top_b = topk_last(logp, beam)  # (Q, m, B)
    alpha = inverse.shape[2]
    dev = logp.device
    rows = (top_b + nb * torch.arange(m, device=dev)[None, :, None]).flatten()  # (Q*m*B,) rows of inverse
    cand = inverse.view(m * nb, alpha).index_select(0, rows).view(q, m, beam * alpha).long()  # (Q, m, A) ids, A = B*alpha
    safe = cand.clamp(min=0)
    # b[i][:, j]: bucket under map i of the ids of map j's beam (under its own map: the beam bucket)
    b = [torch.stack([top_b[:, j, :, None].expand(q, beam, alpha).reshape(q, -1) if i == j
                      else buckets[i].index_select(0, safe[:, j].flatten()).view(q, -1).long() for j in range(m)], 1)
         for i in range(m)]  # m x (Q, m, A)
    # an id in the beams of several maps is scored once: in block j it is a duplicate if an earlier map has it
    in_beam = torch.zeros(q, m, nb, dtype=torch.bool, device=dev).scatter_(2, top_b, True)
    dup = torch.zeros(q, m, beam * alpha, dtype=torch.bool, device=dev)
    for j in range(1, m):
        for i in range(j):
            dup[:, j] |= in_beam[:, i].gather(1, b[i][:, j])
    cand, b = cand.flatten(1), [x.flatten(1) for x in b]  # (Q, C), C = m*A
    invalid = (cand < 0) | dup.flatten(1) | excluded(cand, exclude)
    if allowed is not None:
        invalid |= ~allowed[safe.flatten(1)]
    s = combine(score, [logp[:, j].gather(1, b[j]) for j in range(m)]).masked_fill(invalid, NEG_INF)  # (Q, C)
    vals, pos = s.topk(min(k, s.shape[1]), dim=1)
    ids = cand.gather(1, pos).masked_fill(vals == NEG_INF, -1)
    vals, ids = pad_to_k(vals, ids, k)
    if beam >= nb:  # every id was scored
        exact = torch.ones(q, dtype=torch.bool, device=logp.device)
    else:  # k-th score vs. the bound gamma(p^B) on every unscored id
        exact = vals[:, k - 1] >= combine(score, list(top_v[:, :, -1].unbind(1)))
    return Ranking(ids, vals, exact, torch.full((q,), beam, dtype=torch.long, device=logp.device))


def exhaustive_topk(logp, buckets, k: int, exclude=None, score="sum_log", chunk_elems: int = 1 << 20,
                    allow=None) -> Ranking:
    """Score every id (the reference), or every id of `allow` (A,): gamma of each id's m buckets, via
    ranking.chunked_topk."""
    check_score(score)
    q, m, nb = logp.shape
    cols = buckets if allow is None else buckets.index_select(1, allow)  # (m, N) or (m, A)

    def scores_of(a: int, b: int) -> torch.Tensor:  # (b - a, N) or (b - a, A)
        return combine(score, [logp[a:b, j].index_select(1, cols[j]) for j in range(m)])

    ex = exclude if allow is None else positions_in(allow, exclude)
    vals, ids = chunked_topk(scores_of, q, cols.shape[1], k, ex, chunk_elems, like=logp)
    if allow is not None and allow.numel():
        ids = torch.where(ids >= 0, allow[ids.clamp(min=0)], -1)
    vals, ids = pad_to_k(vals, ids, k)
    return Ranking(ids, vals, torch.ones(q, dtype=torch.bool, device=logp.device),
                   torch.full((q,), nb, dtype=torch.long, device=logp.device))


def sufficient_beam(logp: torch.Tensor, kth: torch.Tensor, score="sum_log", start: int = 1) -> torch.Tensor:
    """Paper's B*: smallest B' with gamma(p^B') <= kth, per query. (Q, m, nb), (Q,) -> (Q,).

    gamma(p^B') is non-increasing in B', so it is read off the sorted top-T of each map, T = 4 *
    start, 16 * start, ... until it drops to kth (or T reaches nb, where B* = nb at most)."""
    q, m, nb = logp.shape
    need = torch.full((q,), nb, dtype=torch.long, device=logp.device)
    rows = torch.arange(q, device=logp.device)
    t = max(16, 4 * start)
    while rows.numel():
        t = min(t, nb)
        top = topk_last(logp[rows], t)[0]  # (q', m, T), sorted
        bounds = combine(score, list(top.unbind(1)))  # (q', T): bound after a beam of 1..T
        ok = bounds <= kth[rows, None]
        hit = ok.any(1)
        need[rows[hit]] = ok[hit].float().argmax(1) + 1
        rows = rows[~hit]
        if t >= nb:
            break
        t *= 4
    return need


def decode_topk(logp, buckets, inverse, k: int, exclude=None, cfg: DecodeConfig = DecodeConfig(),
                allow=None) -> Ranking:
    """Top-k by the method `cfg` names: Algorithm 1 (approximate or exact) or exhaustive scoring;
    only ids of `allow` (sorted (A,), None: all) are returned."""
    if cfg.exhaustive:
        return exhaustive_topk(logp, buckets, k, exclude, cfg.score, allow=allow)
    return beam_topk(logp, buckets, inverse, k, cfg.beam, exclude, cfg.score, cfg.exact, allow)


def beam_topk(logp, buckets, inverse, k: int, beam: int | None = None, exclude=None, score="sum_log",
              exact: bool = False, allow=None) -> Ranking:
    """Top-k ids per query by Algorithm 1. beam defaults to k (appendix B: B = k suffices); a query
    whose beam holds fewer than k ids that are not excluded gets it doubled until it does.

    logp (Q, m, nb): log p_j over map j's buckets; exclude (Q, X) ids never returned (context);
    allow (A,) sorted unique ids, the only ones returned (None: every id; module docstring).
    """
    q, m, nb = logp.shape
    n, alpha = buckets.shape[1], inverse.shape[2]
    beam = beam or k
    if allow is not None:
        if allow.numel() <= max(m * beam * alpha, n * DIRECT_SHARE):  # few allowed ids: score them all
            return exhaustive_topk(logp, buckets, k, exclude, score, allow=allow)
        n = allow.numel()  # exact mode scores the allowed ids directly once that is cheaper
    # (N,) bool, once per call: a lookup per candidate (a binary search in allow costs more than this)
    allowed = None if allow is None else torch.zeros(buckets.shape[1], dtype=torch.bool,
                                                     device=logp.device).index_fill_(0, allow, True)
    res = beam_pass(logp, buckets, inverse, k, beam, exclude, score, allowed)
    b = beam
    while True:  # a beam that holds fewer than k ids not excluded is doubled until it does
        short = ((res.ids[:, -1] < 0) & (res.beam < nb)).nonzero().squeeze(1)
        if not short.numel():
            break
        b = min(2 * b, nb)
        res.assign(short, beam_pass(logp[short], buckets, inverse, k, b,
                                    exclude[short] if exclude is not None else None, score, allowed))
    for attempt in range(2):  # B* certifies in one round; a second round only guards rounding
        if not exact or bool(res.exact.all()):
            break
        rows = (~res.exact).nonzero().squeeze(1)
        need = sufficient_beam(logp[rows], res.scores[rows, k - 1], score, start=beam)
        runs = torch.clamp(2 ** torch.ceil(torch.log2(need.double())).long(), max=nb)
        for b in runs.unique().tolist():
            sel = rows[runs == b]
            ex = exclude[sel] if exclude is not None else None
            if m * b * alpha >= n or attempt == 1:  # as costly as scoring everything: do that
                sub = exhaustive_topk(logp[sel], buckets, k, ex, score, allow=allow)
            else:
                sub = beam_pass(logp[sel], buckets, inverse, k, b, ex, score, allowed)
            res.assign(sel, sub)
    return res
