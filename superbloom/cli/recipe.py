"""A trained model's config.json as a recipe for `train`: its settings read back as train's options.

    superbloom train DATA --out M2 --recipe M        # M's hash / model / head / mask / optim / loop settings
    superbloom train DATA --out M2 --config M/config.json --steps 5000   # the same, a typed flag wins

The "train" section of config.json is TrainConfig.to_dict(), whose entries are the config paths train's
options set (cli/settings.py: every option's destination is its field's path), so the recipe is that
section flattened, read through TrainConfig.from_saved (older layouts read alike). Left out: the data
and output paths (given on the command line now), the settings no option sets (a field with cli=False:
the objective's masking shares, the input embedding, the validation seed), and a head setting equal to
its head's default. Everything outside "train" is a record, not a setting ("versions", "data",
"dataset", "head_built", "init", "parameters", the resume history); "preset" gives only the name of
the preset the recipe came from (its settings are all in "train"). Imports no torch until a recipe is read.
"""
from __future__ import annotations

import dataclasses

__all__ = ["saved_recipe", "recipe_settings"]


def recipe_settings(cfg) -> dict:
    """A TrainConfig -> {config path: value} of the settings train's options set."""
    from .._settings import about
    from ..heads import head_config, head_config_dict
    from ..training.resolve import SECTIONS, TOP
    from ..training.train import TrainConfig

    out = {}
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            if (about(f) or {}).get("cli", True):
                out[f"{section}.{f.name}"] = getattr(getattr(cfg, section), f.name)
    top = {f.name: f for f in dataclasses.fields(TrainConfig)}
    out.update({name: getattr(cfg, name) for name in TOP if (about(top[name]) or {}).get("cli", True)})
    head, default = head_config_dict(cfg.head), head_config_dict(head_config(cfg.head.name))
    out.update({f"head.{k}": v for k, v in head.items() if k == "name" or default.get(k) != v})
    return out


def saved_recipe(saved: dict) -> dict:
    """A model directory's config.json -> train's option values (the recipe hook, config_file.py)."""
    from ..training.train import TrainConfig

    return {**recipe_settings(TrainConfig.from_saved(saved, "", "")), **_preset_of(saved)}


def _preset_of(saved: dict) -> dict:
    """The preset the saved run came from, as `preset` (its settings are all in the recipe, so it
    applies nothing: it keeps the record of where the recipe came from); none: 'none'."""
    name = (saved.get("preset") or {}).get("name")
    from ..training.presets import PRESETS
    return {"preset": name if name in PRESETS else "none"}
