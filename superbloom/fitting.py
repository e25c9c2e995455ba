"""The in-memory API: data in, a model out, with the command line's flat settings; folders optional.

    import superbloom as sb
    model = sb.fit(df, set_column="basket", id_column="item", time_budget=120)   # prepare + train + load
    model = sb.fit([{"milk", "bread"}, {"coffee", "milk"}, ...], steps=500)     # any input prepare reads
    recs = model.recommend([["milk"], ["coffee", "bread"]], k=10)                 # arrays (inference/recommend.py)
    model.save("models/baskets"); sb.load("models/baskets")                      # a folder when you want one

`data` is whatever `sb.prepare` reads: a pandas or Polars DataFrame, a pyarrow Table, a SciPy sparse
matrix (sets x ids), an iterable of id collections, or a path (a file, a folder of Parquet files).
The reading settings are prepare's (`set_column`, `id_column`, `order_column`, `id_separator`, ...;
an order column makes a leave-one-out split unless `split` says otherwise); every other keyword is a
flag of `superbloom train` by its name (`preset`, `time_budget`, `steps`, `head`, `d`, ...), resolved
exactly as the command line resolves it, preset and typed overrides alike, so `sb.fit(df, ...)` and
`superbloom prepare` + `superbloom train` on the same data give the same dataset, byte for byte, and
the same model. The dataset and the model go to `data_out` and `out` when given, else to a temporary
folder that lives as long as the model (`model.save(dir)` keeps a copy).

The recipe is resolved through the train command's own parser: the one place that maps its flags and
presets to a TrainConfig today. An optional extra a setting needs (`log_to`: [track]) is checked before
any work.
"""
from __future__ import annotations

import contextlib
import io
import logging
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

READ_KEYS = ("set_column", "id_column", "order_column", "format", "id_separator", "back_id", "delimiter",
             "undirected", "skip_malformed")  # ReadConfig's fields fit takes
PREPARE_KEYS = ("split", "test_fraction", "seed", "memory_limit")  # PrepareConfig's


def fit(data, *, data_out: str | Path | None = None, out: str | Path | None = None, preset: str = "auto",
        progress: bool = True, device: str = "auto", **settings):
    """Prepare `data`, train on it and load the model (module docstring) -> the model object (a Predictor,
    or an Ensemble for members=K). Unknown settings are a TypeError naming the ones there are; bad values
    the errors `superbloom train` gives (ValueError naming the setting); a missing extra MissingExtra."""
    from .cli import command_parser
    from .cli.checks import check_extras
    from .data.prepare import PrepareConfig, prepare
    from .data.read_config import ReadConfig, format_from_name
    from .inference.loader import load

    read = {k: settings.pop(k) for k in READ_KEYS if k in settings}
    prep = {k: settings.pop(k) for k in PREPARE_KEYS if k in settings}
    parser = command_parser("train")
    dests = {o.name.replace("-", "_"): o for o in parser.options if o.flags and not o.hidden}  # cli/parser.py
    own = {"data", "out", "preset", "quiet", "json", "resume", "overwrite", "print_config", "config", "help",
           "recipe", "threads", "device", "log_level"}
    unknown = sorted(set(settings) - (set(dests) - own))
    if unknown:
        shown = ", ".join(sorted(set(dests) - own))
        raise TypeError(f"fit: unknown setting(s) {', '.join(unknown)}; the settings are prepare's "
                        f"({', '.join(READ_KEYS + PREPARE_KEYS)}) and train's: {shown}")
    argv = _flags(settings, dests)
    check_extras(_parsed(["DATA", "--out", "OUT", *argv]))  # before any work: a missing extra, a bad value
    if isinstance(data, (str, Path)) and "format" not in read:
        read["format"] = format_from_name(data) or "edges"
    if read.get("order_column") is not None:
        prep.setdefault("split", "leave-one-out")
    workdir = tempfile.TemporaryDirectory(prefix="superbloom-fit-") if data_out is None or out is None else None
    data_dir = Path(data_out) if data_out is not None else Path(workdir.name) / "data"
    model_dir = Path(out) if out is not None else Path(workdir.name) / "model"
    prepare(PrepareConfig(data, str(data_dir), read=ReadConfig(**read), **prep), progress=progress)
    _train([str(data_dir), "--out", str(model_dir), "--preset", preset,
            "--device", device, *argv, *([] if progress else ["--quiet"])])
    model = load(model_dir, device)
    model._workdir = workdir  # the temporary folder goes with the model (save() copies what it needs)
    return model


def _flags(settings: dict, dests: dict) -> list[str]:
    """Keyword settings -> train's command-line words (a flag's name is its dest with dashes; a bool
    flag given True is the flag, False its --no- form; a list repeats the flag)."""
    words = []
    for key, value in settings.items():
        opt = dests[key]
        flag = next((o for o in opt.flags if o.startswith("--") and not o.startswith("--no-")), opt.flags[0])
        if isinstance(value, bool) or value is None:
            if value is None:
                continue
            neg = next((o for o in opt.flags if o.startswith("--no-")), None)
            flag_only = opt.action in ("store_true", "store_false", "store_const", "boolean")
            if flag_only and value:
                words.append(flag)
            elif flag_only and opt.action == "boolean":
                words.append("--no-" + flag[2:])
            elif flag_only and neg:
                words.append(neg)
            elif flag_only:
                continue  # a store_true flag given False: its default
            else:
                words += [flag, str(value).lower()]
        elif isinstance(value, (list, tuple)):
            for v in value:
                words += [flag, str(v)]
        else:
            words += [flag, str(value)]
    return words


def _parsed(argv: list[str]):
    """`superbloom train ARGV` parsed as the command line parses it (its flags typed: args.given), a
    usage error raised as a ValueError naming the setting."""
    from .cli import command_parser
    from .cli.parser import finish

    parser = command_parser("train")

    def error(message):
        raise ValueError(f"fit: {message}")

    parser.error = error
    args = finish(parser, parser.parse_args(argv), {})  # the typed flags are args.given
    args.command, args.parser = "train", parser
    return args


def _train(argv: list[str]) -> None:
    """`superbloom train ARGV` as the command line runs it (its preset resolution, its checks), its
    errors raised and what it prints logged."""
    args = _parsed(argv)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        args.func(args)
    for line in printed.getvalue().splitlines():
        log.info(line)
