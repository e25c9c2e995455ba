"""The `superbloom` command: a thin layer over the library; the only place that parses arguments.

    superbloom demo                                   # the main job on the embedded Wikispeedia links
    superbloom prepare INPUT --format edges --out DATA_DIR
    superbloom prepare-text CORPUS... --out DATA_DIR [--vocab-size 1000000]
    superbloom train DATA_DIR --out MODEL_DIR --time-budget 600 [--device auto|cpu|cuda]
    superbloom eval MODEL_DIR DATA_DIR [--json]
    superbloom prepare Beauty.txt --format lines --split leave-one-out --out DATA_DIR   # sequences
    superbloom eval MODEL_DIR DATA_DIR --protocol leave-one-out --holdout valid|test [--no-exclude-history]
    superbloom predict MODEL_DIR Copenhagen [--k 10]
    superbloom predict MODEL_DIR --input contexts.jsonl --out recs.parquet [--allow FILE] [--deny FILE]
    superbloom vectors MODEL_DIR --out vectors.parquet; superbloom similar-ids MODEL_DIR Copenhagen [--k 10]
    superbloom expand MODEL_DIR Copenhagen [--add 10] [--strategy sample --temperature 0.7]
    superbloom serve MODEL_DIR [--host 127.0.0.1] [--port 8000]
    superbloom fill MODEL_DIR "Miles Davis is a jazz musician, he is similar to [MASK] ."   # text models
    superbloom embed-train DATA_DIR --out EMBED_DIR --objective nca --labels labels.tsv   # set vectors
    superbloom similar EMBED_DIR Jazz Miles_Davis [--k 10]; superbloom classify EMBED_DIR Jazz --reject 0.8
    superbloom textclass-train corpus/ --labels labels.tsv --out TC_DIR; superbloom textclass TC_DIR "some text"
    superbloom synth --ids 5300000 --links 462000000 --out links.parquet   # SYNTHETIC links, planted topics
    superbloom extend MODEL_DIR new_ids.txt --out NEW_DIR   # new ids, no table resized
    superbloom card MODEL_DIR   # its model card (README.md) again, e.g. after eval --json > MODEL_DIR/eval.json

One module per group of commands, each with register(sub): data.py (prepare, prepare-text,
synth), training.py (train), query.py (eval, predict, expand, similar-ids, vectors, serve), text.py (fill), demo.py,
setembed.py (embed-train, embed, similar, classify), textclass.py (textclass-train, textclass),
extend.py (extend), card.py (card); flags.py holds the typed flags they share; config_file.py gives the commands of
CONFIG_COMMANDS `--config FILE` (their flag names as keys, a typed flag wins) and `--print-config`,
and recipe.py maps train's flags to TrainConfig's fields (a model's config.json as a recipe). A new command is one line in
COMMANDS (its group module and its line in `superbloom --help`) and the module's register.

`superbloom --help` and `--version` are made from COMMANDS alone; a command's module is imported,
and its flags added, only when the command runs or shows its help, so the commands that need no
torch (prepare, synth, --help) start without importing it.

Every command takes `--log-level {debug,info,warning,error}` (default info): the library's messages
(training reports, the server's access log) go through `logging` to one stderr handler (_log.py).

Every numeric flag is checked when the command line is parsed (exit 2 with a one-line message
naming the flag and its allowed range); defaults are read from the config dataclasses, never
repeated here.
"""
from __future__ import annotations

import importlib
import logging
import os
import sys

from .._log import LEVELS, configure as configure_logging
from .._version import __version__
from .config_file import add_config_args, convert, options, read_config_argv, to_toml
from .parser import Parser, expect_from_file, finish, missing_positionals

# command -> (its group module in cli/, its line in `superbloom --help`), in the order listed
COMMANDS = {
    "demo": ("demo", "the main job: prepare, train, evaluate and predict on the embedded Wikispeedia links"),
    "prepare": ("data", "split sets, build the vocabulary, write a memory-mapped dataset"),
    "prepare-text": ("data", "plain text -> unigram+bigram vocabulary and token-id sequences"),
    "synth": ("data", "write a SYNTHETIC links file with planted topics (any size, bounded memory)"),
    "train": ("training", "train a model on a prepared dataset"),
    "eval": ("query", "the paper's protocol on the held-out sets, with baselines"),
    "predict": ("query", "top-k ids for a context of ids, or for every context of a file"),
    "expand": ("query", "grow a set one predicted id at a time"),
    "similar-ids": ("query", "the ids whose item vectors are most similar to an id's (cosine)"),
    "vectors": ("query", "export every id's item vector to .npy or .parquet"),
    "serve": ("query", "HTTP API and web page for a model"),
    "fill": ("text", "fill in the blanks ([MASK]) of a sentence with a text model"),
    "embed-train": ("setembed", "train a set embedding (one vector per set) and its index"),
    "embed": ("setembed", "write one vector per set of a prepared dataset (Parquet)"),
    "similar": ("setembed", "the training sets nearest to a set of ids"),
    "classify": ("setembed", "the label of a set of ids, rejected under a confidence"),
    "textclass-train": ("textclass", "train a text classifier (words -> one attention layer -> class)"),
    "textclass": ("textclass", "classify texts with a model of textclass-train"),
    "extend": ("extend", "add new ids to a trained model (no table grows)"),
    "card": ("card", "write a model directory's model card (README.md) from its files"),
}
# every command takes --config FILE and --print-config (config_file.py); these also take --recipe
# MODEL_DIR, a model's config.json read back as their options by the hook named
RECIPE_COMMANDS = {"train": "saved_recipe"}  # cli/recipe.py
CONFIG_COMMANDS = tuple(COMMANDS)  # (kept for callers: every command)
__all__ = ["COMMANDS", "CONFIG_COMMANDS", "Parser", "command_parser", "main"]


def command_parser(command: str) -> Parser:
    """The full parser of `command` (prog `superbloom COMMAND`): its group module imported, its
    register(sub) run, and that command's parser taken."""
    root = Parser(prog="superbloom")
    sub = root.add_subparsers(parser_class=Parser)
    importlib.import_module(f"{__name__}.{COMMANDS[command][0]}").register(sub)
    p = sub.choices[command]
    p.add_argument("--log-level", choices=LEVELS, default="info",  # every command's: _log.py
                   help="the library's messages on stderr at this level and above (default %(default)s; warning: "
                        "only warnings and errors)")
    add_config_args(p, recipe=command in RECIPE_COMMANDS)
    return p


def _recipe_hook(command: str):
    if command not in RECIPE_COMMANDS:
        return None
    from . import recipe
    return getattr(recipe, RECIPE_COMMANDS[command])


class _Command(Parser):
    """A command as the main parser lists it: parsing its arguments (or its --help) builds its full
    parser first (command_parser), once, knowing which options a --config file gives."""

    def __init__(self, *args, command: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.command, self.full = command, None

    def parse_known_args(self, args=None, namespace=None):
        if self.full is None:
            try:  # --config FILE: its entries, read before the parser is built (they may give positionals)
                raw, path = read_config_argv(list(args or []), _recipe_hook(self.command))
            except (ValueError, OSError) as e:
                self.error(str(e))
            with expect_from_file(set(raw)):
                self.full = command_parser(self.command)
            try:
                self.full.from_file = convert(self.full, raw, path)
            except ValueError as e:
                self.full.error(str(e))
        return self.full.parse_known_args(args, namespace)


def main(argv=None) -> int:
    parser = Parser(prog="superbloom", description="Superbloom: Bloom-filter hashing + "
                    "Transformers for set completion over huge id vocabularies.")
    parser.add_argument("--version", action="version", version=f"superbloom {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Command)
    for name, (_, line) in COMMANDS.items():
        sub.add_parser(name, help=line, command=name)
    args, unknown = parser.parse_known_args(argv)
    words = sys.argv[1:] if argv is None else list(argv)
    at = words.index(args.command)
    command = sub.choices[args.command].full
    if unknown:  # blamed on the command when typed after it: its --help lists its flags
        (parser if set(unknown) & set(words[:at]) else command).error(f"unrecognized arguments: {' '.join(unknown)}")
    finish(command, args, command.from_file)  # the file's values, then the defaults; args.given
    args.parser = command  # its options: what a command's settings are (cli/settings.values)
    missing = missing_positionals(command, args)
    if missing:
        command.error(f"the following arguments are required: {', '.join(missing)}")
    configure_logging(args.log_level)
    from .._bounds import ArgumentError
    from .._extras import MissingExtra
    from ..data.readers import InputError
    from .checks import check_extras, check_paths

    try:
        check_paths(args)  # before any work: "" (the current folder) or a device (/dev/zero: endless) refused
        if getattr(args, "print_config", False):
            return _print_config(command, args)
        check_extras(args)  # before any work: a missing optional extra is one line naming it
        if getattr(args, "threads", 0):  # torch's threads: the one process-wide setting, set here only
            from ..model.device import set_threads
            set_threads(args.threads)
        return args.func(args) or 0
    except ArgumentError as e:  # the library names its parameter; the command line names the flag that set it
        print(f"superbloom {args.command}: error: {_as_flag(command, args, e)}", file=sys.stderr)
        return 2
    except (InputError, ValueError, FloatingPointError, OSError, MissingExtra) as e:  # bad input, a diverged run, a file, an extra
        print(f"superbloom {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def run() -> None:
    """The `superbloom` program: main(), then exit with its status. A torchrun rank (WORLD_SIZE > 1)
    exits with os._exit once its output is flushed: DDP keeps the gloo process group, and its threads,
    alive past destroy_process_group, and the interpreter's teardown with those threads running can
    end in std::terminate (exit -6) after the run is written, which fails the whole torchrun job."""
    code = main()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _as_flag(command: Parser, args, e) -> str:
    """An ArgumentError's message with the parameter it names replaced by the flag that set it (the
    flag whose destination, or config field, is that parameter: `--add 1000000000: ...` for expand's steps)."""
    flags: dict[str, str] = {}
    for o in command.options:  # a renamed flag's old name is hidden
        if o.flags and not o.hidden:
            flags.setdefault(o.dest, o.flags[0])
            if o.path:
                flags.setdefault(o.path.rsplit(".", 1)[-1], o.flags[0])
    prefix = f"{e.argument}: "
    if e.argument not in flags or not str(e).startswith(prefix):
        return str(e)
    value = getattr(args, e.argument, None)
    return f"{flags[e.argument]}{'' if value is None or isinstance(value, bool) else f' {value}'}: {str(e)[len(prefix):]}"


def _print_config(command: Parser, args) -> int:
    """--print-config: the command's options, resolved by its `resolve` hook where it has one (train:
    the preset applied), as TOML for --config; nothing runs."""
    values, comments = options(command, args), []
    resolve = getattr(args, "resolve", None)
    if resolve is not None:
        resolved, comments = resolve(args)
        values.update(resolved)
    names = {o.dest: o.name for o in command.options if not o.hidden}
    print(to_toml(values, [f"superbloom {args.command} --config FILE: these options; a flag typed wins",
                           *comments], names), end="")
    return 0
