"""The `superbloom` command: a thin layer over the library; the only place that parses arguments.

    superbloom demo                                   # the main job on the embedded Wikispeedia links
    superbloom prepare INPUT --format edges --out DATA_DIR
    superbloom prepare-text CORPUS... --out DATA_DIR [--vocab-size 1000000]
    superbloom train DATA_DIR --out MODEL_DIR --time-budget 600 [--device auto|cpu|cuda]
    superbloom eval MODEL_DIR DATA_DIR [--json]
    superbloom prepare Beauty.txt --format lines --split leave-one-out --out DATA_DIR   # sequences
    superbloom eval MODEL_DIR DATA_DIR --protocol leave-one-out --split valid|test [--no-exclude-history]
    superbloom predict MODEL_DIR Copenhagen [--k 10]
    superbloom expand MODEL_DIR Copenhagen [--steps 10] [--strategy sample --temperature 0.7]
    superbloom serve MODEL_DIR [--host 127.0.0.1] [--port 8000]
    superbloom fill MODEL_DIR "Miles Davis is a jazz musician, he is similar to [MASK] ."   # text models
    superbloom embed-train DATA_DIR --out EMBED_DIR --objective nca --labels labels.tsv   # set vectors
    superbloom similar EMBED_DIR Jazz Miles_Davis [--k 10]; superbloom classify EMBED_DIR Jazz --reject 0.8
    superbloom textclass-train corpus/ --labels labels.tsv --out TC_DIR; superbloom textclass TC_DIR "some text"
    superbloom synth --ids 5300000 --links 462000000 --out links.parquet   # SYNTHETIC links, planted topics
    superbloom extend MODEL_DIR new_ids.txt --out NEW_DIR   # new ids, no table resized

One module per group of commands, each with register(sub): data.py (prepare, prepare-text,
synth), training.py (train), query.py (eval, predict, expand, serve), text.py (fill), demo.py,
setembed.py (embed-train, embed, similar, classify), textclass.py (textclass-train, textclass),
extend.py (extend); flags.py holds the
typed flags they share. A new command is a new module listed in COMMAND_GROUPS.

Every numeric flag is checked when the command line is parsed (exit 2 with a one-line message
naming the flag and its allowed range); defaults are read from the config dataclasses, never
repeated here.
"""
from __future__ import annotations

import argparse
import sys

from .. import __version__
from ..readers import InputError
from . import data, demo, extend, query, setembed, text, textclass, training
from .training import train_config_from_args  # noqa: F401  (public: tests and scripts build configs)

COMMAND_GROUPS = (demo, data, training, query, text, setembed, textclass, extend)
__all__ = ["main", "train_config_from_args", "COMMAND_GROUPS"]


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error: what was wrong and where to read more (exit 2, no usage dump)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _given(subparser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """The destinations of the flags typed on the command line (not left at their default):
    the same subcommand parsed again with every default suppressed."""
    actions = subparser._actions  # argparse keeps no public list of a parser's actions
    saved = [a.default for a in actions]
    for a in actions:
        a.default = argparse.SUPPRESS
    try:
        given = set(vars(subparser.parse_known_args(argv)[0]))
    finally:
        for a, d in zip(actions, saved):
            a.default = d
    return given


def main(argv=None) -> int:
    parser = Parser(prog="superbloom", description="Superbloom: Bloom-filter hashing + "
                    "Transformers for set completion over huge id vocabularies.")
    parser.add_argument("--version", action="version", version=f"superbloom {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for group in COMMAND_GROUPS:
        group.register(sub)
    args = parser.parse_args(argv)
    words = sys.argv[1:] if argv is None else list(argv)
    args.given = _given(sub.choices[args.command], words[words.index(args.command) + 1:])
    try:
        return args.func(args) or 0
    except (InputError, ValueError, FloatingPointError, OSError) as e:  # bad input, a diverged run, a file
        print(f"superbloom {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
