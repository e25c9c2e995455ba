"""Training: one loop for every objective, and the masked training of a Superbloom model
(sec. 2.4, 3.1-3.2) built on it: train(cfg) -> model directory.

    superbloom train data/wiki --out runs/wiki --alpha 4 --layers 4 --time-budget 600

`fit(objective, ...)` is the loop (loop.py, with LoopConfig, Objective and the run directory; the
first two are importable from here too). An `Objective` is a module whose forward(batch) returns a scalar
loss, how the rows of each step are drawn (the same on every rank), how a rank turns its share of
rows into a batch on its device, and how to validate. The masked id model (`masked_set_objective`)
is one; the text model and the set-embedding losses are others, with the same checkpoints,
progress bar, metrics log and device handling.

One code path for 1 process and N processes: under torchrun (device.init_distributed) the model is
wrapped in DistributedDataParallel (gloo on CPU, NCCL on GPU), every rank reads its own slice of
each global batch, every decision to stop is all-reduced, and rank 0 alone writes. The optimizer
comes from optim.make_optimizer (warm-up + inverse-sqrt schedule), gradients are clipped, metrics go
to metrics.jsonl, and checkpoints are atomic and resumable: `resume=True` continues a killed run
where its last checkpoint left it (weights, optimizer, schedule, data order and every rank's RNG).
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn as nn

from .batches import MaskConfig, epoch_batches, training_batch
from .checkpoint import holds_model, latest_checkpoint
from .coherent import CoherentStats
from .dataset import Dataset, SetArray
from .decode import DecodeConfig
from .device import init_distributed
from .evaluate import Examples, make_examples
from .files import load_json, save_json
from .hashing import BloomHash, HashConfig
from .heads import HeadConfig, SuperbloomConfig, head_config_dict, head_config_from_dict
from .loop import SELECT, LoopConfig, Objective, RunDir, _truncate_metrics, fit
from .metrics import summarize, target_ranks
from .model import ModelConfig, build_model, count_parameters
from .optim import OptimConfig
from .predictor import rank_contexts
from .remap import align_dataset, format_alignment
from .sequence import BUILDERS as SEQUENCE_BUILDERS, SEQUENCE_OBJECTIVES, check_objective
from .vocab import Vocab
from .warmstart import INITS, initialise, resolve_init


@dataclass(frozen=True)
class TrainConfig:
    """The masked id model: what to train on, the model, and the loop."""
    data: str
    out: str
    hash: HashConfig = field(default_factory=HashConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    head: HeadConfig = field(default_factory=SuperbloomConfig)
    mask: MaskConfig = field(default_factory=MaskConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    loop: LoopConfig = field(default_factory=lambda: LoopConfig(steps=1000))
    val_fraction: float = 0.02  # training sets held out for validation (max 2000 sets)
    objective: str = "masked"  # a name in OBJECTIVES: how examples are made and the model validated
    init: str = "auto"  # a new run's token embedding (warmstart.INITS): auto | normal | cooccurrence

    def __post_init__(self):
        if not 0.0 <= self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in [0, 1), got {self.val_fraction}")
        if self.init not in INITS:
            raise ValueError(f"unknown init {self.init!r}; choose one of {', '.join(sorted(INITS))}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {self.objective!r}; choose one of {', '.join(sorted(OBJECTIVES))}")
        check_objective(self.objective, self.model, self.mask)

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
                   loop=LoopConfig(**t.get("loop", flat(LoopConfig))),
                   val_fraction=t.get("val_fraction", _FIELD_DEFAULT_VAL), objective=t.get("objective", "masked"),
                   init=t.get("init", "normal"))


_FIELD_DEFAULT_VAL = TrainConfig.__dataclass_fields__["val_fraction"].default
VAL_TARGETS_PER_SET = 16


def split_validation(train: SetArray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of training sets used for training / validation (sets with >= 2 ids only)."""
    rows = np.flatnonzero(train.lengths >= 2)
    rng = np.random.default_rng([seed, 1])
    n_val = min(2000, int(round(fraction * len(rows))))
    perm = rng.permutation(rows)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def masked_set_objective(model: nn.Module, hashing: BloomHash, sets: SetArray, train_rows: np.ndarray,
                         val: Examples | None, mask: MaskConfig, batch_size: int, seed: int,
                         device: torch.device, merge: bool) -> Objective:
    """Masked training over sets (sec. 3.1): segments of <= mask.n ids, 80/10/10 masking; validation
    is rec@k of one held-out id per example (evaluate.py's protocol) on sets carved from training."""
    lengths = sets.lengths

    def epoch(e: int) -> list[np.ndarray]:  # a function of (seed, epoch) only
        return epoch_batches(train_rows, lengths, batch_size, mask.n, np.random.default_rng([seed, 2, e]))

    def batch(rows: np.ndarray, rng: np.random.Generator):
        return training_batch(sets, rows, hashing, mask, rng, merge=merge).to(device)

    def rank():
        return rank_contexts(model, hashing, val.contexts, 20, DecodeConfig())

    def metrics(ranking) -> dict:
        return summarize(target_ranks(ranking.ids.numpy(), val.targets))

    def validate() -> dict:
        return model.head.choose(rank, metrics, SELECT)  # a head may choose settings here (heads/base.py)

    return Objective(model, len(train_rows), epoch, batch, validate if val is not None else None, SELECT)


@dataclass(frozen=True)
class ObjectiveInputs:
    """What train() hands an objective builder: the built model and everything it was built from."""
    model: nn.Module
    hashing: BloomHash
    data: Dataset
    train_rows: np.ndarray  # rows of data.train to train on
    val_rows: np.ndarray  # rows of data.train held out for validation
    cfg: TrainConfig
    model_cfg: ModelConfig  # the model's settings (a resumed run's saved ones)
    device: torch.device


def masked(x: ObjectiveInputs) -> Objective:
    """The default: masked training over sets (sec. 3.1), BEST by rec@10 on held-out training sets."""
    cfg = x.cfg
    # many held-out ids per validation set: a steadier score to pick the BEST checkpoint with
    val = (make_examples(x.data.train.subset(x.val_rows), cfg.mask.n, VAL_TARGETS_PER_SET, cfg.loop.seed)
           if len(x.val_rows) else None)
    return masked_set_objective(x.model, x.hashing, x.data.train, x.train_rows, val, cfg.mask, cfg.loop.batch_size,
                                cfg.loop.seed, x.device, merge=not x.model_cfg.positions)


# name -> builder; another objective (next-item, text MLM, ...) is one more entry here, chosen by
# TrainConfig.objective (`train --objective NAME`), with the same loop, checkpoints and devices
OBJECTIVES: dict[str, Callable[[ObjectiveInputs], Objective]] = {"masked": masked}
OBJECTIVES["text-mlm"] = lambda x: __import__("superbloom.text.mlm", fromlist=["_"]).text_mlm(x)  # sec. 4
OBJECTIVES.update(SEQUENCE_BUILDERS)  # next-item (causal, SASRec-style), masked-sequence (BERT4Rec-style)


# settings a resumed run must keep: they define the model and its data (the rest may change)
ARCHITECTURE = ("hash", "model", "head", "mask", "val_fraction", "objective", "init")


def run_changes(saved: dict, cfg: TrainConfig) -> tuple[list[str], list[str]]:
    """(architecture changes, other changes) of `cfg` against the saved config.json, as
    'field old -> new' strings."""
    now = cfg.to_dict()
    before = dict(saved.get("train", {}), hash=saved["hash"], model=saved["model"], head=saved["head"])
    before["head"] = head_config_dict(head_config_from_dict(before["head"]))  # older layouts read alike
    before["model"] = asdict(ModelConfig.from_dict(before["model"]))
    arch, other = [], []
    for key in now:
        if key in ("data", "out"):
            continue
        old, new = before.get(key), now[key]
        if isinstance(new, dict) and isinstance(old, dict):
            diffs = [f"{key}.{k} {old.get(k)!r} -> {v!r}" for k, v in new.items() if old.get(k) != v]
        else:
            diffs = [f"{key} {old!r} -> {new!r}"] if old != new and key in before else []
        (arch if key in ARCHITECTURE else other).extend(diffs)
    return arch, other


# ------------------------------------------------------------------------------ the masked id model


def train(cfg: TrainConfig, progress: bool = True, resume: bool = False, overwrite: bool = False) -> Path:
    """Masked training of a Superbloom model on a prepared dataset -> the model directory.

    cfg.out may not hold a model unless resume=True (continue its newest complete checkpoint; the
    architecture must not change, other settings may and are recorded) or overwrite=True (a new
    run that replaces it once it has a complete checkpoint of its own). Every setting is checked
    before anything is written."""
    d = init_distributed(cfg.loop.device)
    if cfg.loop.threads:
        torch.set_num_threads(cfg.loop.threads)
    out = Path(cfg.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a model directory")
    data = Dataset(cfg.data)
    ckpt = latest_checkpoint(out, promote=True) if resume else None  # no finished step lost
    if resume and ckpt is None:
        if holds_model(out):
            raise ValueError(f"--resume: {out} holds model files but no complete checkpoint to continue from; "
                             "nothing was changed (start a new run there with --overwrite)")
        if d.main:
            print(f"no checkpoint in {out}; starting a new run" + (" (replacing the config files of a run stopped "
                  "before its first checkpoint)" if (out / "config.json").exists() else ""))
    if ckpt is None and holds_model(out) and not overwrite:
        raise ValueError(f"{out} already holds a model; pass --resume to continue it or --overwrite to replace it "
                         "(the old model is kept until the new run has a complete checkpoint)")
    coherent_stats = None  # how a new run's coherent maps were built (for config.json)
    if ckpt is not None:
        saved = load_json(out / "config.json")
        arch, changed = run_changes(saved, cfg)
        if arch:
            raise ValueError(f"--resume cannot change the model or its data: {'; '.join(arch)} "
                             f"(the run in {out} keeps its settings; start a new run with --overwrite to change them)")
        hcfg, mcfg = HashConfig(**saved["hash"]), ModelConfig.from_dict(saved["model"])
        head_cfg = head_config_from_dict(saved["head"])
        hashing = BloomHash.load(out / "hashing.safetensors")
        aligned = align_dataset(data, Vocab.load(out))  # data prepared with another vocabulary (remap.py)
        if aligned is not None and d.main:
            print("resume: " + format_alignment(aligned))
    else:
        hcfg, mcfg, head_cfg = cfg.hash.resolve(data.n_ids), cfg.model, cfg.head  # alpha 0: from the vocabulary
        t0 = time.time()
        coherent_stats = CoherentStats() if hcfg.coherent else None
        hashing = BloomHash.build(data.n_ids, hcfg, data.train if hcfg.coherent else None, coherent_stats)
        hash_seconds = time.time() - t0
    torch.manual_seed(cfg.loop.seed)
    model = build_model(mcfg, head_cfg, hashing, data.counts, data.vocab.strings if mcfg.dynamic else None)
    train_rows, val_rows = split_validation(data.train, cfg.val_fraction, cfg.loop.seed)
    if model.head.uses_context and cfg.objective not in ("masked", *SEQUENCE_OBJECTIVES):
        raise ValueError(f"the {head_cfg.name} head scores with the set's context: it trains with the masked "
                         f"set objective or a sequence objective ({', '.join(SEQUENCE_OBJECTIVES)}), "
                         f"not {cfg.objective!r}")
    head_built = None
    if ckpt is None:  # a head with a structure from the training sets (heads/base.py: fit)
        # (heads/hybrid.py), validation unseen: a leave-one-out dataset's training prefixes hold no
        # validation or test id, so a sequence objective builds it from all of them (as it trains)
        rows = (np.arange(len(data.train)) if data.split == "leave-one-out" and cfg.objective in SEQUENCE_OBJECTIVES
                else train_rows)
        head_built = model.head.fit(data.train.subset(rows), ordered=cfg.objective in SEQUENCE_OBJECTIVES)
    n_params = count_parameters(model)
    init = None
    init_name = resolve_init(cfg.init, data.n_ids, cfg.objective)
    if ckpt is None and init_name != "normal":  # a new run's start, from the training rows only (validation unseen)
        t0 = time.time()
        init = initialise(init_name, model, hashing, data.train.subset(train_rows), data.n_ids, cfg.loop.seed)
        if init is not None:
            init["seconds"] = round(time.time() - t0, 2)
    model.to(d.device)
    if len(train_rows) < cfg.loop.batch_size:
        raise ValueError(f"{cfg.data}: {len(train_rows)} training sets with two or more ids; "
                         f"need at least one batch ({cfg.loop.batch_size}); lower --batch-size")
    run = RunDir(out, staged=ckpt is None and holds_model(out))
    if d.main and ckpt is None:
        run.path.mkdir(parents=True, exist_ok=True)
        hashing.save(run.path / "hashing.safetensors")
        data.vocab.save(run.path)
        save_json(run.path / "config.json", {
            "hash": asdict(hcfg), "model": asdict(mcfg), "head": head_config_dict(head_cfg),
            "train": cfg.to_dict(), "data": data.meta, "parameters": n_params,
            "hash_build_seconds": round(hash_seconds, 2), **({"init": init} if init else {}),
            **({"coherent_build": asdict(coherent_stats)} if coherent_stats is not None else {}),
            **({"head_built": head_built} if head_built else {})})
    if d.main and ckpt is not None:
        _truncate_metrics(out / "metrics.jsonl", load_json(ckpt / "state.json")["step"])
        if changed:
            print("resume: changed settings (recorded in config.json): " + "; ".join(changed))
            resumes = saved.get("resumes", []) + [{"from": ckpt.name, "changed": changed}]
            save_json(out / "config.json", dict(saved, train=cfg.to_dict(), resumes=resumes))
    if d.main:
        print(f"model: {n_params:,} parameters ({mcfg.layers} layers, d={mcfg.d}, {mcfg.heads} heads, "
              f"d_ff={mcfg.d_ff}); hashing: {data.n_ids:,} ids -> {hashing.n_tokens:,} tokens "
              f"(alpha={hcfg.alpha}, m={hcfg.m}); {len(train_rows):,} training sets, {len(val_rows):,} validation; "
              f"device {d.device}" + (f" x {d.world} processes" if d.world > 1 else ""))
        if init:
            print(f"init: {init['init']} factors (rank {init['rank']}) for {init['tokens_set']:,} of "
                  f"{init['tokens']:,} tokens in {init['seconds']} s")
        if run.staged:
            print(f"{out} holds a model: this run writes to {run.path} and replaces it at its first checkpoint")
    obj = OBJECTIVES[cfg.objective](ObjectiveInputs(model, hashing, data, train_rows, val_rows, cfg, mcfg, d.device))
    try:
        fit(obj, cfg.loop, cfg.optim, run, d, ckpt, progress)
    finally:
        if d.main and run.staged:  # never reached a checkpoint: the previous model stays, the attempt goes
            shutil.rmtree(run.path, ignore_errors=True)
    return out


def _jsonable(obj):
    return json.loads(json.dumps(obj, default=str))
