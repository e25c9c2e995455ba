"""train's flags <-> TrainConfig's fields: the one table of names, and a model's config.json as a recipe.

    superbloom train DATA --out M2 --recipe M        # M's hash / model / head / mask / optim / loop settings
    superbloom train DATA --out M2 --config M/config.json --steps 5000   # the same, a typed flag wins

Every field of TrainConfig (as config.json's "train" section spells it: `section.field`) is set by
the `train` flag of the same name, unless it is in ALIASES (the flag has another name: the names
users know, --segment for the paper's n) or in DERIVED (no flag of its own, with the reason).
NOT_SETTINGS lists train's flags that set no field. tests/test_config_file.py reads these tables
and checks them against `train --help` and the config dataclasses, so a new field or flag that fits
none of them fails a test.

A recipe is the "train" section of a model's config.json read back as flag values (recipe_flags):
the data and output paths (given on the command line now), and everything outside "train" are
ignored: "versions", "data" (the prepare record), "dataset", "preset" (the record of how the
settings were chosen: the settings themselves are in "train"), "head_built", "init" (the record;
"train"'s init is the setting), "parameters", "hash_build_seconds", the top-level "hash", "model"
and "head" (the resolved copies of "train"'s) and the resume history. A head setting equal to its
head's default is left out (the flag's own default, None, means the same). Imports no torch until
a recipe is read.
"""
from __future__ import annotations

# config field -> train's flag (argparse dest), where the two names differ
ALIASES = {
    "hash.seed": "hash_seed",  # --seed is the training loop's seed
    "model.norm_first": "post_ln",  # negated (NEGATED): --post-ln trains the paper's post-LN blocks
    "model.dynamic": "dynamic_embedding",  # reads as an embedding, not as a dynamic model
    "head.name": "head",
    "head.term": "item_term",  # the hybrids' item-item term; --term would read as model-wide
    "head.weighting": "item_weighting",  # the hashed hybrid's co-occurrence weighting
    "head.window": "transition_window",  # of the transition term only
    "head.mix": "item_mix",  # the hybrids' term weight
    "mask.n": "segment",  # the paper's segment length n
    "optim.name": "optimizer",
}
NEGATED = frozenset({"post_ln"})  # flag = not field

# config fields no flag sets, and why
DERIVED = {
    "data": "the DATA argument (a path: never part of a recipe)",
    "model.embedding": "the input embedding: always 'hashed' for train (--dynamic-embedding adds the dynamic one)",
    "mask.p_mask": "BERT's share of masked ids fed as [MASK]: set by the objective (objectives.py mask_defaults)",
    "mask.p_random": "BERT's share of masked ids fed as a random id: set by the objective",
    "val_seed": "the validation sets' seed: train --members gives every member the first one's (None: --seed)",
}

# fields a recipe leaves out: the paths, given on the command line now
PATHS = ("data", "out")

# train's flags that set no config field, and why
NOT_SETTINGS = {
    "preset": "chooses the defaults of the settings (training/presets.py); recorded as config.json's preset",
    "resume": "how to run (continue --out), not what to train",
    "overwrite": "how to run (replace --out), not what to train",
    "quiet": "output only",
    "json": "output only",
    "log_level": "output only (which messages are shown)",
    "log_to": "output only (where the metrics also go)",
    "memory_limit": "a check before the run (cli/checks.py), not what to train",
    "threads": "how to run (torch's CPU threads: model/device.set_threads), not what to train",
    "members": "how many models of the recipe to train as one ensemble (training/members.py), not the recipe",
    "member_proposals": "the ensemble's members' proposals (training/members.py), each saved in its member's config",
}

# the sections of config.json's "train" (TrainConfig's nested configs); the rest are top-level fields
SECTIONS = ("hash", "model", "head", "mask", "optim", "loop")


def flag_of(path: str) -> str:
    """The train flag (argparse dest) of config field `path` ('mask.n' -> 'segment')."""
    return ALIASES.get(path, path.rsplit(".", 1)[-1])


def train_fields(train: dict) -> dict:
    """config.json's "train" section flattened: {'hash.alpha': 1, ..., 'objective': 'masked'}."""
    out = {}
    for key, value in train.items():
        if key in SECTIONS and isinstance(value, dict):
            out.update({f"{key}.{f}": v for f, v in value.items()})
        else:
            out[key] = value
    return out


def recipe_flags(train: dict) -> dict:
    """A TrainConfig.to_dict() (config.json's "train") -> train's flag values (dest -> value)."""
    from ..heads import head_config, head_config_dict

    fields = train_fields(train)
    defaults = head_config_dict(head_config(fields.get("head.name", "superbloom")))
    out = {}
    for path, value in fields.items():
        if path in DERIVED or path in PATHS:
            continue
        if path.startswith("head.") and path != "head.name" and defaults.get(path[5:]) == value:
            continue
        dest = flag_of(path)
        out[dest] = (not value) if dest in NEGATED else value
    return out


def saved_recipe(saved: dict) -> dict:
    """A model directory's config.json -> train's flag values (train's recipe hook, config_file.py):
    read through TrainConfig.from_saved, so the older layouts read alike."""
    from ..training.train import TrainConfig

    return {**recipe_flags(TrainConfig.from_saved(saved, "", "").to_dict()), **_preset_of(saved)}


def _preset_of(saved: dict) -> dict:
    """The preset the saved run came from, as `preset` (its settings are all in the recipe, so it
    applies nothing: it keeps the record of where the recipe came from); none: 'none'."""
    name = (saved.get("preset") or {}).get("name")
    from ..training.presets import PRESETS
    return {"preset": name if name in PRESETS else "none"}
