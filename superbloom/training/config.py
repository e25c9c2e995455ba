"""The training settings without torch: OptimConfig, LoopConfig, TrainConfig and the names of the trainer's registries.

The command line shows their defaults and choices without importing torch (every `--help` starts
fast); optim.py, loop.py and train.py use them and re-export them. The names stand for registries
whose entries are torch code: optim.OPTIMIZERS and objectives.OBJECTIVES (tests/test_cli_flags.py
checks that each names list equals its registry's keys). TrainConfig checks its objective's own
requirements with the objective's entry, so building one imports the objectives (and torch).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

from .._bounds import bad
from .._settings import setting
from ..hashing.config import HashConfig
from ..heads.config import HeadConfig, SuperbloomConfig, head_config_dict, head_config_from_dict
from ..model.config import INIT_NAMES, MaskConfig, ModelConfig

OPTIMIZER_NAMES = ("adamw", "adapsgd")  # optim.OPTIMIZERS
SCHEDULE_NAMES = ("rsqrt", "linear", "cosine")  # optim.SCHEDULES: the learning rate after the warm-up
TO_ZERO = ("linear", "cosine")  # schedules that reach 0 at the run's last step: the run needs a step count
OBJECTIVE_NAMES = ("masked", "next-item", "masked-sequence", "text-mlm")  # objectives.OBJECTIVES


@dataclass(frozen=True)
class OptimConfig:
    name: str = setting("adamw", flag="optimizer", choices=OPTIMIZER_NAMES,
                        help="adamw, or adapsgd (no learning rate: --lr and --warmup are not used)")
    lr: float = setting(3e-3, range=(0.0, 100.0), lo_open=True, help="peak learning rate")
    warmup: int = setting(300, range=(0, None), help="linear warm-up steps, then the schedule")
    weight_decay: float = setting(0.0, range=(0.0, 100.0), help="weight decay")
    clip: float = setting(1.0, range=(0.0, 1e6), help="gradient norm clip, 0: none")
    schedule: str = setting("rsqrt", choices=SCHEDULE_NAMES, help=(
        "the learning rate after the warm-up: rsqrt, lr * sqrt(warmup / step) (the paper's); linear or cosine: "
        "down to 0 at the last step (needs --steps or --epochs)"))

    def __post_init__(self):
        if self.name not in OPTIMIZER_NAMES:
            raise bad("optimizer", f"optimizer must be one of {sorted(OPTIMIZER_NAMES)}, got {self.name!r}")
        if self.schedule not in SCHEDULE_NAMES:
            raise bad("schedule", f"schedule must be one of {sorted(SCHEDULE_NAMES)}, got {self.schedule!r}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise bad("lr", f"lr must be a finite number > 0, got {self.lr}")
        if self.warmup < 0:
            raise bad("warmup", f"warmup must be >= 0 steps, got {self.warmup}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise bad("weight_decay", f"weight_decay must be a finite number >= 0, got {self.weight_decay}")
        if not (math.isfinite(self.clip) and self.clip >= 0):
            raise bad("clip", f"clip must be a finite number >= 0 (0: no clipping), got {self.clip}")


@dataclass(frozen=True)
class LoopConfig:
    """How long and how often: shared by every objective."""
    batch_size: int = setting(64, range=(1, 1 << 24), help="examples (sets) per step, over all processes")
    steps: int = setting(0, range=(0, None), help="stop after N steps (0: no limit)")
    epochs: float = setting(0.0, range=(0.0, 1e9), help="stop after N passes over the training examples")
    time_budget: float = setting(0.0, range=(0.0, 1e9), help=(
        "stop after N seconds of training; give at least one of --steps, --epochs, --time-budget"))
    eval_every: int = setting(500, range=(0, None), metavar="STEPS", aliases=("--eval-every-steps",),
                              help="validate every this many STEPS, 0: only at the end")
    keep_best: bool = setting(True, help=(
        "keep the weights with the best validation score as BEST, which inference loads; --no-keep-best: the "
        "last weights"))
    checkpoint_every: float = setting(60.0, range=(0.0, 1e9), metavar="SECONDS",
                                      aliases=("--checkpoint-every-seconds",), help="SECONDS between checkpoints")
    seed: int = setting(0, range=(0, None), help="training seed (initial weights, batches)")
    device: str = setting("auto", help="auto, cpu, cuda or cuda:N (auto: CUDA when available)")
    ema: float = setting(0.999, range=(0.0, 0.999999), what="a fraction in [0, 1)", help=(
        "> 0: validate and keep as BEST an exponential moving average of the weights with this decay (0: none)"))
    patience: int = setting(0, range=(0, None), metavar="VALIDATIONS", help=(
        "also stop once this many validations in a row improved neither the validation score (the objective's) "
        "nor a hybrid's network alone's: the network has stopped improving; 0: off. The presets stop so (patience "
        "3) within a cap of steps or seconds when no --steps, --epochs or --time-budget is given"))

    def __post_init__(self):
        if not 0.0 <= self.ema < 1.0:
            raise bad("ema", f"ema must be in [0, 1) (0: no weight averaging), got {self.ema}")
        if self.batch_size < 1:
            raise bad("batch_size", f"batch_size must be >= 1, got {self.batch_size}")
        for name in ("steps", "epochs", "time_budget", "eval_every", "checkpoint_every", "patience"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise bad(name, f"{name} must be a finite number >= 0, got {v}")
        if not (self.steps or self.epochs or self.time_budget):
            raise ValueError("set at least one of steps, epochs or time_budget (> 0)")
        if self.patience and not self.eval_every:
            raise ValueError(f"patience {self.patience} counts validations without improvement: it needs eval_every > 0 "
                             "(validations during training)")

    @classmethod
    def from_dict(cls, d: dict) -> "LoopConfig":
        """config.json's "loop"; older files also recorded torch's threads, now set_threads' (model/device.py),
        not a setting of the run."""
        return cls(**{k: v for k, v in d.items() if k != "threads"})


@dataclass(frozen=True)
class TrainConfig:
    """The masked id model: what to train on, the model, and the loop."""
    data: str = setting(help="prepared dataset directory")
    out: str = setting(help="model directory to write")
    hash: HashConfig = field(default_factory=HashConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    head: HeadConfig = field(default_factory=SuperbloomConfig)
    mask: MaskConfig = field(default_factory=MaskConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    loop: LoopConfig = field(default_factory=lambda: LoopConfig(steps=1000))
    val_fraction: float = setting(0.02, range=(0.0, 0.999999), what="a fraction in [0, 1)",
                                  help="training sets held out for validation, at most 2000")
    objective: str = setting("masked", choices=OBJECTIVE_NAMES, help=(
        "how training examples are made and the model validated (objectives.OBJECTIVES): masked = the paper's "
        "masked set completion; text-mlm = BERT's masked language model on a prepare-text dataset (needs "
        "--positions; --segment 128 and --mask-rate 0.15 unless given); for ordered data (sequence.py, needs "
        "--positions >= --segment): next-item = causal, every position predicts the next id (SASRec-style), "
        "masked-sequence = masked with positions plus last-id examples (BERT4Rec-style); both validate "
        "leave-one-out"))
    init: str = setting("auto", choices=INIT_NAMES, help=(
        "a new run's token embedding: normal (random, as the paper), cooccurrence (rank-d factors of the training "
        "sets' co-occurrence: rare ids start near the ids they co-occur with), auto (cooccurrence for the masked "
        "set model up to 500,000 ids, else normal)"))
    # which training sets are held out for validation (and its examples): None = loop.seed; the members
    # of an ensemble (members.py) share it, so their weight is chosen on sets none of them trained on
    val_seed: int | None = setting(None, cli=False, help="the validation sets' seed (None: loop.seed); "
                                   "train --members gives every member the first one's")

    def __post_init__(self):
        if not 0.0 <= self.val_fraction < 1.0:
            raise bad("val_fraction", f"val_fraction must be in [0, 1), got {self.val_fraction}")
        if self.val_seed is not None and self.val_seed < 0:
            raise bad("val_seed", f"val_seed must be >= 0, got {self.val_seed}")
        if self.init not in INIT_NAMES:
            raise ValueError(f"unknown init {self.init!r}; choose one of {', '.join(sorted(INIT_NAMES))}")
        if self.optim.schedule in TO_ZERO and not (self.loop.steps or self.loop.epochs):
            raise ValueError(f"the {self.optim.schedule} schedule decays to 0 at the run's last step: give the "
                             "run a step count (--steps or --epochs), or use --schedule rsqrt")
        from .objectives import objective_entry  # the registry's entries are torch code

        objective_entry(self.objective).check(self.model, self.mask)  # the objective's own requirements

    @property
    def validation_seed(self) -> int:
        """The seed of the validation split and its examples (val_seed, else the training seed)."""
        return self.loop.seed if self.val_seed is None else self.val_seed

    def to_dict(self) -> dict:
        """JSON-able, the head with its name (config.json's "train")."""
        return _jsonable(dict(asdict(self), head=head_config_dict(self.head)))

    @classmethod
    def from_saved(cls, saved: dict, data: str, out: str) -> "TrainConfig":
        """The config a model directory's config.json records (also the flat layout of version 0.1)."""
        t = saved.get("train", {})
        flat = lambda c: {f: t[f] for f in c.__dataclass_fields__ if f in t}  # noqa: E731  (0.1 layout)
        return cls(data=data, out=out, hash=HashConfig(**saved["hash"]), model=ModelConfig.from_dict(saved["model"]),
                   head=head_config_from_dict(saved["head"]), mask=MaskConfig(**t.get("mask", {})),
                   optim=OptimConfig(**t.get("optim", flat(OptimConfig))),
                   loop=LoopConfig.from_dict(t.get("loop", flat(LoopConfig))),
                   val_fraction=t.get("val_fraction", _FIELD_DEFAULT_VAL), objective=t.get("objective", "masked"),
                   init=t.get("init", "normal"), val_seed=t.get("val_seed"))


_FIELD_DEFAULT_VAL = TrainConfig.__dataclass_fields__["val_fraction"].default


def _jsonable(obj):
    return json.loads(json.dumps(obj, default=str))
