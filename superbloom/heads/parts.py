"""The parts of a hybrid head (hybrid.py, hashed_hybrid.py): its variants, their validation scores, the note.

A hybrid ranks by network + mix x an item-item term. Reports show each part alone on the same
examples: `mixed(head, 0)` is the network alone, `term_alone(head)` the term alone (the head's
`variants()`; `ranked_alongside` ranks some of them in the hybrid's own pass, from its network
scores, where the head's candidate grid can score them). The validation (the heads' `choose`)
picks the best candidate (`first_best`), the term alone (TERM_ALONE) among them, and
the end of training prints `parts_note`: the hybrid, its network alone and its term alone at the
kept checkpoint, naming the `eval --baselines` entry that ranks by the term (TERM_BASELINES) where
the network adds nothing.
"""
from __future__ import annotations

import contextlib

from .base import Validation, Variant
from .ranking import Ranking

# a candidate weight of the hybrids' validation (choose): the limit mix -> infinity, the term alone (the
# network, or the id, breaking its ties). A hybrid that keeps it serves its fitted term, certified exact,
# before its network has learned anything: BEST is never below the term alone on validation.
TERM_ALONE = float("inf")

# the `eval --baselines` entry that ranks as each term alone does (evaluation/term_baselines.py; a test
# checks that these are its names)
TERM_BASELINES = {"ease": "ease-term", "cooccurrence": "cooc-term", "transition": "transition"}


def network_only(context) -> Variant:
    """The variant of a hybrid (or an ensemble with a term) that ranks by its network alone."""
    return Variant("network_only", "network only", "network", "the same model at mix 0", context)


def term_only(context) -> Variant:
    """The variant that ranks by the item-item term alone, without the network."""
    return Variant("term_only", "term only", "term", "its item-item term's ranking without the network", context)


def hybrid_label(describe: dict) -> str:
    """A hybrid's row in reports, from its describe(): the term, its weight and its decay (eps for
    the bigram term)."""
    setting = (f"eps {describe['item_eps']:g}" if "item_eps" in describe
               else f"decay {describe.get('item_decay', 1.0):g}")
    return f"hybrid ({describe.get('item_term', 'term')} x {describe.get('item_mix', 0.0):g}, {setting})"


def parts_note(best: Validation, select: str, step: int | None = None, unmixed: bool = False) -> str | None:
    """The line the end of training prints for a hybrid (HeadBase.parts_note): at the kept checkpoint
    (at `step`), the validation `select` of the hybrid, of its network alone and of its term alone;
    where the hybrid is not above its term alone there, it says so, names `--part term`
    (inference/parts.py) and the baseline that ranks by the term with no training. `unmixed`: the
    weight is fixed at 0 (HybridConfig.mix). None for a checkpoint validated before the term alone
    was scored there."""
    hybrid = best.scores.get(select)
    pure, term = (best.parts.get(part, {}).get(select) for part in ("network", "term"))
    if hybrid is None or pure is None or term is None:
        return None
    name, mix = best.settings.get("term", "item-item"), float(best.settings.get("mix", 0.0))
    where = f"at BEST (step {step})" if step is not None else "at the kept checkpoint"
    if unmixed:
        line = (f"{where}, validation {select}: the network alone {pure:.3f} (the {name} term is not mixed in: "
                f"weight fixed at 0); the {name} term alone {term:.3f}")
    elif mix == TERM_ALONE:
        line = (f"{where}, validation {select}: the {name} term alone {term:.3f}, kept as the model (weight "
                f"TERM_ALONE: the term ranks, the network only breaks its ties); its network alone {pure:.3f}")
    else:
        line = (f"{where}, validation {select}: the hybrid {hybrid:.3f} (the {name} term at weight {mix:g}); "
                f"its network alone {pure:.3f}; its term alone {term:.3f}")
    if mix == TERM_ALONE and pure <= term:
        baseline = TERM_BASELINES.get(name)
        line += (f". On these validation sets the network adds nothing over the {name} term (yet)"
                 + (f"; `superbloom eval MODEL DATA --baselines {baseline}` ranks by that term with no training"
                    if baseline else ""))
    elif max(hybrid, pure) <= term:
        baseline = TERM_BASELINES.get(name)
        line += (f". On these validation sets the network adds nothing over the {name} term: "
                 "`superbloom predict` / `serve MODEL --part term` rank by it alone"
                 + (f", and `superbloom eval MODEL DATA --baselines {baseline}` ranks by that term with no training"
                    if baseline else ""))
    return line


def first_best(results: list[dict], select: str) -> int:
    """Index of the candidate whose metrics score highest by `select` (ties: the earlier one)."""
    best = 0
    for c, r in enumerate(results):
        if r[select] > results[best][select]:
            best = c
    return best


@contextlib.contextmanager
def mixed(head, mix: float):
    """A hybrid head (hybrid.py, hashed_hybrid.py) with its item-item weight set to `mix` for the block (restored after)."""
    saved = float(head.mix)
    head.mix.fill_(mix)
    try:
        yield head
    finally:
        head.mix.fill_(saved)


@contextlib.contextmanager
def ranked_alongside(head, current: tuple, extra: dict[str, tuple]):
    """HeadBase.ranked_alongside for a hybrid with a candidate grid (`_grid`, `_parts`, as choose
    uses): the block's rank passes score `current` (the head's own (mix, ...) setting: its returned
    Ranking) and each `extra` name's grid entry from the same network scores; at the end the dict holds
    name -> Ranking of those ranked. Nothing alongside at mix 0 (no variants), inside the term alone,
    or inside choose."""
    out: dict = {}
    if not float(head.mix) or head._term_alone or head._grid is not None:
        yield out
        return
    names = list(extra)
    head._grid = [current] + [extra[name] for name in names]
    head._parts = [[] for _ in head._grid]
    try:
        yield out
        for name, parts in zip(names, head._parts[1:]):
            if parts:  # none ranked (no queries, or not through topk): the variant's own pass ranks it
                out[name] = Ranking.concat(parts)
    finally:
        head._grid, head._parts = None, None


@contextlib.contextmanager
def term_alone(head):
    """A hybrid head (hybrid.py, hashed_hybrid.py) ranking by its chosen item-item term alone (no network score) for the block."""
    saved = head._term_alone
    head._term_alone = True
    try:
        yield head
    finally:
        head._term_alone = saved
