"""A command's options derived from its config dataclasses: one option per field, its help, range,
choices and name read from the field (_settings.setting), its destination the field's config path.

    add_config(group, LoopConfig, "loop")        # --batch-size, --steps, ... -> loop.batch_size, ...
    add_head_settings(group)                     # --head, and every head's settings, each naming its heads
    values(parser, args, given_only=True)        # {"loop.steps": 5, ...}: what a library resolver takes

Every numeric option is bounded when the command line is parsed (checks.bounded: one line naming the
flag and its range); defaults and help texts live with the fields, never repeated here.
"""
from __future__ import annotations

import argparse
import dataclasses

from .._settings import about
from . import checks

__all__ = ["add_config", "add_head_settings", "config_fields", "values", "flag_of"]


def _kind(annotation) -> tuple[type | None, bool]:
    """(scalar type, may be None) of a field's annotation (a string under `from __future__ import annotations`)."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    parts = [p.strip() for p in text.replace("Optional[", "").rstrip("]").split("|")]
    optional = "None" in parts
    parts = [p for p in parts if p != "None"]
    kind = {"int": int, "float": float, "str": str, "bool": bool}.get(parts[0]) if len(parts) == 1 else None
    return kind, optional


def _shown(value) -> str:
    if value is None or value == "":
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:,}" if isinstance(value, int) and abs(value) >= 10_000 else str(value)


def _argparse_kwargs(f: dataclasses.Field, meta: dict, default, show_default: bool = True) -> dict:
    """add_argument keywords for field `f` with description `meta` and the default the option shows."""
    kind, _ = _kind(f.type)
    kw: dict = {"help": meta["help"]}
    if kind is bool:
        if meta["negate"] or not f.default:
            kw["action"] = "store_true"
        else:
            kw["action"] = argparse.BooleanOptionalAction
    elif kind in (int, float):
        lo, hi = meta["range"] or (None, None)
        kw["type"] = checks.bounded(kind, lo, hi, lo_open=meta["lo_open"], what=meta["what"])
    elif kind is not str:
        raise TypeError(f"{f.name}: a setting of type {f.type!r} needs an option written by hand")
    if meta["choices"] is not None:
        kw["choices"] = meta["choices"]
    if meta["metavar"]:
        kw["metavar"] = meta["metavar"]
    elif "choices" not in kw and "action" not in kw:
        kw["metavar"] = flag_of(f).upper().replace("-", "_")
    if show_default and kw.get("action") != "store_true":
        kw["help"] += f" (default {meta.get('shown') or _shown(default)})"
    kw["help"] = kw["help"].replace("%", "%%")  # argparse formats help with %
    return kw


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def flag_of(f: dataclasses.Field) -> str:
    """The option name of field `f` (without dashes)."""
    meta = about(f) or {}
    return meta.get("flag") or f.name.replace("_", "-")


def config_fields(cls) -> list[dataclasses.Field]:
    """The fields of `cls` that are options (a setting with cli=True, not a nested config)."""
    out = []
    for f in dataclasses.fields(cls):
        meta = about(f)
        if meta is not None and meta["cli"]:
            out.append(f)
    return out


def add_config(target, cls, prefix: str = "", *, skip: tuple[str, ...] = (), only: tuple[str, ...] | None = None,
               base=None, **custom: dict) -> None:
    """One option per setting of dataclass `cls` on `target` (a parser or argument group), its
    destination `prefix.field` (the field's config path). `base`: an instance whose values are the
    defaults shown (a command's own defaults, e.g. embed-train's smaller model); `custom[field]`:
    add_argument keywords that replace the derived ones, with `positional=True` for a positional."""
    for f in config_fields(cls):
        if f.name in skip or (only is not None and f.name not in only):
            continue
        meta = about(f)
        path = f"{prefix}.{f.name}" if prefix else f.name
        extra = dict(custom.get(f.name, {}))
        positional = extra.pop("positional", False)
        default = getattr(base, f.name) if base is not None else _default(f)
        required = base is None and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        kw = _argparse_kwargs(f, meta, default, show_default=not required)
        kw.update(extra)
        if positional:
            kw.pop("metavar", None)
            target.add_argument(path, metavar=f.name, path=path, owner=(cls, f.name), **kw)
            continue
        flags = ["--" + flag_of(f), *meta["aliases"]]
        if required:
            kw.setdefault("required", True)
        target.add_argument(*flags, dest=path, default=default, path=path, negate=meta["negate"],
                            owner=(cls, f.name), **kw)


def add_head_settings(target, head_help: str) -> None:
    """--head (the registry's names) and one option per head setting (head.<field>): a setting several
    heads have is one option whose help names each head and its default; not given (None), a head
    takes its own default; a setting of another head than --head's is refused by the resolver."""
    from ..heads.config import HEAD_CONFIGS, SuperbloomConfig

    target.add_argument("--head", dest="head.name", choices=sorted(HEAD_CONFIGS), default=SuperbloomConfig.name,
                        path="head.name", help=head_help)
    fields: dict[str, list[tuple[str, dataclasses.Field]]] = {}
    for name, cls in HEAD_CONFIGS.items():
        for f in config_fields(cls):
            fields.setdefault(f.name, []).append((name, f))
    for field, owners in fields.items():
        # the narrowest range (0 is no setting a user types: it is the default "off" of the heads that
        # have it) and every head's choices: the head's own config refuses the others, naming itself
        f = max((g for _, g in owners), key=lambda g: _low(about(g)))
        meta = about(f)
        kw = _argparse_kwargs(f, meta, None, show_default=False)
        if "choices" in kw:
            kw["choices"] = tuple(dict.fromkeys(c for _, g in owners for c in about(g)["choices"]))
        by_help: dict[str, list[str]] = {}
        for head, g in owners:
            by_help.setdefault(about(g)["help"], []).append(head)
        defaults = {head: meta.get("shown") or _shown(_default(g)) for head, g in owners}
        shown = (next(iter(defaults.values())) if len(set(defaults.values())) == 1
                 else ", ".join(f"{h} {v}" for h, v in defaults.items()))
        kw["help"] = ("; ".join(f"{', '.join(heads)}: {text}" for text, heads in by_help.items())
                      + f" (default {shown})").replace("%", "%%")
        if kw.get("action") == "store_true":
            kw.update(action="store_const", const=True)
        target.add_argument("--" + flag_of(f), *meta["aliases"], dest=f"head.{field}", default=None,
                            path=f"head.{field}", owner=tuple((HEAD_CONFIGS[h], field) for h, _ in owners), **kw)


def _low(meta: dict) -> float:
    lo = (meta["range"] or (None, None))[0]
    return float("-inf") if lo is None else lo


def values(parser, args, given_only: bool = True) -> dict:
    """{config path: value} of the options that set a config field (only those given: typed or from a
    --config file, unless given_only=False); a negated flag (--post-ln) gives its field's value."""
    out = {}
    for o in parser.options:
        if o.path is None or o.hidden or (given_only and o.dest not in args.given):
            continue
        v = getattr(args, o.dest)
        out[o.path] = (not v) if o.negate else v
    return out
