"""The commands' parser: argparse, with every option recorded as the command declares it.

`Parser` (the class of every command's parser, cli/__init__.py) keeps `options`, one `Option` per
add_argument (its destination, flags, default, type, choices, and the config field it sets, `path`),
and hands argparse every default as SUPPRESS: a parsed namespace then holds exactly the values typed
on the command line. `finish` fills in the rest, a config file's values first, then the defaults,
and records which were given (`args.given`: typed or from the file), so that presets and checks know
what the user chose without a second parse and without touching argparse's internals.

A config file may also give the required options and the positionals (`--print-config` writes them):
`expect_from_file(keys)`, before the command's parser is built, makes those optional.
"""
from __future__ import annotations

import argparse
import contextlib
from dataclasses import dataclass
from typing import Any, Callable

# actions that hold no value of their own
_NO_VALUE = ("help", "version")
_FROM_FILE: set[str] = set()  # the keys (destinations) a config file gives, while a parser is built


@dataclass(frozen=True)
class Option:
    """One option or positional of a command, as declared."""
    dest: str
    flags: tuple[str, ...]  # () for a positional
    default: Any
    action: str  # store | store_true | store_false | store_const | append | boolean | deprecated
    type: Callable | None = None
    choices: tuple | None = None
    nargs: Any = None
    const: Any = None
    path: str | None = None  # the config field it sets ("loop.steps"), if any
    negate: bool = False  # the flag is the field's negation (--post-ln: model.norm_first = False)
    hidden: bool = False  # a deprecated alias: left out of --print-config
    owner: tuple | None = None  # (config class, field name) the option was derived from

    @property
    def name(self) -> str:
        """The name a config file and --print-config use: the first long flag without dashes, or the dest."""
        longs = [f for f in self.flags if f.startswith("--")]
        return longs[0][2:] if longs else self.dest.replace("_", "-")

    @property
    def positional(self) -> bool:
        return not self.flags


def _kind(action) -> str:
    if isinstance(action, str):
        return {"store_true": "store_true", "store_false": "store_false", "store_const": "store_const",
                "append": "append", "help": "help", "version": "version"}.get(action, action)
    if action is argparse.BooleanOptionalAction:
        return "boolean"
    return "custom"


@contextlib.contextmanager
def expect_from_file(keys: set[str]):
    """Within the block, parsers are built with the options in `keys` (destinations or names) neither
    required nor positional-mandatory: a config file gives them."""
    global _FROM_FILE
    before = _FROM_FILE
    _FROM_FILE = {k.replace("-", "_") for k in keys} | set(keys)
    try:
        yield
    finally:
        _FROM_FILE = before


def _dest(args: tuple, kw: dict) -> str:
    if kw.get("dest"):
        return kw["dest"]
    if not args[0].startswith("-"):
        return args[0]
    longs = [a for a in args if a.startswith("--")]
    return (longs[0] if longs else args[0]).lstrip("-").replace("-", "_")


def _record(owner: "Parser", target, args: tuple, kw: dict, add: Callable):
    """Record the option on `owner` and add it to `target` (the parser or one of its groups) with a
    SUPPRESS default."""
    path, negate, hidden, field = (kw.pop("path", None), kw.pop("negate", False), kw.pop("hidden", False),
                                   kw.pop("owner", None))
    action = kw.get("action", "store")
    kind = _kind(action)
    if kind in _NO_VALUE:
        return add(*args, **kw)
    dest = _dest(args, kw)
    if kind == "store_true":
        default = kw.get("default", False)
    elif kind == "store_false":
        default = kw.get("default", True)
    else:
        default = kw.get("default")
    opt = Option(dest, tuple(a for a in args if a.startswith("-")), default, kind, kw.get("type"),
                 tuple(kw["choices"]) if kw.get("choices") is not None else None, kw.get("nargs"), kw.get("const"),
                 path, negate, hidden or kw.get("help") == argparse.SUPPRESS, field)
    owner.options.append(opt)
    if isinstance(kw.get("help"), str):
        kw["help"] = kw["help"].replace("%(default)s", _shown(default))
    kw["default"] = argparse.SUPPRESS
    from_file = dest in _FROM_FILE or opt.name in _FROM_FILE
    if from_file and kw.get("required"):
        kw["required"] = False
    if from_file and opt.positional:
        kw["nargs"] = {None: "?", "+": "*"}.get(kw.get("nargs"), kw.get("nargs"))
    return add(*args, **kw)


def _shown(value) -> str:
    """A default as --help shows it (argparse's %(default)s)."""
    return str(value).replace("%", "%%")


class _Group:
    """An argument group of a Parser: its add_argument records the option on the parser too; every
    other attribute is the argparse group's."""

    def __init__(self, owner: "Parser", group):
        self._owner, self._group = owner, group

    def add_argument(self, *args, **kw):
        return _record(self._owner, self._group, args, kw, self._group.add_argument)

    def add_argument_group(self, *args, **kw):
        return _Group(self._owner, self._group.add_argument_group(*args, **kw))

    def add_mutually_exclusive_group(self, **kw):
        return _Group(self._owner, self._group.add_mutually_exclusive_group(**kw))

    def __getattr__(self, name):
        return getattr(self._group, name)


class Parser(argparse.ArgumentParser):
    """argparse with recorded options (module docstring) and a one-line error: what was wrong and where
    to read more (exit 2, no usage dump)."""

    def __init__(self, *args, **kwargs):
        self.options: list[Option] = []
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kw):
        return _record(self, self, args, kw, super().add_argument)

    def add_argument_group(self, *args, **kw):
        return _Group(self, super().add_argument_group(*args, **kw))

    def add_mutually_exclusive_group(self, **kw):
        return _Group(self, super().add_mutually_exclusive_group(**kw))

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")

    def option(self, dest: str) -> Option | None:
        """The option of destination (or name) `dest`, the shown one before a hidden alias."""
        hits = [o for o in self.options if o.dest == dest or o.name == dest]
        return next((o for o in hits if not o.hidden), hits[0] if hits else None)


def finish(parser: Parser, args: argparse.Namespace, from_file: dict[str, Any]) -> argparse.Namespace:
    """The parsed (typed) values, then the config file's (`from_file`: dest -> value), then the
    defaults; `args.given` the destinations typed or given by the file."""
    typed = {o.dest for o in parser.options if hasattr(args, o.dest)}
    for o in parser.options:
        if o.dest in typed:
            continue
        if o.dest in from_file:
            setattr(args, o.dest, from_file[o.dest])
        elif not hasattr(args, o.dest):
            setattr(args, o.dest, list(o.default) if isinstance(o.default, list) else o.default)
    args.given = typed | set(from_file)
    return args


def missing_positionals(parser: Parser, args: argparse.Namespace) -> list[str]:
    """Positionals that neither the command line nor the config file gave (made optional for the file)."""
    out = []
    for o in parser.options:
        if o.positional and o.nargs in (None, "+") and getattr(args, o.dest, None) in (None, []):
            out.append(o.dest)
    return out
