"""`--config FILE` and `--print-config`: a command's options from a file, and the resolved options as TOML.

    superbloom train DATA --out M --steps 2000 --print-config > recipe.toml   # prints, trains nothing
    superbloom train DATA --out M2 --config recipe.toml --lr 0.001           # a typed flag still wins
    superbloom train DATA --out M3 --recipe M          # = --config M/config.json: M's settings again

A config file's keys are the command's flag names, with dashes or underscores (`batch-size` or
`batch_size`; a boolean flag's destination too, e.g. `keep-best = false`); its values are applied as
the parser's defaults, so a flag typed on the command line wins, and each value goes through the
flag's own type and choices (the same message as the flag's). An unknown key, or a positional
argument, is an error naming the file and the key. Formats: TOML (stdlib tomllib), YAML (.yaml/.yml,
when PyYAML is importable), JSON; a model directory, or its config.json, is a recipe: the command's
`recipe` hook (set_defaults(recipe=...); train's is cli/recipe.py) maps the saved sections back to
flags. The keys a config file sets count as typed for the presets (train: a file's `m` is not
replaced by the preset's).

Why argparse and not jsonargparse / tyro: both generate the whole parser from signatures or
dataclasses, which would rewrite every command at once (the flags here carry ranges, help texts and
names kept for users: --segment for MaskConfig.n), and both import more at start-up; a file of flag
names fed through argparse's own actions keeps every command as it is, and the agreement of train's
flags with its config dataclasses is a test (tests/test_config_file.py, with cli/recipe.py's table).
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

__all__ = ["add_config_args", "apply_config", "flag_names", "load_config", "options", "to_toml", "INTERNAL_DESTS"]

# namespace entries that are not options (printed by no --print-config, set by no config file)
INTERNAL_DESTS = frozenset({"help", "version", "func", "given", "config", "recipe", "print_config", "resolve",
                            "recipe_hook", "config_given", "command"})


def add_config_args(p: argparse.ArgumentParser, recipe: bool = False) -> None:
    """--config FILE and --print-config on `p`; recipe=True also adds --recipe MODEL_DIR."""
    g = p.add_argument_group("config file")
    g.add_argument("--config", metavar="FILE", default=None,
                   help="options from a TOML, YAML or JSON file whose keys are this command's flag names "
                        "(dashes or underscores); a flag typed here wins over the file"
                        + ("; a model directory's config.json re-runs that model's settings (its data "
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
        raise ValueError(f"--config {path}: expected a table of flag names and values at the top")
    return data


def _is_saved_config(data: dict) -> bool:
    """A model directory's config.json (its sections), not a file of flag names."""
    return "versions" in data or ("train" in data and isinstance(data["train"], dict))


def _key_action(parser: argparse.ArgumentParser, key: str):
    """(action, via_flag) for a config key: by its option string (--batch-size) or its destination."""
    flag = "--" + key.replace("_", "-")
    for a in parser._actions:  # argparse keeps no public list of a parser's actions
        if flag in a.option_strings:
            return a, True
    for a in parser._actions:
        if a.dest == key.replace("-", "_") and a.dest not in INTERNAL_DESTS:
            return a, False
    return None, False


def _convert(parser, action, via_flag: bool, value, where: str):
    """The namespace value of `value` for `action`, through the flag's own type and choices."""
    def scalar(v):
        if isinstance(v, bool) or isinstance(v, (list, dict)) or v is None:
            raise ValueError(f"{where}: expected {_expects(action)}, got {json.dumps(v)}")
        text = repr(v) if isinstance(v, float) else str(v)
        try:
            out = action.type(text) if callable(action.type) else text
        except (argparse.ArgumentTypeError, TypeError, ValueError) as e:
            raise ValueError(f"{where}: {e}") from None
        if action.choices is not None and out not in action.choices:
            raise ValueError(f"{where}: expected one of {', '.join(map(str, action.choices))}, got {v!r}")
        return out

    if action.nargs == 0:  # store_true / store_false / store_const / BooleanOptionalAction
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true or false, got {json.dumps(value)}")
        if isinstance(action, (argparse.BooleanOptionalAction, argparse._StoreTrueAction)) or not via_flag:
            return value
        if isinstance(action, argparse._StoreFalseAction):  # `no-keep-best = true`
            return not value
        return action.const if value else action.default  # store_const: false is the flag not given
    if action.nargs in ("*", "+") or isinstance(action, argparse._AppendAction):
        if not isinstance(value, list):
            value = [value]
        return [scalar(v) for v in value]
    return scalar(value)


def _expects(action) -> str:
    if action.choices is not None:
        return "one of " + ", ".join(map(str, action.choices))
    return getattr(action.type, "__name__", "a string") if action.type else "a string"


def apply_config(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """Read --config / --recipe from `argv` (if given) and set the file's values as `parser`'s
    defaults -> the destinations it set (they count as typed). ValueError names the file and key."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config")
    pre.add_argument("--recipe")
    known = pre.parse_known_args(argv)[0]
    if known.config and known.recipe:
        raise ValueError("--config and --recipe exclude each other (--recipe M is --config M/config.json)")
    source = known.config or known.recipe
    if not source:
        return set()
    path = Path(source)
    if known.recipe and path.is_dir():
        path = path / "config.json"
    data = load_config(path)
    if _is_saved_config(data):
        hook = parser.get_default("recipe_hook")
        if hook is None:
            raise ValueError(f"--config {path}: a model's config.json, and `{parser.prog}` reads no recipe "
                             "from one (only its own flag names)")
        data = hook(data)
    values = {}
    for key, value in data.items():
        action, via_flag = _key_action(parser, str(key))
        if action is None or not action.option_strings:
            what = "a positional argument (give it on the command line)" if action is not None else "unknown key"
            raise ValueError(f"--config {path}: {what} {key!r} for `{parser.prog}` (the keys are its flag names)")
        values[action.dest] = _convert(parser, action, via_flag, value, f"--config {path}: key {key!r}")
    for a in parser._actions:
        if a.dest in values:
            a.required = False  # e.g. --out from the file
    parser.set_defaults(**values)
    return set(values)


# ---------------------------------------------------------------- printing the resolved options


def options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict:
    """The namespace's option values (flag destinations, in the parser's order; positionals and
    internal entries left out)."""
    out = {}
    for a in parser._actions:
        if a.option_strings and a.dest not in INTERNAL_DESTS and hasattr(args, a.dest) and a.dest not in out:
            out[a.dest] = getattr(args, a.dest)
    return out


def flag_names(parser: argparse.ArgumentParser) -> dict:
    """dest -> the name --print-config writes it under: its first shown long flag without the
    dashes (eval's split -> holdout), else the dest with dashes."""
    out = {}
    for a in parser._actions:
        longs = [o for o in a.option_strings if o.startswith("--")]
        if longs and a.help != argparse.SUPPRESS and a.dest not in out:
            out[a.dest] = longs[0][2:]
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
    """`values` (dest -> value) as a flat TOML table keyed by flag names (`names`: dest -> name, else
    the dest with dashes); None and "" (unset) are left out."""
    names = names or {}
    lines = [f"# {c}" for c in comments]
    lines += [f"{names.get(d, d.replace('_', '-'))} = {_toml_value(v)}" for d, v in values.items() if v is not None and v != ""]
    return "\n".join(lines) + "\n"
