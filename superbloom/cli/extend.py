"""The extend command: add ids to a trained model's vocabulary without resizing a table (extend.py)."""
from __future__ import annotations

import json

from ..hashing.config import ExtendConfig
from .flags import NONNEG_INT, default_of


def register(sub):
    p = sub.add_parser("extend", help="add new ids to a trained model (no table grows)",
                       description="Give each new id (one per line of NEW_IDS) one of the least-filled buckets of "
                                   "every hash map, never two ids the same m buckets, and write a new model directory "
                                   "whose weight tables keep their shapes; the new ids are predictable at once and "
                                   "are fine-tuned with `superbloom train DATA --out NEW_DIR --resume --steps N` "
                                   "(--steps counts from the start of the run). Needs a hashed model (m >= 2) with "
                                   "the superbloom head.")
    p.add_argument("model", help="model directory")
    p.add_argument("new_ids", help="text file, one new id per line (ids already in the vocabulary are skipped "
                                   "and reported)")
    p.add_argument("--out", required=True, help="new model directory to write (must not exist, or be empty)")
    p.add_argument("--seed", type=NONNEG_INT, default=default_of(ExtendConfig, "seed"),
                   help="seed of the tie-breaks between equally filled buckets (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.set_defaults(func=cmd_extend)


def cmd_extend(args):
    from ..training.extend import extend, format_summary

    summary = extend(args.model, args.new_ids, args.out, ExtendConfig(seed=args.seed))
    print(json.dumps(summary, indent=2) if args.json else format_summary(summary))
