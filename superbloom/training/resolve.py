"""A run's TrainConfig from the settings a user gave: defaults < the objective's < the preset's < given.

    cfg, choice = resolve_train("data/wiki", "runs/wiki", {"loop.time_budget": 600.0})   # preset auto
    cfg, _ = resolve_train("data/wiki", "runs/wiki", {"head.name": "full"}, preset="none")
    cfg, _ = resolve_train("data/wiki", "runs/wiki", {"loop.steps": 9000}, resume=True)   # the saved run + these

Settings are keyed by config path (`loop.steps`, `head.neighbours`, `model.norm_first`: the sections of
TrainConfig, its own fields by name, `head.name` the head). A new run starts from each config's field
defaults; the objective sets its masking (objectives.ObjectiveEntry.mask_defaults) and a causal model
where it needs one; the preset (presets.py: `auto` picks one from the dataset) sets its recipe where
nothing was given; the given settings win. A resumed run (resume=True and a checkpoint in `out`)
starts from its saved config instead, and takes no preset. A setting of another head than the
resolved one, or one the recipe makes meaningless, is a ValueError naming it through `name` (the
command line passes its flag names). The command line (cli/training.py) and sb.fit both call this.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Mapping

from ..hashing.config import HashConfig
from ..heads.config import head_config, head_config_dict, head_settings
from ..model.config import MaskConfig, ModelConfig
from .config import LoopConfig, OptimConfig, TrainConfig

SECTIONS = {"hash": HashConfig, "model": ModelConfig, "mask": MaskConfig, "optim": OptimConfig, "loop": LoopConfig}
TOP = ("val_fraction", "objective", "init", "val_seed")  # TrainConfig's own settings

__all__ = ["resolve_train", "settings_of", "defaults", "build_train_config", "SECTIONS", "TOP"]


def defaults() -> dict:
    """Every setting's default (config path -> value): the sections' field defaults, the top-level
    fields', and the default head by name (its settings are its own config's)."""
    out = {}
    for section, cls in SECTIONS.items():
        out.update({f"{section}.{f.name}": _default(f) for f in dataclasses.fields(cls)})
    top = {f.name: f for f in dataclasses.fields(TrainConfig)}
    out.update({name: _default(top[name]) for name in TOP})
    out["head.name"] = "superbloom"
    return out


def _default(f: dataclasses.Field):
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()


def settings_of(cfg: TrainConfig) -> dict:
    """A TrainConfig as settings (config path -> value; the head by name and its own fields)."""
    out = {f"{s}.{f.name}": getattr(getattr(cfg, s), f.name) for s, cls in SECTIONS.items()
           for f in dataclasses.fields(cls)}
    out.update({name: getattr(cfg, name) for name in TOP})
    out.update({f"head.{k}": v for k, v in head_config_dict(cfg.head).items()})
    return out


def build_train_config(data: str, out: str, settings: Mapping[str, object],
                       name: Callable[[str], str] = lambda path: path) -> TrainConfig:
    """The TrainConfig of complete settings (config path -> value; a head setting None or absent: the
    head's default). A setting that is no field, or not one of the head's, is a ValueError named by `name`."""
    sections = {s: {} for s in SECTIONS}
    top, head = {}, {}
    for path, value in settings.items():
        section, _, field = path.partition(".")
        if section == "head" and field:
            if field != "name" and value is not None:
                head[field] = value
        elif section in SECTIONS and field:
            sections[section][field] = value
        elif path in TOP:
            top[path] = value
        else:
            raise ValueError(f"{name(path)}: not a training setting")
    head_name = str(settings.get("head.name", "superbloom"))
    wrong = sorted(set(head) - set(head_settings(head_name)))
    if wrong:
        own = ", ".join(name(f"head.{s}") for s in head_settings(head_name)) or "none"
        raise ValueError(f"{name('head.' + wrong[0])} is not a setting of the {head_name} head (its settings: {own})")
    return TrainConfig(data=str(data), out=str(out), head=head_config(head_name, **head),
                       **{s: SECTIONS[s](**v) for s, v in sections.items()}, **top)


def resolve_train(data: str | Path, out: str | Path, settings: Mapping[str, object] = {}, preset: str | None = None,
                  resume: bool = False, name: Callable[[str], str] = lambda path: path):
    """-> (the run's TrainConfig, the presets.Choice it took or None). `settings`: the given ones (config
    path -> value); `preset`: a preset's name, "auto" or "none" (None: auto for a new run); resume:
    continue the run in `out` when it has a checkpoint (its saved settings + these; no preset then)."""
    from ..storage.checkpoint import latest_checkpoint
    from .objectives import objective_entry  # torch: imported when a run is resolved, not for --help
    from .presets import DatasetFacts, refusals, resolve as resolve_preset
    from .rundir import read_saved

    given = dict(settings)
    if resume and latest_checkpoint(out) is not None:
        if preset not in (None, "none"):
            raise ValueError(f"{name('preset')} {preset}: a resumed run keeps its saved settings (config.json); "
                             f"drop {name('preset')}")
        saved = read_saved(Path(out), ("hash", "model", "head"),
                           lambda config: TrainConfig.from_saved(config, str(data), str(out)))
        values = settings_of(saved)
        if any(p.startswith("head.") for p in given):  # a head given anew: the given one (a change is refused)
            values = {p: v for p, v in values.items() if not p.startswith("head.")}
        values.update(given)
        values["model.causal"] = bool(values["model.causal"]) or objective_entry(values["objective"]).causal
        return build_train_config(data, out, values, name), None
    facts = DatasetFacts.read(data)
    choice = resolve_preset(preset or "auto", facts, set(given))
    values = defaults()
    values.update(choice.applied if choice else {})
    values.update(given)
    by = (f"preset {'auto -> ' if choice.auto else ''}{choice.preset.name}" if choice
          else f"{name('preset')} none (the library defaults)")
    # (with preset none a head setting of another head keeps build_train_config's own message)
    wrong = refusals(values, set(given), facts, by, name, check_head=choice is not None)
    if wrong:
        raise ValueError(wrong[0])
    entry = objective_entry(values["objective"])
    chosen = set(given) | set(choice.applied if choice else ())
    for field, value in entry.mask_defaults.items():  # the objective's masking, unless given or the preset's
        if f"mask.{field}" not in chosen:
            values[f"mask.{field}"] = value
    values["model.causal"] = bool(values["model.causal"]) or entry.causal
    return build_train_config(data, out, values, name), choice
