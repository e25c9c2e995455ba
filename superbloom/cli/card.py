"""The card command: write a model directory's README.md (its model card) again from its files."""
from __future__ import annotations


def register(sub):
    p = sub.add_parser("card", help="write a model directory's model card (README.md) from its files",
                       description=cmd_card.__doc__)
    p.add_argument("model", help="model directory (any kind: train, embed-train, textclass-train, demo)")
    p.add_argument("--print", dest="show", action="store_true", help="print the card instead of writing it")
    p.set_defaults(func=cmd_card)


def cmd_card(args):
    """Render MODEL/README.md, the model card every trainer writes (data summary, recipe and preset,
    training summary, the evaluation beside its baselines when MODEL/eval.json holds one, how to load
    and serve it, limitations), from the directory's files alone. `superbloom eval MODEL DATA` writes
    MODEL/eval.json and the card itself; this writes the card again (after a copy, an edit)."""
    from ..storage.kinds import read_kind
    from ..training.card import render_card, write_card

    read_kind(args.model)  # not a model directory: one line saying so
    if args.show:
        print(render_card(args.model))
        return 0
    print(f"wrote {write_card(args.model)}")
    return 0
