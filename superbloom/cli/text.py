"""Commands of the text model (Superbloom sec. 4, appendix E): fill.

    superbloom fill MODEL_DIR "Miles Davis is a jazz musician, he is similar to [MASK] ." [--k 10] [--json]

Several texts may be given (each ranked in one model call) and a text may hold several blanks
(`[MASK]`, or numbered `[MASK1]`, `[MASK2]` as in the paper).
"""
from __future__ import annotations

import argparse
import json

from . import checks
from .flags import POS_INT, add_decode_args, add_device_arg, decode_config


def register(sub):
    p = sub.add_parser("fill", help="fill in the blanks ([MASK]) of a sentence with a text model",
                       description="Top-k tokens (unigrams and bigrams such as miles_davis) for every [MASK] of "
                                   "each text, from a model trained with --objective text-mlm on a prepare-text "
                                   "dataset. The text is tokenised like the training data.")
    p.add_argument("model", help="model directory (trained with --objective text-mlm)")
    p.add_argument("texts", nargs="+", metavar="TEXT", help="a sentence with one or more [MASK]")
    p.add_argument("-k", "--k", type=POS_INT, default=10, help="tokens per blank (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print one JSON object (the shape of POST /v1/fill's answer)")
    p.add_argument("--scores", action=argparse.BooleanOptionalAction, default=True,
                   help="list each token's score; --no-scores: the tokens only (default %(default)s)")
    p.add_argument("--threads", type=checks.THREADS, default=0, help="torch CPU threads, 0: torch's default (default 0)")
    add_device_arg(p)
    add_decode_args(p)
    p.set_defaults(func=cmd_fill)


def cmd_fill(args):
    from ..inference.fill import Filler, format_fill

    filler = Filler.load(args.model, args.device)
    results = filler.fill_many(args.texts, args.k, decode_config(args))
    if args.json:
        print(json.dumps({"results": [r.to_json() for r in results]}, indent=2))
        return
    print("\n\n".join(format_fill(r, args.scores) for r in results))
