"""A config dataclass field that says what it is: `setting(default, help=..., range=..., choices=...)`.

The config dataclasses are the one source of a setting's meaning: its help text, its range, its
choices and the flag name a user types. The command line derives its options from them
(cli/settings.py), so a setting is described once, beside its default. Imports nothing.

    batch_size: int = setting(64, help="examples per step, over all processes", range=(1, 1 << 24))
    norm_first: bool = setting(True, help="post-LN blocks as in the paper", flag="post-ln", negate=True)
"""
from __future__ import annotations

import dataclasses

__all__ = ["setting", "about", "replaced"]


def setting(default=dataclasses.MISSING, *, help: str, flag: str | None = None, cli: bool = True,
            range: tuple | None = None, lo_open: bool = False, what: str | None = None,
            choices: tuple | None = None, metavar: str | None = None, negate: bool = False,
            aliases: tuple[str, ...] = (), shown: str | None = None, default_factory=dataclasses.MISSING):
    """A dataclass field with its description (module docstring). flag: the option's name, without
    dashes (default: the field's name with dashes); cli=False: no option (set otherwise, e.g. by the
    objective); range (lo, hi): a number's bounds (hi None: the type's), lo excluded with lo_open,
    `what` the phrase a refusal uses; negate: the flag sets the field to False; aliases: older flag
    names that still work; shown: how --help words the default (e.g. "chosen on validation" for None)."""
    meta = {"help": help, "flag": flag, "cli": cli, "range": range, "lo_open": lo_open, "what": what,
            "choices": tuple(choices) if choices is not None else None, "metavar": metavar, "negate": negate,
            "aliases": tuple(aliases), "shown": shown}
    return dataclasses.field(default=default, default_factory=default_factory, metadata={"setting": meta})


def about(f: dataclasses.Field) -> dict | None:
    """The description `setting` gave field `f` (None for a plain field)."""
    return f.metadata.get("setting")


def replaced(config, settings: dict):
    """`config` (a dataclass, nested ones inside) with `settings` (config path -> value: "loop.steps")
    set, through dataclasses.replace, so every config checks its values as it is built."""
    top, nested = {}, {}
    for path, value in settings.items():
        section, _, rest = path.partition(".")
        if rest:
            nested.setdefault(section, {})[rest] = value
        else:
            top[section] = value
    return dataclasses.replace(config, **top, **{s: replaced(getattr(config, s), v) for s, v in nested.items()})
