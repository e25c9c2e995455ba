"""The ranking toolbox every output head shares: the `Ranking` result, the score functions gamma,
context exclusion, and the one chunked exhaustive top-k.

Pure functions of tensors, on whatever device the tensors are on. Algorithm 1 (decode.py) and the
heads (heads/) build their answers from these pieces; nothing here imports a model.

gamma (Superbloom sec. 2.5, appendix C) combines the m per-map log-probabilities of an id into one
score; any function increasing in every coordinate works: "sum_log" (sum_j log p_j), "min", "max",
or a callable on a stacked (..., m) tensor. A head with a single distribution over ids applies
gamma to that one coordinate (the identity for the built-in ones).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from .decode_config import SCORES

NEG_INF = float("-inf")

ScoreFn = Callable[[torch.Tensor], torch.Tensor]  # (..., m) log-probs -> (...), increasing

# the built-in gammas as binary operations, folded left over the maps
_FOLDS = dict(zip(SCORES, (torch.add, torch.minimum, torch.maximum)))  # sum_log, min, max


def check_score(score: str | ScoreFn) -> None:
    if not callable(score) and score not in _FOLDS:
        raise ValueError(f"score must be one of {sorted(_FOLDS)} or a callable, got {score!r}")


def combine(score: str | ScoreFn, parts: list[torch.Tensor]) -> torch.Tensor:
    """gamma of per-map log-probs given as m tensors of one shape (...) -> (...).

    Built-in scores fold the m tensors left to right without stacking them (no (..., m) copy of N
    scores), so the same float operations run in the same order wherever gamma is computed; a user
    callable gets them stacked on a last axis."""
    if callable(score):
        return score(torch.stack(parts, -1))
    check_score(score)
    op, acc = _FOLDS[score], parts[0]
    for p in parts[1:]:
        acc = op(acc, p)
    return acc


def score_fn(score: str | ScoreFn) -> ScoreFn:
    """gamma as a function of a stacked (..., m) tensor."""
    check_score(score)
    return score if callable(score) else (lambda lp: combine(score, list(lp.unbind(-1))))


@dataclass
class Ranking:
    ids: torch.Tensor  # (Q, k) int64, best first; -1 where fewer than k ids could be ranked
    scores: torch.Tensor  # (Q, k) float gamma scores; -inf where ids is -1
    exact: torch.Tensor  # (Q,) bool: certified to be the exact top-k
    beam: torch.Tensor  # (Q,) int64: beam width B of the pass that produced the answer (superbloom head)
    # (the heads without hashing report their work instead: ids scored, or tree nodes expanded)

    def report(self, seconds: float) -> dict:
        """What an evaluation says of its decoding: the share of answers certified exact, the mean beam,
        and queries per second over `seconds`."""
        return {"certified_exact": float(self.exact.float().mean()), "mean_beam": float(self.beam.float().mean()),
                "queries_per_second": round(len(self.ids) / max(seconds, 1e-9), 1)}

    def select(self, rows: torch.Tensor) -> "Ranking":
        return Ranking(self.ids[rows], self.scores[rows], self.exact[rows], self.beam[rows])

    def assign(self, rows: torch.Tensor, other: "Ranking") -> None:
        self.ids[rows], self.scores[rows] = other.ids, other.scores
        self.exact[rows], self.beam[rows] = other.exact, other.beam

    def cpu(self) -> "Ranking":
        return Ranking(self.ids.cpu(), self.scores.cpu(), self.exact.cpu(), self.beam.cpu())

    @staticmethod
    def concat(parts: list["Ranking"]) -> "Ranking":
        return Ranking(*(torch.cat([getattr(p, f) for p in parts]) for f in ("ids", "scores", "exact", "beam")))

    @staticmethod
    def empty(k: int) -> "Ranking":
        z = torch.zeros(0, k, dtype=torch.long)
        return Ranking(z, z.float(), torch.zeros(0, dtype=torch.bool), torch.zeros(0, dtype=torch.long))


def topk_last(x: torch.Tensor, k: int, block: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, indices) of the k largest entries along the last axis, sorted, like torch.topk.

    For long rows it is two-stage: the maxima of blocks of `block` entries, the k best blocks
    (which hold the top k: a block outside them has k blocks whose maxima beat its best entry),
    then a top-k over those k * block entries (used when that is at most a quarter of the row).
    torch.topk on a CPU row of millions is about 50x slower than the block maxima it needs here."""
    n = x.shape[-1]
    k = min(k, n)
    if n <= 4 * k * block:
        return x.topk(k, dim=-1)
    tail = n % block
    blocks = x[..., :n - tail].unflatten(-1, (-1, block))  # (..., n // block, block)
    _, best = blocks.amax(-1).topk(k, dim=-1)  # (..., k) best blocks
    sub = blocks.gather(-2, best[..., None].expand(*best.shape, block)).flatten(-2)  # (..., k * block)
    if tail:
        sub = torch.cat([sub, x[..., n - tail:]], -1)
    vals, pos = sub.topk(k, dim=-1)
    in_blocks = pos < k * block
    blk = best.gather(-1, torch.where(in_blocks, pos // block, 0))
    return vals, torch.where(in_blocks, blk * block + pos % block, n - tail + pos - k * block)


def excluded(cand: torch.Tensor, exclude: torch.Tensor | None) -> torch.Tensor:
    """(Q, C) ids, (Q, X) ids to exclude (-1 padded) -> (Q, C) bool."""
    if exclude is None or exclude.shape[1] == 0:
        return torch.zeros_like(cand, dtype=torch.bool)
    ex = exclude.sort(dim=1).values
    pos = torch.searchsorted(ex, cand.contiguous()).clamp(max=ex.shape[1] - 1)  # a strided cand: a UserWarning
    return ex.gather(1, pos) == cand


def is_allowed(cand: torch.Tensor, allow: torch.Tensor | None) -> torch.Tensor:
    """ids (...), sorted unique allowed ids (A,) (None: every id) -> (...) bool: the id is in allow."""
    if allow is None:
        return torch.ones_like(cand, dtype=torch.bool)
    if allow.numel() == 0:
        return torch.zeros_like(cand, dtype=torch.bool)
    pos = torch.searchsorted(allow, cand).clamp(max=allow.numel() - 1)
    return allow[pos] == cand


def positions_in(allow: torch.Tensor, ids: torch.Tensor | None) -> torch.Tensor | None:
    """ids (Q, X) (-1 padded) -> their positions in the sorted allowed ids (A,), -1 where absent:
    an exclusion list in the coordinates of a scoring restricted to the allowed ids."""
    if ids is None or allow.numel() == 0:
        return None  # nothing is scored, nothing to exclude
    pos = torch.searchsorted(allow, ids).clamp(max=allow.numel() - 1)
    return torch.where((allow[pos] == ids) & (ids >= 0), pos, -1)


def mask_excluded(scores: torch.Tensor, exclude: torch.Tensor | None) -> torch.Tensor:
    """Scores (Q, N) of every id with the excluded ids (Q, X) (-1 padded) set to -inf, in place."""
    if exclude is not None and exclude.shape[1]:
        rows, cols = (exclude >= 0).nonzero(as_tuple=True)
        scores[rows, exclude[rows, cols]] = NEG_INF
    return scores


def pad_to_k(vals: torch.Tensor, ids: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top lists (Q, <=k) padded to k columns with -inf / -1."""
    if vals.shape[1] < k:
        extra = k - vals.shape[1]
        vals = torch.cat([vals, vals.new_full((len(vals), extra), NEG_INF)], 1)
        ids = torch.cat([ids, ids.new_full((len(ids), extra), -1)], 1)
    return vals, ids


# queries per chunk at the least, whatever chunk_elems says, while their scores stay under
# CHUNK_MAX_SCORES (128 MB): each chunk's scores come from one product with every id's output row
# (N x d), read from memory once per chunk. At 957,363 ids chunks of 4 queries (4M scores) read the
# 245 MB of rows once per 4 queries, and that product was 87% of an eval; 32 queries a chunk rank
# the same lists in 0.6x the time there, 0.92x at 287,851 ids (64: 1.2x there, the larger blocks
# cost more than the rows they save)
CHUNK_MIN_QUERIES = 32
CHUNK_MAX_SCORES = 1 << 25


def chunk_queries(n: int, chunk_elems: int) -> int:
    """Queries per chunk when n ids are scored: chunk_elems scores, or CHUNK_MIN_QUERIES queries while
    their scores stay under CHUNK_MAX_SCORES (module attributes, read at each call), 1 at the least."""
    n = max(1, n)
    return max(chunk_elems // n, min(CHUNK_MIN_QUERIES, CHUNK_MAX_SCORES // n), 1)


def chunked_topk(scores_of: Callable[[int, int], torch.Tensor], q: int, n: int, k: int,
                 exclude: torch.Tensor | None = None, chunk_elems: int = 1 << 20,
                 like: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The exhaustive top-k: score every one of n ids for q queries, about chunk_elems scores at a
    time (small blocks stay in cache, since scoring is memory-bound, and memory stays bounded).

    scores_of(a, b) -> (b - a, n) scores of queries a..b-1; exclude (q, X) ids (-1 padded) never
    returned. -> (vals, ids), each (q, min(k, n)), best first, ids -1 where the score is -inf.
    `like` gives the dtype and device of an empty answer (q = 0)."""
    return chunked_topk_variants(lambda a, b: iter([scores_of(a, b)]), 1, q, n, k, exclude, chunk_elems, like)[0]


def chunked_topk_variants(variants_of: Callable[[int, int], Iterator[torch.Tensor]], count: int, q: int, n: int,
                          k: int, exclude: torch.Tensor | None = None, chunk_elems: int = 1 << 20,
                          like: torch.Tensor | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """chunked_topk of `count` scorings of the same queries (e.g. one network pass, several weights of
    an added term): variants_of(a, b) yields `count` (b - a, n) score tensors, one at a time (one in
    memory at once), or for a variant whose top-k is known to lie among a few candidates, the pair
    (candidate ids (b - a, C) (-1 padded, C >= min(k, n)), their scores (b - a, C)): its top-k is
    taken over those alone (sparse_best); variants that yield the same candidate tensor
    (the same object) share its exclusion mask. -> [(vals, ids)] per variant, as chunked_topk's."""
    width = min(k, n)
    step = chunk_queries(n, chunk_elems)
    vals, ids = [[] for _ in range(count)], [[] for _ in range(count)]
    for a in range(0, q, step):
        b = min(q, a + step)
        ex = exclude[a:b] if exclude is not None else None
        masks: list[tuple[torch.Tensor, torch.Tensor]] = []  # (candidates, their mask) of this chunk
        for c, scores in enumerate(variants_of(a, b)):
            if isinstance(scores, tuple):
                cand, sc = scores
                drop = next((m for seen, m in masks if seen is cand), None)
                if drop is None:
                    drop = (cand < 0) | excluded(cand, ex)
                    masks.append((cand, drop))
                sc = sc.masked_fill(drop, NEG_INF)
                v, pos = sc.topk(width, dim=1)
                i = cand.gather(1, pos)
            else:
                v, i = topk_last(mask_excluded(scores, ex), width)
            vals[c].append(v)
            ids[c].append(i.masked_fill(v == NEG_INF, -1))
    if q == 0:
        like = like if like is not None else torch.zeros(0)
        empty = like.new_zeros(0, width), torch.zeros(0, width, dtype=torch.long, device=like.device)
        return [empty] * count
    return [(torch.cat(v), torch.cat(i)) for v, i in zip(vals, ids)]


# Below this many ids every id is scored: it is cheap there, and equal scores keep the order of the
# exhaustive ranking (topk_last's), as before the candidates (an ensemble of one hybrid ranks as it).
SPARSE_MIN_IDS = 1 << 16


def sparse_best(base: torch.Tensor, sums, k: int) -> torch.Tensor | None:
    """The k best ids of `base` (U, N) outside the ids a term reaches (its SparseSums, term_sums.py),
    (U, k): with the reached ids, the candidates for the exact top-k of base + any x that is 0 outside
    them (every other id scores below these k). None where scoring every id is as cheap (N under
    SPARSE_MIN_IDS, or k + Z over a quarter of N). `base` should hold -inf at excluded ids."""
    n = base.shape[1]
    if n < SPARSE_MIN_IDS or 4 * (k + sums.z) > n:
        return None
    return topk_last(sums.masked(base), k)[1]


def exact_ranking(vals: torch.Tensor, ids: torch.Tensor, k: int, score, work: torch.Tensor) -> Ranking:
    """The Ranking of an exact top list (Q, <=k) of log-probs from a head with a single distribution
    over ids (full, sampled, hierarchical): padded to k, flagged exact, scores mapped by gamma of
    that one coordinate (the identity for every built-in gamma), `work` (Q,) reported as `beam`."""
    ids = ids.masked_fill(vals == NEG_INF, -1)
    vals, ids = pad_to_k(vals, ids, k)
    check_score(score)
    if callable(score):
        vals = torch.where(ids >= 0, combine(score, [vals]), vals)
    q = len(ids)
    return Ranking(ids, vals, torch.ones(q, dtype=torch.bool, device=ids.device), work.to(ids.device).long())
