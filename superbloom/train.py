"""Training: one loop for every objective, and the masked training of a Superbloom model
(sec. 2.4, 3.1-3.2) built on it: train(cfg) -> model directory.

    superbloom train data/wiki --out runs/wiki --alpha 4 --layers 4 --time-budget 600

`fit(objective, ...)` is the loop. An `Objective` is a module whose forward(batch) returns a scalar
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

import contextlib
import json
import math
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from tqdm.auto import tqdm

from .batches import MaskConfig, epoch_batches, training_batch
from .checkpoint import (holds_model, latest_checkpoint, load_extra, load_optimizer, load_weights, restore_rng,
                         rng_state, save_checkpoint)
from .dataset import Dataset, SetArray
from .decode import DecodeConfig
from .device import Dist, all_gather, any_rank, init_distributed
from .evaluate import Examples, make_examples
from .files import load_json, save_json
from .hashing import BloomHash, HashConfig
from .heads import HeadConfig, SuperbloomConfig, head_config_dict, head_config_from_dict
from .metrics import summarize, target_ranks
from .model import ModelConfig, build_model, count_parameters
from .optim import OptimConfig, make_optimizer, set_lr
from .predictor import rank_contexts
from .remap import align_dataset, format_alignment
from .sequence import BUILDERS as SEQUENCE_BUILDERS, check_objective
from .vocab import Vocab
from .warmstart import INITS, initialise, resolve_init


@dataclass(frozen=True)
class LoopConfig:
    """How long and how often: shared by every objective."""
    batch_size: int = 64  # examples per step, over all ranks
    steps: int = 0  # stop after this many steps (0: no step limit)
    epochs: float = 0.0  # ... or this many passes over the training examples
    time_budget: float = 0.0  # ... or this many seconds (whichever comes first)
    eval_every: int = 500  # validation every this many steps (0: only at the end)
    keep_best: bool = True  # keep the checkpoint with the best validation score too; inference uses it
    checkpoint_every: float = 60.0  # seconds between checkpoints
    seed: int = 0
    threads: int = 0  # torch CPU threads (0: torch's default)
    device: str = "auto"  # auto | cpu | cuda | cuda:N (device.py)
    ema: float = 0.999  # > 0: validate and keep as BEST an exponential moving average of the weights, this decay

    def __post_init__(self):
        if not 0.0 <= self.ema < 1.0:
            raise ValueError(f"ema must be in [0, 1) (0: no weight averaging), got {self.ema}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        for name in ("steps", "epochs", "time_budget", "eval_every", "checkpoint_every", "threads"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v}")
        if not (self.steps or self.epochs or self.time_budget):
            raise ValueError("set at least one of steps, epochs or time_budget (> 0)")


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
SELECT = "rec@10"  # validation metric that picks the BEST checkpoint of the masked id model
VAL_TARGETS_PER_SET = 16


# ------------------------------------------------------------------------------ the objective seam


@dataclass
class Objective:
    """What `fit` trains. `model.forward(batch)` returns the scalar loss to minimise."""
    model: nn.Module
    n_examples: int  # training examples per epoch (for LoopConfig.epochs)
    epoch: Callable[[int], list[np.ndarray]]  # epoch e -> rows of every step (the same on every rank)
    batch: Callable[[np.ndarray, np.random.Generator], Any]  # this rank's rows -> a batch on the device
    validate: Callable[[], dict] | None = None  # -> metrics (called on rank 0); `select` picks BEST
    select: str = SELECT  # higher is better


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

    def scores() -> dict:
        ranking = rank_contexts(model, hashing, val.contexts, 20, DecodeConfig())
        return summarize(target_ranks(ranking.ids.numpy(), val.targets))

    def validate() -> dict:
        if hasattr(model.head, "choose_mix"):  # heads/hybrid.py: its item-item weight is chosen here
            return model.head.choose_mix(scores, SELECT)
        return scores()

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


# ------------------------------------------------------------------------------ the loop


class MetricsLog:
    """metrics.jsonl of the run directory (which a staged run moves: the path is looked up per write)."""

    def __init__(self, run: "RunDir", enabled: bool):
        self.run, self.enabled = run, enabled

    def write(self, **record) -> None:
        if self.enabled:
            with open(self.run.path / "metrics.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")


@dataclass
class RunState:
    """Everything a checkpoint must hold besides weights and optimizer (state.json)."""
    step: int = 0
    epoch: int = 0
    cursor: int = 0  # batches of the current epoch already taken
    examples: int = 0
    seconds: float = 0.0
    best: dict | None = None  # validation metrics of the BEST checkpoint, with its step


def fresh_rngs(seed: int, d: Dist) -> np.random.Generator:
    """This rank's batch RNG for a new run (torch's RNG is seeded by the caller)."""
    return np.random.default_rng([seed, d.rank])


def checkpoint_state(state: RunState, rng: np.random.Generator, d: Dist) -> dict | None:
    """state.json content with every rank's RNG streams (collective: every rank calls it); None off rank 0."""
    mine = {"numpy": rng_state(rng), "torch": torch.get_rng_state().tolist()}
    every = all_gather(mine, d)
    if not d.main:
        return None
    return dict(asdict(state), world=d.world, rng={str(r): s["numpy"] for r, s in enumerate(every)},
                torch_rng={str(r): s["torch"] for r, s in enumerate(every)})


def restore_state(saved: dict, seed: int, d: Dist) -> tuple[RunState, np.random.Generator]:
    """RunState and this rank's RNG from state.json. A rank the checkpoint has no stream for (the
    run resumes on more processes than it was saved with) gets a fresh stream of (seed, rank, step)."""
    state = RunState(**{k: saved[k] for k in ("step", "epoch", "cursor", "examples", "seconds")},
                     best=saved.get("best"))
    rngs, torch_rngs = saved.get("rng", {}), saved.get("torch_rng", {})
    if isinstance(torch_rngs, list):  # written before per-rank torch streams: rank 0's
        torch_rngs = {"0": torch_rngs}
    me = str(d.rank)
    if me in rngs:
        rng = restore_rng(rngs[me])
    else:
        rng = np.random.default_rng([seed, d.rank, state.step])
        print(f"rank {d.rank}: the checkpoint holds no RNG stream for this rank (saved with "
              f"{saved.get('world', len(rngs))} processes); using a fresh one")
    if me in torch_rngs:
        torch.set_rng_state(torch.tensor(torch_rngs[me], dtype=torch.uint8))
    return state, rng


class WeightAverage:
    """Exponential moving average of the weights (Polyak averaging), for validation and the BEST
    checkpoint: decay `decay`, warm-started (the average covers the steps taken so far early on)."""

    def __init__(self, model: nn.Module, decay: float):
        self.params = list(model.parameters())
        self.decay = decay
        self.shadow = [p.detach().clone() for p in self.params]

    @torch.no_grad()
    def update(self, step: int) -> None:
        torch._foreach_lerp_(self.shadow, [p.detach() for p in self.params],
                             1.0 - min(self.decay, (1 + step) / (10 + step)))

    @contextlib.contextmanager
    def swapped(self):
        """The averaged weights in the model for the block; the trained ones back after it."""
        with torch.no_grad():
            saved = [p.detach().clone() for p in self.params]
            torch._foreach_copy_(self.params, self.shadow)
        try:
            yield
        finally:
            with torch.no_grad():
                torch._foreach_copy_(self.params, saved)

    def tensors(self) -> dict[str, torch.Tensor]:
        return {str(i): t for i, t in enumerate(self.shadow)}

    def load(self, tensors: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            for i, t in enumerate(self.shadow):
                t.copy_(tensors[str(i)])


def train_step(model: nn.Module, ddp: nn.Module, opt: torch.optim.Optimizer, batch, optim: OptimConfig,
               step: int) -> tuple[float, float, float]:
    """One optimizer step (1-based `step`): loss, backward, clip, update. -> (loss, grad norm, lr).

    An optimizer that needs second derivatives on some steps (AdapSGD's Hessian estimate) says so
    with `create_graph` and may give a `forward_context` for the forward pass; one without an `lr`
    (learning-rate free) gets no schedule."""
    lr = set_lr(opt, optim, step)
    with getattr(opt, "forward_context", contextlib.nullcontext)():
        loss = ddp(batch)
    opt.zero_grad(set_to_none=True)
    loss.backward(create_graph=bool(getattr(opt, "create_graph", False)))
    if optim.clip:
        gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), optim.clip))
    else:
        gnorm = float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()
                                                            if p.grad is not None])))
    opt.step()
    lv = float(loss.detach())
    if not math.isfinite(lv):
        raise FloatingPointError(f"loss became {lv} at step {step}; lower the learning rate")
    return lv, gnorm, lr


def fit(obj: Objective, loop: LoopConfig, optim: OptimConfig, run: "RunDir | Path", d: Dist,
        resume_from: Path | None = None, progress: bool = True) -> RunState:
    """Train `obj` in a model directory whose config files the caller wrote (a RunDir, or a Path to
    write in place): the loop, validation, BEST and LATEST checkpoints, metrics.jsonl. Resumes from
    `resume_from` if given."""
    run = run if isinstance(run, RunDir) else RunDir(Path(run), staged=False)
    if d.main:
        run.path.mkdir(parents=True, exist_ok=True)
    model = obj.model
    opt = make_optimizer(optim, model.parameters())
    if d.world > 1 and hasattr(opt, "create_graph"):
        raise ValueError(f"the {optim.name} optimizer takes second derivatives, which DistributedDataParallel "
                         "does not support; train it in one process")
    state, rng = RunState(), fresh_rngs(loop.seed, d)
    # the average serves validation and BEST only: without validation it would be an O(parameters)
    # pass per step that nothing reads (0.1-0.3 s a step at 5M ids), so it is not kept
    average = WeightAverage(model, loop.ema) if loop.ema and obj.validate is not None else None
    if resume_from is not None:
        load_weights(model, resume_from)
        load_optimizer(opt, resume_from)
        state, rng = restore_state(load_json(resume_from / "state.json"), loop.seed, d)
        if average is not None:
            saved = load_extra(resume_from, "ema")
            average.load(saved) if saved else print("the checkpoint holds no weight average: it starts anew")
        if d.main:
            print(f"resuming from {resume_from.name} (step {state.step}, {state.seconds:.0f} s trained)")
    ddp = model
    if d.world > 1:
        ddp = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[d.device.index] if d.device.type == "cuda" else None)
    log = MetricsLog(run, d.main)
    per_rank = max(1, loop.batch_size // d.world)
    max_steps = loop.steps or (int(math.ceil(loop.epochs * obj.n_examples / loop.batch_size)) if loop.epochs else 0)
    budget = loop.time_budget or float("inf")

    def checkpoint():
        st = checkpoint_state(state, rng, d)
        if d.main:
            save_checkpoint(run.path, state.step, model, opt, st,
                            extra={"ema": average.tensors()} if average is not None else None)
            run.committed()

    def validation(final: bool = False) -> dict:
        """Validate (rank 0), log, and keep the weights if they are the best so far (with an
        average of the weights: the averaged weights are validated and kept)."""
        with average.swapped() if average is not None else contextlib.nullcontext():
            v = obj.validate()
            log.write(step=state.step, seconds=round(state.seconds, 1), final=final,
                      **{f"val_{k}": x for k, x in v.items()})
            if loop.keep_best and (state.best is None or v[obj.select] > state.best[obj.select]):
                state.best = dict(v, step=state.step)
                save_checkpoint(run.path, state.step, model, None, asdict(state), keep=1, kind="best",
                                pointer="BEST")
        return v

    model.train()
    bar = tqdm(total=max_steps or None, initial=state.step, desc="training", unit="step",
               disable=not progress or not d.main, dynamic_ncols=True)
    start, last_ckpt, ema = time.time() - state.seconds, time.time(), None
    batches = obj.epoch(state.epoch)
    try:
        while (not max_steps or state.step < max_steps) and not any_rank(time.time() - start >= budget, d):
            if state.cursor >= len(batches):  # next epoch
                state.epoch += 1
                state.cursor = 0
                batches = obj.epoch(state.epoch)
            rows = batches[state.cursor][d.rank * per_rank:(d.rank + 1) * per_rank]
            loss, gnorm, lr = train_step(model, ddp, opt, obj.batch(rows, rng), optim, state.step + 1)
            if average is not None:
                average.update(state.step)
            state.step += 1
            state.cursor += 1
            state.examples += loop.batch_size
            state.seconds = time.time() - start
            ema = loss if ema is None else 0.98 * ema + 0.02 * loss
            bar.update(1)
            bar.set_postfix(loss=f"{ema:.3f}", ex_s=f"{state.examples / state.seconds:.0f}", lr=f"{lr:.2e}",
                            refresh=False)
            if state.step % 50 == 0:
                log.write(step=state.step, loss=round(ema, 5), grad_norm=round(gnorm, 4), lr=lr,
                          examples_per_s=round(state.examples / state.seconds, 1),
                          seconds=round(state.seconds, 1), epoch=state.epoch)
            if loop.eval_every and state.step % loop.eval_every == 0 and obj.validate and d.main:
                v = validation()
                bar.write(f"step {state.step:>6}  loss {ema:.3f}  val " + _brief(v))
            if any_rank(time.time() - last_ckpt > loop.checkpoint_every, d):
                checkpoint()
                last_ckpt = time.time()
    finally:
        bar.close()
    if d.main and obj.validate is not None:
        v = validation(final=True)
        print(f"trained {state.step} steps ({state.examples:,} examples, {state.seconds:.0f} s, "
              f"{state.examples / max(state.seconds, 1e-9):.0f} examples/s); validation " + _brief(v))
        if loop.keep_best:
            print(f"best validation {obj.select} {state.best[obj.select]:.3f} at step {state.best['step']}: "
                  "kept as BEST, which predict / eval / serve load")
    checkpoint()
    if d.world > 1:
        dist.barrier()
    return state


def _brief(v: dict) -> str:
    return "  ".join(f"{k} {x:.3f}" for k, x in list(v.items())[:3])


# ------------------------------------------------------------------------------ the run directory


class RunDir:
    """Where a run writes, so that no trained model is ever lost.

    A new run in an empty (or missing) directory writes there. A new run over a directory that
    holds a model (only with overwrite=True) writes into a staging directory beside it, `OUT.new`,
    and takes OUT's place only once it has a complete checkpoint of its own (`committed`): until
    then a failure or a kill leaves the previous model untouched. A resumed run writes in place."""

    def __init__(self, final: Path, staged: bool):
        self.final = final
        self.path = final.with_name(final.name + ".new") if staged else final
        if staged:
            shutil.rmtree(self.path, ignore_errors=True)  # an earlier staged run that never committed

    @property
    def staged(self) -> bool:
        return self.path != self.final

    def committed(self) -> None:
        """After a complete checkpoint: a staged run replaces the previous model."""
        if not self.staged:
            return
        old = self.final.with_name(self.final.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        self.final.rename(old)  # a kill between these renames leaves both complete models on disk
        self.path.rename(self.final)
        self.path = self.final
        shutil.rmtree(old, ignore_errors=True)


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


def _truncate_metrics(path: Path, step: int) -> None:
    """Drop metrics.jsonl records a killed run wrote after the checkpoint it resumes from."""
    if not path.exists():
        return
    keep = [line for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line).get("step", 0) <= step]
    path.write_text("".join(line + "\n" for line in keep), encoding="utf-8")


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
    ckpt = latest_checkpoint(out) if resume else None
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
        hashing = BloomHash.build(data.n_ids, hcfg, data.train if hcfg.coherent else None)
        hash_seconds = time.time() - t0
    torch.manual_seed(cfg.loop.seed)
    model = build_model(mcfg, head_cfg, hashing, data.counts, data.vocab.strings if mcfg.dynamic else None)
    train_rows, val_rows = split_validation(data.train, cfg.val_fraction, cfg.loop.seed)
    if getattr(model.head, "needs_context", False) and cfg.objective != "masked":
        raise ValueError(f"the {head_cfg.name} head scores with the set's context: it trains with the masked "
                         f"set objective only, not {cfg.objective!r}")
    head_built = None
    if ckpt is None and hasattr(model.head, "build_from"):  # a head with a structure from the training sets
        head_built = model.head.build_from(data.train.subset(train_rows))  # (heads/hybrid.py), validation unseen
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
