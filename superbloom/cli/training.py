"""The train command: its options derived from TrainConfig's fields (cli/settings.py), resolved into
a TrainConfig by the library (training/resolve.py: defaults < the objective's < the preset's < given;
a resumed run: its saved settings + the given ones)."""
from __future__ import annotations

import argparse
import dataclasses
import os

from ..hashing.config import HashConfig
from ..model.config import MaskConfig, ModelConfig
from ..heads.config import HEAD_CONFIGS, PROPOSALS
from ..training.config import LoopConfig, OptimConfig, TrainConfig
from ..training.presets import PRESETS, RULES
from . import checks
from .recipe import saved_recipe
from .flags import json_stdout, log_to_callbacks
from .flags import NONNEG_INT
from .flags import add_trainer_tail
from .settings import add_config, add_head_settings, flag_of, values

HEAD_HELP = ("output layer: superbloom (hashed softmax), full (one row per id), sampled (sampled softmax), "
             "hierarchical (tree softmax); full, sampled and hierarchical are the paper's baselines, unhashed "
             "with --alpha 1 --m 1 (then full and sampled tie their output rows to the input embedding); "
             "hybrid = full plus a sparse item-item term (--item-term) mixed in with a weight chosen on the "
             "validation sets (needs --alpha 1 --m 1; the masked or a sequence objective); hashed-hybrid = the "
             "superbloom head plus such a term, at any hashing (default %(default)s; the presets set their own: "
             "see --preset)")


def register(sub):
    _add_train(sub)


def _add_train(sub):
    p = sub.add_parser("train", help="train a model on a prepared dataset",
                       description="Masked training of a Superbloom model. A hybrid head's item-item term is fitted "
                                   "first and validated before the first step: the folder serves it (BEST) at once, "
                                   "and BEST is never below it on validation. Stops at --steps, --epochs, "
                                   "--time-budget or --patience, whichever comes first; checkpoints are resumable.")
    add_config(p, TrainConfig, only=("data", "out"), data={"positional": True})
    p.add_argument("--preset", choices=["auto", *PRESETS, "none"], default="auto", help=_preset_help())
    add_config(p.add_argument_group("hashing"), HashConfig, "hash")
    g = p.add_argument_group("model")
    add_config(g, ModelConfig, "model")
    add_config(g, TrainConfig, only=("init",))
    add_head_settings(p.add_argument_group("output head (each setting belongs to the heads named in its help)"),
                      HEAD_HELP)
    g = p.add_argument_group("training examples (sec. 3.1)")
    add_config(g, TrainConfig, only=("objective",))
    add_config(g, MaskConfig, "mask")
    add_config(p.add_argument_group("optimisation"), OptimConfig, "optim")
    g = p.add_argument_group("loop")
    add_config(g, LoopConfig, "loop")
    add_config(g, TrainConfig, only=("val_fraction",))
    g.add_argument("--members", type=NONNEG_INT, default=1, metavar="K",
                   help="K >= 2: train K models of this recipe (seeds SEED..SEED+K-1, the same validation sets) "
                        "into --out/member-i and save them as one ensemble (the mean of their log p + the chosen "
                        "weight x the first hybrid's item-item term); load, eval, predict and serve --out as one "
                        "model (default %(default)s: one model)")
    g.add_argument("--member-proposals", type=proposal_list, default=None, metavar="P[,P...]",
                   help="with --members and sampled negatives (--samples): member i draws them from the i-th "
                        f"proposal, cycled ({', '.join(PROPOSALS)}); log_uniform,uniform: two networks that err apart "
                        "(default: every member the recipe's --proposal)")
    g.add_argument("--threads", type=checks.THREADS, default=0,
                   help="torch CPU threads, 0: torch's default (default %(default)s)")
    g.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its newest complete checkpoint, with its saved settings; "
                        "flags given now may change the optimisation and loop settings (recorded), not the model")
    g.add_argument("--overwrite", action="store_true",
                   help="replace the model in --out with a new run (the old one is kept until the new run has a "
                        "complete checkpoint)")
    add_trainer_tail(p)  # --memory-limit, --quiet, --log-to, --json
    p.set_defaults(func=cmd_train, resolve=resolved_options, recipe_hook=saved_recipe)  # --print-config, --recipe


def _preset_help() -> str:
    """--preset's help: each preset, when auto picks it and what it sets (training/presets.py)."""
    rules = [name for name, _ in RULES]
    listed = "; ".join(f"{p.name} ({p.when}): {p.describe(flag_name)} [{p.evidence}]"
                       for p in sorted(PRESETS.values(), key=lambda p: rules.index(p.name) if p.name in rules else 99))
    return ("the best measured recipe for the data; a flag typed here overrides the preset's setting, and a typed "
            "flag the recipe makes meaningless is an error. auto (the default): chosen from the dataset's meta.json "
            f"(first that fits: {', '.join(rules)}), printed and recorded in config.json; none: the library's "
            f"defaults (the pure superbloom head, alpha auto). {listed}")


def train_flag(path: str) -> str:
    """The train flag of a setting (config path): `mask.n` -> --segment, `head.name` -> --head."""
    if path in ("head.name", "preset"):
        return "--" + path.split(".")[0]
    section, _, field = path.rpartition(".")
    if section == "head":
        owners = [c for c in HEAD_CONFIGS.values() if field in {f.name for f in dataclasses.fields(c)}]
        cls = owners[0] if owners else None
    else:
        cls = {"hash": HashConfig, "model": ModelConfig, "mask": MaskConfig, "optim": OptimConfig,
               "loop": LoopConfig, "": TrainConfig}.get(section)
    fields = {f.name: f for f in dataclasses.fields(cls)} if cls is not None else {}
    return "--" + flag_of(fields[field]) if field in fields else path


def flag_name(path: str) -> str:
    """train_flag without its dashes: how the preset's line names a setting ("alpha 1")."""
    return train_flag(path).lstrip("-")


def resolve_args(args) -> tuple[TrainConfig, object]:
    """The run's TrainConfig and the preset choice (None: none, or a resumed run) of the parsed command
    line: training.resolve.resolve_train with the settings given (typed or from --config)."""
    from ..training.resolve import resolve_train

    if args.resume and args.overwrite:
        raise ValueError("--resume and --overwrite exclude each other")
    given = {p: v for p, v in values(args.parser, args).items() if p not in ("data", "out")}  # the run's folders
    return resolve_train(args.data, args.out, given, args.preset if "preset" in args.given else None,
                         resume=args.resume, name=train_flag)


def resolved_options(args) -> tuple[dict, list[str]]:
    """--print-config: every setting of the resolved run (the head's own, where not its default) as
    option values, the preset's line as a comment."""
    from ..heads.config import head_config, head_config_dict
    from ..training.resolve import settings_of

    cfg, choice = resolve_args(args)
    resolved = settings_of(cfg)
    default_head = head_config_dict(head_config(cfg.head.name))
    out = {}
    for o in args.parser.options:
        if o.path is None or o.path not in resolved:
            continue
        if o.path.startswith("head.") and o.path != "head.name" and default_head.get(o.path[5:]) == resolved[o.path]:
            continue
        out[o.dest] = (not resolved[o.path]) if o.negate else resolved[o.path]
    return out, [choice.line(flag_name)] if choice else []


def proposal_list(text: str) -> str:
    """--member-proposals: comma-separated proposal names (PROPOSALS), checked and kept as one string
    (--print-config writes it as one TOML string, which --config reads back)."""
    names = [p.strip() for p in text.split(",")]
    wrong = [p for p in names if p not in PROPOSALS]
    if wrong:
        raise argparse.ArgumentTypeError(f"{wrong[0]!r} is not a proposal; choose from {', '.join(PROPOSALS)}")
    return ",".join(names)


def cmd_train(args):
    import json
    from pathlib import Path

    from ..storage.files import load_json
    from ..training.train import train

    with json_stdout(args.json):
        cfg, choice = resolve_args(args)
        if choice is not None and os.environ.get("RANK", "0") == "0":  # once under torchrun
            print(choice.line(flag_name))
        checks.refuse_training_memory("train", cfg.data, cfg.hash, cfg.model, cfg.loop.batch_size, cfg.mask.n,
                                      getattr(cfg.head, "samples", 0) or None, args.memory_limit)
        run = train
        if args.member_proposals and args.members == 1:
            raise ValueError("--member-proposals: the proposals of an ensemble's members; give --members K (K >= 2)")
        if args.members != 1:
            from functools import partial

            checks.refuse_members_memory(args.members, cfg.data, cfg.hash, cfg.model, args.memory_limit)

            from ..training.members import train_members
            run = partial(train_members, members=args.members,
                          proposals=tuple(args.member_proposals.split(",")) if args.member_proposals else ())
        out = run(cfg, progress=not args.quiet, resume=args.resume, overwrite=args.overwrite,
                  record={"preset": choice.record()} if choice else None, callbacks=log_to_callbacks(args))
    if args.json:
        saved = load_json(Path(out) / "config.json")
        print(json.dumps({"out": str(out), "parameters": saved.get("parameters"),
                          **({"members": saved["members"], "item_mix": saved["item_mix"]} if "members" in saved else {})},
                         indent=2))
        return
    print(f"model written to {out}")
