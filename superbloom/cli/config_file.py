"""`--config FILE` and `--print-config` on every command: its options from a file, and its resolved
options as TOML that, fed back, run the same command.

    superbloom train DATA --out M --steps 2000 --print-config > recipe.toml   # prints, trains nothing
    superbloom train --config recipe.toml --lr 0.001                          # a typed flag still wins
    superbloom train DATA --out M3 --recipe M          # = --config M/config.json: M's settings again

A config file's keys are the command's option names: its flag names, with dashes or underscores
(`batch-size` or `batch_size`; a boolean flag's destination too, e.g. `keep-best = false`), its
positionals' names (`data = "d"`), or the config field an option sets (`loop.steps`, or a TOML table
`[loop]` with `steps`). Each value goes through the option's own type and choices (the same message
as the flag's); a typed flag wins over the file. An unknown key is an error naming the file and the
key. Formats: TOML (stdlib tomllib), YAML (.yaml/.yml, when PyYAML is importable), JSON; a model
directory, or its config.json, is a recipe for a command with a `recipe_hook` (train: cli/recipe.py),
which maps the saved sections back to options. The keys a file sets count as given (the presets do
not replace them). The parser itself is cli/parser.py; the options are recorded there as declared,
so nothing here reads argparse's internals.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from .parser import Option, Parser

__all__ = ["add_config_args", "read_config_argv", "convert", "load_config", "options", "to_toml", "INTERNAL_DESTS"]

# namespace entries that are not options (printed by no --print-config, set by no config file)
INTERNAL_DESTS = frozenset({"help", "version", "func", "given", "config", "recipe", "print_config", "resolve",
                            "recipe_hook", "config_given", "command", "log_level", "parser"})


def add_config_args(p: argparse.ArgumentParser, recipe: bool = False) -> None:
    """--config FILE and --print-config on `p`; recipe=True also adds --recipe MODEL_DIR."""
    g = p.add_argument_group("config file")
    g.add_argument("--config", metavar="FILE", default=None,
                   help="options from a TOML, YAML or JSON file whose keys are this command's option names "
                        "(dashes or underscores; positionals too) or config fields; a flag typed here wins over "
                        "the file" + ("; a model directory's config.json re-runs that model's settings (its data "
                                      "and output paths, versions and records are ignored)" if recipe else ""))
    if recipe:
        g.add_argument("--recipe", metavar="MODEL_DIR", default=None,
                       help="the settings of a trained model: the same as --config MODEL_DIR/config.json")
    g.add_argument("--print-config", action="store_true",
                   help="print the resolved options as TOML (a file for --config) and exit without running")


# ---------------------------------------------------------------- reading a file


def load_config(path: str | Path) -> dict:
    """The mapping in a config file (TOML, YAML, JSON; a directory: its config.json)."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"--config {path}: no such file")
    suffix = path.suffix.lower()
    text = path.read_text(encoding="utf-8")
    try:
        if suffix == ".json":
            data = json.loads(text)
        elif suffix in (".yaml", ".yml"):
            try:
                import yaml
            except ImportError:
                raise ValueError(f"--config {path}: a YAML file needs PyYAML (pip install pyyaml); "
                                 "or write the file as TOML") from None
            data = yaml.safe_load(text)
        else:  # .toml and anything else
            import tomllib
            data = tomllib.loads(text)
    except ValueError as e:  # tomllib.TOMLDecodeError, json.JSONDecodeError, and yaml's (below)
        raise ValueError(f"--config {path}: not valid {suffix.lstrip('.') or 'TOML'}: {e}") from None
    except Exception as e:  # yaml.YAMLError is no ValueError
        raise ValueError(f"--config {path}: not valid {suffix.lstrip('.')}: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"--config {path}: expected a table of option names and values at the top")
    return data


def _is_saved_config(data: dict) -> bool:
    """A model directory's config.json (its sections), not a file of option names."""
    return "versions" in data or ("train" in data and isinstance(data["train"], dict))


def read_config_argv(argv: list[str], recipe_hook=None) -> tuple[dict, str]:
    """--config / --recipe of `argv` -> (the file's raw entries, flattened: a table's keys as
    `table.key`; the file's path for messages), or ({}, "") without one. A model's config.json goes
    through `recipe_hook` (None: the command reads no recipe)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config")
    pre.add_argument("--recipe")
    known = pre.parse_known_args(argv)[0]
    if known.config and known.recipe:
        raise ValueError("--config and --recipe exclude each other (--recipe M is --config M/config.json)")
    source = known.config or known.recipe
    if not source:
        return {}, ""
    path = Path(source)
    if known.recipe and path.is_dir():
        path = path / "config.json"
    data = load_config(path)
    if _is_saved_config(data):
        if recipe_hook is None:
            raise ValueError(f"--config {path}: a model's config.json, and this command reads no recipe from one "
                             "(only its own option names)")
        data = recipe_hook(data)
    return _flatten(data), str(path)


def _flatten(data: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in data.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _find(parser: Parser, key: str) -> Option | None:
    """The option a config key names: by flag name or destination (dashes or underscores), or by the
    config field it sets."""
    under = key.replace("-", "_")
    for o in parser.options:
        if o.hidden:
            continue
        if o.name.replace("-", "_") == under or o.dest == under or (o.path is not None and o.path == key):
            return o
    return None


def convert(parser: Parser, raw: dict, path: str) -> dict:
    """The file's entries -> {dest: value} through each option's type and choices (ValueError naming
    the file and the key)."""
    values = {}
    for key, value in raw.items():
        opt = _find(parser, str(key))
        if opt is None or opt.dest in INTERNAL_DESTS:
            raise ValueError(f"--config {path}: unknown key {key!r} for `{parser.prog}` (the keys are its "
                             "option names)")
        value = _value(opt, value, f"--config {path}: key {key!r}")
        if opt.negate and key == opt.path:  # the field's own value (model.norm_first), not its negating flag's
            value = not value
        values[opt.dest] = value
    return values


def _value(opt: Option, value, where: str):
    """The namespace value of `value` for option `opt`, through its type and choices."""
    def scalar(v):
        if isinstance(v, bool) or isinstance(v, (list, dict)) or v is None:
            raise ValueError(f"{where}: expected {_expects(opt)}, got {json.dumps(v)}")
        text = repr(v) if isinstance(v, float) else str(v)
        try:
            out = opt.type(text) if callable(opt.type) else text
        except (argparse.ArgumentTypeError, TypeError, ValueError) as e:
            raise ValueError(f"{where}: {e}") from None
        if opt.choices is not None and out not in opt.choices:
            raise ValueError(f"{where}: expected one of {', '.join(map(str, opt.choices))}, got {v!r}")
        return out

    if opt.action in ("store_true", "store_false", "boolean", "store_const"):
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true or false, got {json.dumps(value)}")
        if opt.action == "store_const":  # false is the flag not given
            return opt.const if value else opt.default
        return value
    if opt.nargs in ("*", "+") or opt.action == "append":
        if not isinstance(value, list):
            value = [value]
        return [scalar(v) for v in value]
    return scalar(value)


def _expects(opt: Option) -> str:
    if opt.choices is not None:
        return "one of " + ", ".join(map(str, opt.choices))
    return getattr(opt.type, "__name__", "a string") if opt.type else "a string"


# ---------------------------------------------------------------- printing the resolved options


def options(parser: Parser, args: argparse.Namespace) -> dict:
    """The namespace's option values, positionals included (dest -> value, in the parser's order;
    hidden aliases and internal entries left out)."""
    out = {}
    for o in parser.options:
        if not o.hidden and o.dest not in INTERNAL_DESTS and hasattr(args, o.dest) and o.dest not in out:
            out[o.dest] = getattr(args, o.dest)
    return out


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v))  # a TOML basic string: JSON's escapes are TOML's


def to_toml(values: dict, comments: list[str] = (), names: dict | None = None) -> str:
    """`values` (dest -> value) as a flat TOML table keyed by option names (`names`: dest -> name, else
    the dest with dashes); None, "" and [] (unset) are left out."""
    names = names or {}
    lines = [f"# {c}" for c in comments]
    lines += [f"{names.get(d, d.replace('_', '-'))} = {_toml_value(v)}" for d, v in values.items()
              if v is not None and v != "" and v != []]
    return "\n".join(lines) + "\n"
