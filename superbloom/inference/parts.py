"""What a model ranks by: the whole model, or one part of a hybrid (its network or its term).

The parts are those of a hybrid head, or of an ensemble with a term.

`eval` reports a hybrid beside its network alone and its term alone, and `train` ends saying which
part did the work. `rank_by` makes a loaded model rank by one of them from then on, so that `predict`
and `serve --part term` serve the item-item term where the network adds nothing. No torch here: the
command line reads PARTS for its --help.
"""
from __future__ import annotations

from .._bounds import ArgumentError

PARTS = ("whole", "network", "term")


def rank_by(model, part: str = "whole"):
    """`model` (a Predictor or an Ensemble) ranking from now on by `part`: "whole" (as trained), "network"
    (its network alone: a hybrid at weight 0, an ensemble's networks) or "term" (its item-item term alone,
    no network), the variants `eval` reports beside it (at weight 0 the whole model is its network
    alone). Where training said the network adds nothing, "term" serves what did the work.
    ArgumentError naming the parts the model has where it lacks `part`."""
    if part not in PARTS:
        raise ArgumentError("part", f"expected one of {', '.join(PARTS)}, got {part!r}")
    if part == "whole":
        return model
    variants = {v.part: v for v in model.variants().values()}  # heads/base.py Variant
    if part == "network" and "term" in variants and "network" not in variants:
        model._rank_as(part)  # a hybrid (or ensemble) at weight 0: the whole model is its network alone
        return model
    if part not in variants:
        has = [p for p in PARTS[1:] if p in variants]
        raise ArgumentError("part", f"this model has no {part} alone (it ranks by "
                            f"{', '.join(['whole', *has])}); a hybrid head with an item-item weight, or an ensemble "
                            "with a term, has a network alone and a term alone", f"--part {part}")
    model._rank_as(part, variants[part])
    return model
