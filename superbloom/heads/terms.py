"""The registry of item-item terms the hybrid heads (hybrid.py, hashed_hybrid.py) build before training.

Each entry: its builder (training sets, number of ids, the head's config -> A in CSR: indptr (N + 1,),
cols (nnz,), values (nnz,), each row sorted by id, no diagonal), the most ids it fits (0: any), the
heads it serves, whether it is for ordered data only, and an estimate of its peak memory, so that
`term auto` picks by size and a term that cannot fit is refused before any work:

  ease          EASE's weights (itemitem.ease_weights, dense N x N), the `neighbours` largest per row
  local-ease    EASE on each id's neighbourhood (local_ease.py): a ridge regression per id over its
                LOCAL_K most co-occurring ids, the `neighbours` largest per row; bounded memory
  cooccurrence  the cosine of every id's `neighbours` most frequent co-occurring ids (neighbours.py)
  transition    ordered data: log(1 + how often j follows c within `window` ids) (itemitem.py)
  bigram        text, the hashed hybrid only: p(b | left a), p(b | right c) (bigram.py)

auto: EASE up to AUTO_EASE_MAX_IDS ids, local EASE above, the strongest closed form measured there
(above SANSA and the cosine term at 1M real ids, in less memory: docs/results.md,
docs/guides/millions.md). With ordered training data the hybrid builds the transition term beside
it and the validation chooses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .itemitem import EASE_FLOAT64_MAX_IDS, EASE_MAX_IDS, ease_weights, largest_pattern, transition_pattern

# local EASE's settings, chosen on validation sets carved from the training sets (benchmarks/scale/terms.py):
# neighbourhoods by count (the validation's choice at 1M ids: docs/results.md)
LOCAL_K = 32  # the neighbourhood of each target: its 32 most co-occurring ids (G read from the same lists)
LOCAL_LAM = 50.0  # the ridge
LOCAL_BY = "count"  # neighbourhoods by count
AUTO_EASE_MAX_IDS = EASE_MAX_IDS  # term auto: dense EASE up to here, AUTO_ABOVE above
AUTO_ABOVE = "local-ease"


@dataclass(frozen=True)
class Term:
    """One item-item term of the registry (module docstring)."""
    build: Callable  # (sets, n_ids, cfg) -> (indptr, cols, values)
    about: str
    max_ids: int = 0  # more ids than this: refused (0: no limit)
    why_max: str = ""
    ordered: bool = False  # a term of ordered data (sequences)
    heads: tuple[str, ...] = ("hybrid", "hashed-hybrid")
    memory: Callable[[int, int, int], float] | None = None  # (n_ids, links, neighbours) -> peak bytes, estimated


def _ease(sets, n_ids: int, cfg):
    b = ease_weights(sets, n_ids)  # (N, N) float32, zero diagonal
    indptr, cols = largest_pattern(b, cfg.neighbours)
    values = b[np.repeat(np.arange(n_ids), np.diff(indptr)), cols]
    return indptr, cols, values


def _local_ease(sets, n_ids: int, cfg):
    from .local_ease import local_ease
    return local_ease(sets, n_ids, LOCAL_K, LOCAL_LAM, by=LOCAL_BY, keep=cfg.neighbours, progress=n_ids >= 100_000)


def _cooccurrence(sets, n_ids: int, cfg):
    # in blocks of ids, never the (N, N) co-occurrence (neighbours.py): the same term, bit for bit, as
    # neighbour_pattern + cooccurrence_cosine, which held two X^T X (287,851 ids: 14 GB at the peak)
    from .neighbours import cooccurrence_neighbours
    indptr, cols, values = cooccurrence_neighbours(sets, n_ids, cfg.neighbours)
    return indptr, cols.astype(np.int64), values


def _transition(sets, n_ids: int, cfg):
    return transition_pattern(sets, n_ids, cfg.neighbours, cfg.window, cfg.gap_decay)


def _bigram(sets, n_ids: int, cfg):
    from .bigram import bigram_pattern
    return bigram_pattern(sets, n_ids, cfg.neighbours)


def _ease_memory(n: int, links: int, neighbours: int) -> float:
    return n * n * (12 if n <= EASE_FLOAT64_MAX_IDS else 4) * 1.1


def _local_memory(n: int, links: int, neighbours: int) -> float:
    # the memberships (~30 bytes a link), the lists, neighbourhoods and solutions and the merge of 2 N k
    # (row, column) keys (~80 bytes per neighbourhood entry at the peak), the result (12 bytes a value)
    # and the 268 MB scratch: 1M ids, 12.4M links, k 32, 200 values: 5.6 GB (measured: 5.15 GB peak RSS)
    return 30 * links + n * LOCAL_K * 80 + n * neighbours * 12 + 2.7e8


def _lists_memory(n: int, links: int, neighbours: int) -> float:
    return 30 * links + n * neighbours * 16


TERMS: dict[str, Term] = {
    "ease": Term(_ease, "EASE's weights, dense N x N", EASE_MAX_IDS, "EASE is dense (N x N)", memory=_ease_memory),
    "local-ease": Term(_local_ease, "EASE on each id's neighbourhood", memory=_local_memory),
    "cooccurrence": Term(_cooccurrence, "the co-occurrence cosine on each id's neighbours", memory=_lists_memory),
    "transition": Term(_transition, "the directed transition term of ordered data", ordered=True,
                       memory=_lists_memory),
    "bigram": Term(_bigram, "text: the two neighbours' bigram term", heads=("hashed-hybrid",), memory=_lists_memory),
}


def auto_term(n_ids: int) -> str:
    """The unordered term `term auto` builds for `n_ids` ids (module docstring)."""
    return "ease" if n_ids <= AUTO_EASE_MAX_IDS else AUTO_ABOVE


def term_entry(term: str, n_ids: int, head: str = "hybrid") -> Term:
    """Term `term`'s entry, refused (ValueError) where it does not serve `head` or exceeds its size."""
    if term not in TERMS:
        raise ValueError(f"unknown item-item term {term!r}; choose from {sorted(TERMS)} or auto")
    entry = TERMS[term]
    if head not in entry.heads:
        raise ValueError(f"the {term} term is the {' / '.join(entry.heads)} head's, not the {head} head's")
    if entry.max_ids and n_ids > entry.max_ids:
        raise ValueError(f"{head} term {term}: {entry.why_max}; {n_ids:,} ids exceed the {entry.max_ids:,} limit "
                         "(use --item-term local-ease, cooccurrence or auto)")
    return entry


def build_term(term: str, sets, n_ids: int, cfg, head: str = "hybrid"):
    """Term `term` of the training sets with cfg's settings -> A in CSR (indptr, cols, values)."""
    return term_entry(term, n_ids, head).build(sets, n_ids, cfg)


def memory_estimate(term: str, n_ids: int, links: int, neighbours: int = 200) -> float:
    """Term `term`'s estimated peak bytes while it is built (0 where the entry gives none)."""
    entry = TERMS[term]
    return float(entry.memory(n_ids, links, neighbours)) if entry.memory else 0.0
