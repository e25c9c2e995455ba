"""The train command and the TrainConfig it builds (resume: the saved settings plus the flags typed now)."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..hashing.config import AUTO_ALPHA, TREE_MIN_IDS, UNHASHED_MAX_IDS, HashConfig
from ..model.config import INIT_NAMES, MaskConfig, ModelConfig
from ..model.device import DEVICE_CHOICES
from ..heads.config import HEAD_CONFIGS, PROPOSALS, TREES, HierarchicalConfig, HybridConfig, SampledConfig
from ..heads.config import SuperbloomConfig, head_config, head_settings
from ..heads.config import MIXES, TERMS as HYBRID_TERMS
from ..heads.config import WEIGHTINGS
from ..training import config as training_config  # OBJECTIVE_NAMES, read when the parser is built
from ..training.config import OPTIMIZER_NAMES, SCHEDULE_NAMES, LoopConfig, OptimConfig, TrainConfig
from ..training.presets import PRESETS, RULES
from . import checks
from .recipe import saved_recipe
from .flags import json_stdout
from .flags import FRACTION, NONNEG, NONNEG_INT, POS_INT, UNIT, default_of, number
from .flags import add_log_to_arg, log_to_callbacks
from .flags import add_trainer_tail


def register(sub):
    _add_train(sub)


def _add_train(sub):
    p = sub.add_parser("train", help="train a model on a prepared dataset",
                       description="Masked training of a Superbloom model. A hybrid head's item-item term is fitted "
                                   "first and validated before the first step: the folder serves it (BEST) at once, "
                                   "and BEST is never below it on validation. Stops at --steps, --epochs, "
                                   "--time-budget or --patience, whichever comes first; checkpoints are resumable.")
    p.add_argument("data", help="prepared dataset directory")
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--preset", choices=["auto", *PRESETS, "none"], default="auto", help=_preset_help())
    h = lambda name: default_of(HashConfig, name)  # noqa: E731
    g = p.add_argument_group("hashing")
    g.add_argument("--alpha", type=NONNEG_INT, default=h("alpha"),
                   help="ids per hash bucket; 0: chosen from the vocabulary size (unhashed up to "
                        f"{UNHASHED_MAX_IDS:,} ids, else {AUTO_ALPHA}) (default %(default)s)")
    g.add_argument("--m", type=checks.HASHES, default=h("m"), help="hash functions per id (default %(default)s)")
    g.add_argument("--hash-seed", type=NONNEG_INT, default=h("seed"), help="hash maps seed (default %(default)s)")
    g.add_argument("--coherent", type=NONNEG_INT, default=h("coherent"),
                   help="how many of the m maps are coherent: similar ids (training co-occurrence) share a "
                        "bucket (appendix C; the exact greedy below "
                        f"{TREE_MIN_IDS:,} ids, a bisection tree from there on); the rest are random. Helps "
                        "on set data with structure; on text random maps did better (default %(default)s)")
    md = lambda name: default_of(ModelConfig, name)  # noqa: E731
    g = p.add_argument_group("model")
    g.add_argument("--d", type=checks.WIDTH, default=md("d"), help="embedding / hidden size (default %(default)s)")
    g.add_argument("--heads", type=checks.HEADS, default=md("heads"), help="attention heads (default %(default)s)")
    g.add_argument("--d-ff", type=checks.FF_WIDTH, default=md("d_ff"), help="feed-forward size (default %(default)s)")
    g.add_argument("--layers", type=checks.LAYERS, default=md("layers"), help="Transformer layers (default %(default)s)")
    g.add_argument("--dropout", type=FRACTION, default=md("dropout"),
                   help="dropout on embeddings and residual branches (default %(default)s)")
    g.add_argument("--attn-dropout", type=FRACTION, default=md("attn_dropout"),
                   help="dropout on attention weights (default %(default)s)")
    g.add_argument("--positions", type=checks.POSITIONS, default=md("positions"),
                   help="learned position embeddings for ordered data, up to this many elements "
                        "(default %(default)s: a set)")
    g.add_argument("--init", choices=sorted(INIT_NAMES), default=default_of(TrainConfig, "init"),
                   help="a new run's token embedding: normal (random, as the paper), cooccurrence (rank-d "
                        "factors of the training sets' co-occurrence: rare ids start near the ids they co-occur "
                        "with), auto (cooccurrence for the masked set model up to 500,000 ids, else normal) "
                        "(default %(default)s)")
    g.add_argument("--causal", action="store_true",
                   help="causal attention: each id sees the ids before it only (implied by --objective next-item)")
    g.add_argument("--post-ln", action="store_true", help="post-LN blocks as in the paper (default: pre-LN)")
    g.add_argument("--dynamic-embedding", action="store_true",
                   help="add to each id's token embeddings the dynamic embedding of its string (MD5 -> 64 trits -> "
                        "a learned 64 x d projection): an id the table never trained, e.g. one added by "
                        "`superbloom extend`, still gets an input of its own")
    g.add_argument("--attention", choices=["softmax", "kernel"], default=md("attention"),
                   help="softmax, or the blog's kernelized attention, linear in the set size (default %(default)s)")
    g = p.add_argument_group("output head (each setting belongs to the heads named in its help)")
    g.add_argument("--head", choices=sorted(HEAD_CONFIGS), default=SuperbloomConfig.name,
                   help="output layer: superbloom (hashed softmax), full (one row per id), sampled (sampled "
                        "softmax), hierarchical (tree softmax); full, sampled and hierarchical are the paper's baselines, unhashed "
                        "with --alpha 1 --m 1 (then full and sampled tie their output rows to the input embedding); "
                        "hybrid = full plus a sparse item-item term (--item-term) mixed in with a weight chosen on the "
                        "validation sets (needs --alpha 1 --m 1; the masked or a sequence objective) (default %(default)s; the presets "
                        "but text set their own: see --preset)")
    g.add_argument("--per-hash-softmax", action="store_const", const=True, default=None,
                   help="superbloom: softmax j over map j's tokens only")
    g.add_argument("--label-smoothing", type=FRACTION, default=None,
                   help=f"superbloom, full, hybrid (default {default_of(SuperbloomConfig, 'label_smoothing')})")
    g.add_argument("--neighbours", type=POS_INT, default=None,
                   help=f"hybrid: item-item values per id, its largest "
                        f"(default {default_of(HybridConfig, 'neighbours')})")
    g.add_argument("--item-term", dest="item_term", choices=HYBRID_TERMS, default=None,
                   help=f"hybrid: the item-item weights: ease (EASE's closed form, dense: up to 60,000 ids, float32 above 25,000), local-ease "
                        f"(EASE on each id's 32 most co-occurring ids: sparse, any size), cooccurrence "
                        f"(cosine), transition (directed: log(1 + how often an id follows another in the training "
                        f"sequences), bigram (text, hashed-hybrid only: p(w | left neighbour) + p(w | right neighbour) of the "
                        f"blank, entering as log(1 + term / eps), eps chosen at validation), auto = ease up to 60,000 ids, else local-ease; with a sequence objective auto builds "
                        f"transition too and the validation chooses "
                        f"(default {default_of(HybridConfig, 'term')})")
    g.add_argument("--item-weighting", dest="item_weighting", choices=("auto",) + WEIGHTINGS, default=None,
                   help="hashed-hybrid, --item-term cooccurrence: how the co-occurrence term weighs a pair: cosine, "
                        "count (how many training sets hold both), idf (count x log(sets / sets holding the "
                        "candidate)); auto = the validation chooses (default auto)")
    g.add_argument("--transition-window", dest="transition_window", type=POS_INT, default=None,
                   help=f"hybrid, --item-term transition: an id counts as following another up to this many ids "
                        f"later (default {default_of(HybridConfig, 'window')})")
    g.add_argument("--gap-decay", dest="gap_decay", type=UNIT, default=None,
                   help=f"hybrid, --item-term transition: a pair g ids apart counts gap_decay ** (g - 1) "
                        f"(default {default_of(HybridConfig, 'gap_decay')})")
    g.add_argument("--item-mix", dest="item_mix", type=NONNEG, default=None,
                   help="hybrid: fix the item-item term's weight instead of choosing it at every validation from "
                        f"{', '.join(f'{m:g}' for m in MIXES)}; 0 = the network alone (BEST is the network's own best "
                        "checkpoint) (default: chosen)")
    g.add_argument("--samples", type=POS_INT, default=None,
                   help=f"sampled: ids drawn per training step (default {default_of(SampledConfig, 'samples')}); "
                        "hybrid: train its network with this many sampled negatives instead of the full softmax; "
                        "superbloom, hashed-hybrid: a sampled softmax over this many hashed tokens a step "
                        "(default: full softmax)")
    g.add_argument("--proposal", choices=PROPOSALS, default=None,
                   help=f"sampled, hybrid with --samples: where the sampled negatives are drawn from "
                        f"(default {default_of(SampledConfig, 'proposal')}); superbloom, hashed-hybrid: uniform or "
                        "unigram over the hashed tokens (default unigram)")
    g.add_argument("--tree", choices=TREES, default=None, help="hierarchical: tree built from the training counts "
                                                             f"(default {default_of(HierarchicalConfig, 'tree')})")
    mk = lambda name: default_of(MaskConfig, name)  # noqa: E731
    g = p.add_argument_group("training examples (sec. 3.1)")
    g.add_argument("--objective", choices=sorted(training_config.OBJECTIVE_NAMES),
                   default=default_of(TrainConfig, "objective"),
                   help="how training examples are made and the model validated: masked = the paper's masked "
                        "set completion; text-mlm = BERT's masked language model on a prepare-text dataset (needs "
                        "--positions; --segment 128 and --mask-rate 0.15 unless given); for ordered data (sequence.py, "
                        "needs --positions >= --segment): next-item = causal, every position predicts the next id "
                        "(SASRec-style), masked-sequence = masked with positions plus last-id examples (BERT4Rec-style); "
                        "both validate leave-one-out (default %(default)s)")
    g.add_argument("--segment", type=checks.LENGTH, default=mk("n"), help="max ids per segment (default %(default)s)")
    g.add_argument("--mask-rate", type=number(float, 0.0, 1.0, lo_open=True), default=mk("mask_rate"),
                   help="fraction of a segment's ids masked, at least one (default %(default)s)")
    g.add_argument("--element-dropout", type=FRACTION, default=mk("element_dropout"),
                   help="probability that an unmasked context id is dropped from a training example "
                        "(default %(default)s)")
    o = lambda name: default_of(OptimConfig, name)  # noqa: E731
    g = p.add_argument_group("optimisation")
    g.add_argument("--optimizer", choices=sorted(OPTIMIZER_NAMES), default=o("name"),
                   help="adamw, or adapsgd (no learning rate: --lr and --warmup are not used) (default %(default)s)")
    g.add_argument("--lr", type=checks.LR, default=o("lr"), help="peak learning rate (default %(default)s)")
    g.add_argument("--warmup", type=NONNEG_INT, default=o("warmup"), help="warm-up steps (default %(default)s)")
    g.add_argument("--schedule", choices=SCHEDULE_NAMES, default=o("schedule"),
                   help="the learning rate after the warm-up: rsqrt, lr * sqrt(warmup / step) (the paper's); "
                        "linear or cosine: down to 0 at the last step (needs --steps or --epochs) "
                        "(default %(default)s)")
    g.add_argument("--weight-decay", type=checks.WEIGHT_DECAY, default=o("weight_decay"), help="weight decay (default %(default)s)")
    g.add_argument("--clip", type=checks.CLIP, default=o("clip"), help="gradient norm clip, 0: none (default %(default)s)")
    lp = lambda name: default_of(LoopConfig, name)  # noqa: E731
    g = p.add_argument_group("loop")
    g.add_argument("--batch-size", type=checks.BATCH, default=lp("batch_size"),
                   help="sets per step, over all processes (default %(default)s)")
    g.add_argument("--steps", type=NONNEG_INT, default=0, help="stop after N steps (0: no limit; default 0)")
    g.add_argument("--epochs", type=checks.EPOCHS, default=0.0, help="stop after N passes over the training sets (default 0)")
    g.add_argument("--time-budget", type=checks.SECONDS, default=0.0, help="stop after N seconds of training (default 0); "
                   "give at least one of --steps, --epochs, --time-budget")
    g.add_argument("--patience", type=NONNEG_INT, default=lp("patience"), metavar="VALIDATIONS",
                   help="also stop once this many validations in a row improved neither the validation rec@10 (the "
                        "objective's score) nor a hybrid's network alone's: the network has stopped improving; 0: "
                        "off. The presets stop so (patience 3) within a cap of steps or seconds when no --steps, "
                        "--epochs or --time-budget is typed (default %(default)s)")
    g.add_argument("--eval-every", "--eval-every-steps", dest="eval_every", type=NONNEG_INT, default=lp("eval_every"),
                   metavar="STEPS", help="validate every this many STEPS, 0: only at the end (default %(default)s)")
    g.add_argument("--checkpoint-every", "--checkpoint-every-seconds", dest="checkpoint_every", type=checks.SECONDS,
                   default=lp("checkpoint_every"), metavar="SECONDS",
                   help="SECONDS between checkpoints (default %(default)s)")
    g.add_argument("--val-fraction", type=FRACTION, default=default_of(TrainConfig, "val_fraction"),
                   help="training sets held out for validation, at most 2000 (default %(default)s)")
    g.add_argument("--seed", type=NONNEG_INT, default=lp("seed"), help="training seed (default %(default)s)")
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
    g.add_argument("--device", default=lp("device"), help=f"{DEVICE_CHOICES} (default %(default)s: CUDA when available)")
    g.add_argument("--ema", type=FRACTION, default=lp("ema"),
                   help="> 0: validate and keep as BEST an exponential moving average of the weights with this "
                        "decay, e.g. 0.999 (default %(default)s: none)")
    g.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its newest complete checkpoint, with its saved settings; "
                        "flags given now may change the optimisation and loop settings (recorded), not the model")
    g.add_argument("--overwrite", action="store_true",
                   help="replace the model in --out with a new run (the old one is kept until the new run has a "
                        "complete checkpoint)")
    g.add_argument("--keep-best", action=argparse.BooleanOptionalAction, default=lp("keep_best"),
                   help="serve the weights with the best validation rec@10; --no-keep-best: the last weights "
                        "(default %(default)s)")
    add_trainer_tail(p)  # --memory-limit, --quiet, --log-to, --json
    p.set_defaults(func=cmd_train)
    p.set_defaults(resolve=resolved_options, recipe_hook=saved_recipe)  # --print-config, --recipe (config_file.py)


def _preset_help() -> str:
    """--preset's help: each preset, when auto picks it and what it sets (training/presets.py)."""
    rules = [name for name, _ in RULES]
    listed = "; ".join(f"{p.name} ({p.when}): {p.describe()} [{p.evidence}]"
                       for p in sorted(PRESETS.values(), key=lambda p: rules.index(p.name) if p.name in rules else 99))
    return ("the best measured recipe for the data; a flag typed here overrides the preset's setting, and a typed "
            "flag the recipe makes meaningless is an error. auto (the default): chosen from the dataset's meta.json "
            f"(first that fits: {', '.join(rules)}), printed and recorded in config.json; none: the library's "
            f"defaults (the pure superbloom head, alpha auto). {listed}")


def apply_preset(args) -> dict | None:
    """A new run's --preset: its settings written into `args` where no flag was typed (args.given),
    the meaningless typed flags refused (ValueError naming the flag), the chosen line printed ->
    config.json's "preset" record (None for --preset none)."""
    from ..training.presets import DatasetFacts, refusals, resolve

    given = set(getattr(args, "given", set()))
    facts = DatasetFacts.read(args.data)
    choice = resolve(args.preset, facts, given)
    for dest, value in (choice.applied.items() if choice else ()):
        setattr(args, dest, value)
    by = (f"preset {'auto -> ' if choice.auto else ''}{choice.preset.name}" if choice
          else "--preset none (the library defaults)")
    # (with --preset none a head setting of another head keeps _head_config's own message)
    wrong = refusals(vars(args), given, facts, HEAD_FLAGS if choice else {}, by)
    if wrong:
        raise ValueError(wrong[0])
    if choice is None:
        return None
    # the preset's settings count as given for the objective's own defaults (_mask_default): its
    # --segment stands, not the objective's
    args.given = given | set(choice.applied)
    if os.environ.get("RANK", "0") == "0":  # once under torchrun (every rank resolves the same choice)
        print(choice.line())
    return choice.record()


def _head_config(args):
    """The --head's config from the head settings given; a setting of another head is an error."""
    given = {field: getattr(args, dest) for dest, field in HEAD_FLAGS.items() if getattr(args, dest) is not None}
    wrong = [n for n in given if n not in head_settings(args.head)]
    if wrong:
        flag = {field: dest for dest, field in HEAD_FLAGS.items()}
        as_flag = lambda n: "--" + flag.get(n, n).replace("_", "-")  # noqa: E731
        raise ValueError(f"{as_flag(wrong[0])} is not a setting of the {args.head} head "
                         f"(its settings: {', '.join(as_flag(s) for s in head_settings(args.head)) or 'none'})")
    return head_config(args.head, **given)


# the head settings' flags: argparse dest -> the head config's field (the hybrid's --item-* flags
# would otherwise read like model-wide settings, and --init is the token embedding's start)
HEAD_FLAGS = {"per_hash_softmax": "per_hash_softmax", "label_smoothing": "label_smoothing", "samples": "samples",
              "proposal": "proposal", "tree": "tree", "neighbours": "neighbours", "item_term": "term", "item_weighting": "weighting",
              "transition_window": "window", "gap_decay": "gap_decay",
              "item_mix": "mix"}


def _objective_mask_defaults(objective: str) -> dict:
    """The MaskConfig fields the objective sets for a new run (objectives.ObjectiveEntry.mask_defaults:
    BERT's masking for text-mlm and the sequence objectives, the set model's defaults otherwise)."""
    from ..training.objectives import objective_entry  # torch: imported when a command runs, not for --help

    return objective_entry(objective).mask_defaults


def _mask_default(args, name: str, dest: str = "", fixed=None):
    """MaskConfig field `name` of a new run: the flag `dest` as typed, else the objective's own
    setting (_objective_mask_defaults), else the flag's default. A field without a flag (`fixed`:
    its value) only takes the objective's setting."""
    dest = dest or name
    if fixed is not None:
        typed = False
    else:
        typed = dest in args.given if hasattr(args, "given") else getattr(args, dest) != default_of(MaskConfig, name)
    own = _objective_mask_defaults(args.objective)
    if name in own and not typed:
        return own[name]
    return fixed if fixed is not None else getattr(args, dest)


def train_config_from_args(args, base: TrainConfig | None = None, given: set[str] = frozenset()) -> TrainConfig:
    """The TrainConfig of the command line; with `base` (a resumed run's saved config) only the flags
    in `given` (those typed on the command line) replace its settings."""
    from ..training.objectives import objective_entry  # torch: imported when a command runs, not for --help

    def pick(dest, saved):
        return getattr(args, dest) if base is None or dest in given else saved

    b = base or TrainConfig(data=args.data, out=args.out, loop=LoopConfig(steps=1))  # defaults (unused if no base)
    objective = pick("objective", b.objective)
    head_flags = {"head", *HEAD_FLAGS}
    return TrainConfig(
        data=args.data, out=args.out,
        hash=HashConfig(alpha=pick("alpha", b.hash.alpha), m=pick("m", b.hash.m), seed=pick("hash_seed", b.hash.seed),
                        coherent=pick("coherent", b.hash.coherent)),
        model=ModelConfig(d=pick("d", b.model.d), heads=pick("heads", b.model.heads), d_ff=pick("d_ff", b.model.d_ff),
                          layers=pick("layers", b.model.layers), dropout=pick("dropout", b.model.dropout),
                          attn_dropout=pick("attn_dropout", b.model.attn_dropout),
                          positions=pick("positions", b.model.positions),
                          norm_first=not pick("post_ln", not b.model.norm_first), embedding=b.model.embedding,
                          attention=pick("attention", b.model.attention),
                          causal=bool(pick("causal", b.model.causal)) or objective_entry(objective).causal,
                          dynamic=bool(pick("dynamic_embedding", b.model.dynamic))),
        head=_head_config(args) if base is None or head_flags & given else b.head,
        mask=MaskConfig(n=pick("segment", b.mask.n) if base else _mask_default(args, "n", "segment"),
                        mask_rate=pick("mask_rate", b.mask.mask_rate) if base else _mask_default(args, "mask_rate"),
                        p_mask=b.mask.p_mask if base else _mask_default(args, "p_mask", fixed=b.mask.p_mask),
                        p_random=b.mask.p_random if base else _mask_default(args, "p_random", fixed=b.mask.p_random),
                        element_dropout=pick("element_dropout", b.mask.element_dropout) if base
                        else _mask_default(args, "element_dropout")),
        optim=OptimConfig(name=pick("optimizer", b.optim.name), lr=pick("lr", b.optim.lr),
                          warmup=pick("warmup", b.optim.warmup), weight_decay=pick("weight_decay", b.optim.weight_decay),
                          clip=pick("clip", b.optim.clip), schedule=pick("schedule", b.optim.schedule)),
        loop=LoopConfig(batch_size=pick("batch_size", b.loop.batch_size), steps=pick("steps", b.loop.steps),
                        epochs=pick("epochs", b.loop.epochs), time_budget=pick("time_budget", b.loop.time_budget),
                        eval_every=pick("eval_every", b.loop.eval_every), keep_best=pick("keep_best", b.loop.keep_best),
                        checkpoint_every=pick("checkpoint_every", b.loop.checkpoint_every),
                        seed=pick("seed", b.loop.seed),
                        device=pick("device", b.loop.device), ema=pick("ema", b.loop.ema),
                        patience=pick("patience", b.loop.patience)),
        val_fraction=pick("val_fraction", b.val_fraction), objective=objective, init=pick("init", b.init))


def resolve_train(args) -> tuple[TrainConfig, dict | None]:
    """The run's TrainConfig and config.json's preset record (None: none, or a resumed run)."""
    from ..storage.checkpoint import latest_checkpoint
    from ..training.rundir import read_saved

    if args.resume and args.overwrite:
        raise ValueError("--resume and --overwrite exclude each other")
    if args.resume and latest_checkpoint(args.out) is not None:  # the run's own settings + the flags given now
        if "preset" in args.given and args.preset != "none":
            raise ValueError(f"--preset {args.preset}: a resumed run keeps its saved settings (config.json); "
                             "drop --preset")
        saved = read_saved(Path(args.out), ("hash", "model", "head"),
                           lambda config: TrainConfig.from_saved(config, args.data, args.out))
        return train_config_from_args(args, saved, args.given), None
    record = apply_preset(args)
    return train_config_from_args(args), record


def resolved_options(args) -> tuple[dict, list[str]]:
    """--print-config: the run's settings as flag values (cli/recipe.py), the preset's line as a comment."""
    import contextlib
    import io

    from .recipe import recipe_flags

    line = io.StringIO()
    with contextlib.redirect_stdout(line):
        cfg, _ = resolve_train(args)
    return recipe_flags(cfg.to_dict()), line.getvalue().splitlines()


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

    from ..storage.files import load_json
    from ..training.train import train

    with json_stdout(args.json):
        cfg, record = resolve_train(args)
        checks.refuse_training_memory("train", cfg.data, cfg.hash, cfg.model, cfg.loop.batch_size, cfg.mask.n,
                                      args.samples, args.memory_limit)
        run = train
        if args.member_proposals and args.members == 1:
            raise ValueError("--member-proposals: the proposals of an ensemble's members; give --members K (K >= 2)")
        if args.members != 1:
            from functools import partial

            checks.refuse_members_memory(args.members, cfg.data, cfg.hash, cfg.model, args.memory_limit)

            from ..training.members import train_members
            run = partial(train_members, members=args.members, proposals=tuple((args.member_proposals or "").split(",")) if args.member_proposals else ())
        out = run(cfg, progress=not args.quiet, resume=args.resume, overwrite=args.overwrite,
                  record={"preset": record} if record else None, callbacks=log_to_callbacks(args))
    if args.json:
        saved = load_json(Path(out) / "config.json")
        print(json.dumps({"out": str(out), "parameters": saved.get("parameters"),
                          **({"members": saved["members"], "item_mix": saved["item_mix"]} if "members" in saved else {})},
                         indent=2))
        return
    print(f"model written to {out}")

