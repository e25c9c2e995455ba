"""The training loop shared by every objective: fit(objective, ...) -> RunState.

An `Objective` (objectives.py; importable from here too) is a module whose forward(batch) returns
a scalar loss, how the rows of each step are drawn (the same on every rank), how a rank turns its
share of rows into a batch on its device, and how to validate. `fit` runs it with the optimizer of optim.make_optimizer (warm-up + inverse-sqrt
schedule), gradient clipping, an optional average of the weights (validated and kept as BEST),
metrics.jsonl, atomic checkpoints that a killed run resumes from exactly (weights, optimizer,
schedule, data order, every rank's RNG), the same records handed to training callbacks (callbacks.py:
TensorBoard, MLflow), and one code path for 1 or N processes (torchrun:
DistributedDataParallel, every stop decision all-reduced, rank 0 alone writes). The run directory
it writes in (RunDir: staged replacement of an old model) and the overwrite / resume policy are
rundir.py's; BEST and LATEST are written here.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

from ..storage.checkpoint import load_extra, load_optimizer, load_weights, restore_rng, rng_state, save_checkpoint
from ..model.device import Dist, all_gather, any_rank
from ..storage.files import load_json
from ..heads.rows import sparse_rows
from ..heads.base import Validation
from .average import WeightAverage  # noqa: F401 (re-exported: callers import it here)
from .callbacks import Callback, close_all
from .gradients import StepGradients
from .objectives import SELECT, Objective  # noqa: F401 (re-exported: the loop's input)
from .optim import OptimConfig, make_optimizer, optimizer_spec, set_lr
from .rundir import RunDir, truncate_metrics as _truncate_metrics  # noqa: F401 (re-exported)
from .config import LoopConfig  # noqa: F401 (re-exported: callers import it here)
from .._log import progress_bar

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------ the loop


class MetricsLog:
    """metrics.jsonl of the run directory (which a staged run moves: the path is looked up per write),
    and each record handed to the callbacks (callbacks.py: TensorBoard, MLflow, ...) as the same dict."""

    def __init__(self, run: "RunDir", enabled: bool, callbacks: Sequence[Callback] = ()):
        self.run, self.enabled, self.callbacks = run, enabled, tuple(callbacks)

    def write(self, **record) -> None:
        if self.enabled:
            with open(self.run.path / "metrics.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
            for c in self.callbacks:
                c.record(record)

    def close(self) -> None:
        """Close the callbacks (once: later calls do nothing)."""
        if self.enabled:
            close_all(self.callbacks)
        self.callbacks = ()


@dataclass
class RunState:
    """Everything a checkpoint must hold besides weights and optimizer (state.json)."""
    step: int = 0
    epoch: int = 0
    cursor: int = 0  # batches of the current epoch already taken
    examples: int = 0
    seconds: float = 0.0
    best: dict | None = None  # validation metrics of the BEST checkpoint, with its step
    # the patience rule (LoopConfig.patience): the best of each score it watches so far, and the validations
    # since one of them last improved
    peaks: dict | None = None
    stale: int = 0


def fresh_rngs(seed: int, d: Dist) -> np.random.Generator:
    """This rank's batch RNG for a new run (torch's RNG is seeded by the caller)."""
    return np.random.default_rng([seed, d.rank])


def checkpoint_state(state: RunState, rng: np.random.Generator, d: Dist) -> dict | None:
    """state.json content with every rank's RNG streams (collective: every rank calls it); None off rank 0."""
    mine = {"numpy": rng_state(rng), "torch": torch.get_rng_state().tolist(), "cuda": cuda_rng_state()}
    every = all_gather(mine, d)
    if not d.main:
        return None
    cuda = {str(r): s["cuda"] for r, s in enumerate(every) if s["cuda"] is not None}
    return dict(asdict(state), world=d.world, rng={str(r): s["numpy"] for r, s in enumerate(every)},
                torch_rng={str(r): s["torch"] for r, s in enumerate(every)},
                **({"cuda_rng": cuda} if cuda else {}))


def cuda_rng_state() -> list[list[int]] | None:
    """This process's CUDA generators (one per GPU; dropout on a GPU draws from them), or None where
    CUDA was never used (asking would start it on every GPU)."""
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return None
    return [s.tolist() for s in torch.cuda.get_rng_state_all()]


def restore_state(saved: dict, seed: int, d: Dist) -> tuple[RunState, np.random.Generator]:
    """RunState and this rank's RNG from state.json. A rank the checkpoint has no stream for (the
    run resumes on more processes than it was saved with) gets a fresh stream of (seed, rank, step)."""
    state = RunState(**{k: saved[k] for k in ("step", "epoch", "cursor", "examples", "seconds")},
                     best=saved.get("best"), peaks=saved.get("peaks"), stale=int(saved.get("stale", 0)))
    rngs, torch_rngs = saved.get("rng", {}), saved.get("torch_rng", {})
    if isinstance(torch_rngs, list):  # written before per-rank torch streams: rank 0's
        torch_rngs = {"0": torch_rngs}
    me = str(d.rank)
    if me in rngs:
        rng = restore_rng(rngs[me])
    else:
        rng = np.random.default_rng([seed, d.rank, state.step])
        log.info(f"rank {d.rank}: the checkpoint holds no RNG stream for this rank (saved with "
                 f"{saved.get('world', len(rngs))} processes); using a fresh one")
    if me in torch_rngs:
        torch.set_rng_state(torch.tensor(torch_rngs[me], dtype=torch.uint8))
    cuda = saved.get("cuda_rng", {}).get(me)
    if cuda and torch.cuda.is_available():  # a run saved on GPUs goes on with their streams (as many as exist here)
        for i, s in enumerate(cuda[: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(torch.tensor(s, dtype=torch.uint8), i)
    return state, rng


def train_step(model: nn.Module, ddp: nn.Module, opt: torch.optim.Optimizer, batch, optim: OptimConfig,
               step: int, total: int = 0, grads: StepGradients | None = None,
               average: WeightAverage | None = None) -> tuple[float, float, float]:
    """One optimizer step (1-based `step` of `total`, 0: no step count): loss, backward, the gradients
    averaged over the ranks where DDP does not (grads: the row tables, gradients.py) and clipped,
    update, and the weight average's rows about to change brought up to date (average; its update
    is the caller's). -> (loss, grad norm, lr).

    The optimizer's spec (optim.OPTIMIZERS) says what the step needs: second derivatives on some
    steps (AdapSGD's Hessian estimate), no learning-rate schedule for a learning-rate-free one."""
    spec = optimizer_spec(optim.name)
    lr = set_lr(opt, optim, step, total)
    with spec.forward_context(opt):
        loss = ddp(batch)
    opt.zero_grad(set_to_none=True)
    loss.backward(create_graph=spec.create_graph(opt))
    grads = grads if grads is not None else StepGradients(model)
    grads.reduce()
    gnorm = grads.clip(optim.clip)
    if average is not None:
        average.before_step(grads.touched())
    opt.step()
    lv = float(loss.detach())
    if not math.isfinite(lv):
        raise FloatingPointError(f"loss became {lv} at step {step}; lower the learning rate")
    return lv, gnorm, lr


@dataclass
class Prepare:
    """Work the first training step needs and the first answer does not (train: the network's hash
    maps and start, after the term is served): `run` before the first step (skipped when no step
    follows: a resume does it), then a checkpoint of what it changed, then `done`."""
    run: Callable[[], None]
    done: Callable[[], None] = lambda: None


def fit(obj: Objective, loop: LoopConfig, optim: OptimConfig, run: "RunDir | Path", d: Dist,
        resume_from: Path | None = None, progress: bool = True, callbacks: Sequence[Callback] = (),
        validate_first: bool = False, prepare: Prepare | None = None) -> RunState:
    """Train `obj` in a model directory whose config files the caller wrote (a RunDir, or a Path to
    write in place): the loop, validation, BEST and LATEST checkpoints, metrics.jsonl, whose records
    also go to `callbacks` (closed when the loop ends; rank 0 only). Resumes from `resume_from` if given.

    `validate_first` (a new run whose model ranks before any training step: a hybrid head's fitted
    term): checkpoint the model as given at once (train sets HeadBase.before_training: the term
    alone), so the folder serves it and a staged run replaces the previous model with it, then
    validate at step 0 and checkpoint again (BEST: the validation's choice). LoopConfig.patience:
    stop once that many validations in a row improved neither the validation score nor, where the
    validation scores them (Validation.watched), its parts' alone (a hybrid's network alone).
    `prepare` (one process only): run before the first step, after the step-0 checkpoint (Prepare)."""
    run = run if isinstance(run, RunDir) else RunDir(Path(run), staged=False, main=False)  # a plain folder: unmarked
    if d.main:
        run.path.mkdir(parents=True, exist_ok=True)
    model = obj.model
    opt = make_optimizer(optim, model.parameters())
    if d.world > 1 and optimizer_spec(optim.name).second_order:
        raise ValueError(f"the {optim.name} optimizer takes second derivatives, which DistributedDataParallel "
                         "does not support; train it in one process")
    # row-sparse gradients of the tables (heads/rows.py) where the optimizer takes them: a step then
    # costs the rows its batch reads in the backward, the clipping, the update and the average
    tables = sparse_rows(model) if optimizer_spec(optim.name).sparse_rows else []
    grads = StepGradients(model, tables, d)
    state, rng = RunState(), fresh_rngs(loop.seed, d)
    # the average serves validation and BEST only: without validation it would be a pass per step
    # over the weights that nothing reads, so it is not kept
    average = WeightAverage(model, loop.ema, tables) if loop.ema and obj.validate is not None else None
    if resume_from is not None:
        load_weights(model, resume_from)
        load_optimizer(opt, resume_from)
        state, rng = restore_state(load_json(resume_from / "state.json"), loop.seed, d)
        if average is not None:
            saved = load_extra(resume_from, "ema")
            if saved:
                average.load(saved)
            else:
                log.info("the checkpoint holds no weight average: it starts anew")
        if d.main:
            log.info(f"resuming from {resume_from.name} (step {state.step}, {state.seconds:.0f} s trained)")
    ddp = model
    if d.world > 1:
        # the tables' gradients are averaged by `grads` (gradients.py), not by DDP, which also does not
        # broadcast them at the start: rank 0's are (every rank built the same ones; a start may differ)
        ignored = [name for name, p in model.named_parameters() if any(p is t for t in tables)]
        torch.nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, ignored)
        for t in tables:
            dist.broadcast(t.data, 0)
        ddp = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[d.device.index] if d.device.type == "cuda" else None)
    metrics = MetricsLog(run, d.main, callbacks)
    per_rank = max(1, loop.batch_size // d.world)
    max_steps = loop.steps or (int(math.ceil(loop.epochs * obj.n_examples / loop.batch_size)) if loop.epochs else 0)
    budget = loop.time_budget or float("inf")

    def checkpoint():
        st = checkpoint_state(state, rng, d)
        if d.main:
            save_checkpoint(run.path, state.step, model, opt, st,
                            extra={"ema": average.tensors()} if average is not None else None)
            run.committed()

    validated: dict[int, dict] = {}  # the last validation by step: a run stopping right after it reuses it

    def stalled(v: Validation) -> bool:
        """After validation `v`: has the patience rule run out (the watched scores, the model's and its
        parts' alone, not improved for loop.patience validations in a row)?"""
        peaks = dict(state.peaks or {})
        gained = False
        for key, x in v.watched(obj.select).items():
            if key not in peaks or x > peaks[key]:
                peaks[key], gained = x, True
        state.peaks, state.stale = peaks, 0 if gained else state.stale + 1
        return bool(loop.patience) and state.stale >= loop.patience

    def validation(final: bool = False) -> Validation:
        """Validate (rank 0), log, and keep the weights if they are the best so far (with an
        average of the weights: the averaged weights are validated and kept). The final validation
        of the step validated last (the steps or the time budget ran out there) logs that one again."""
        if not (final and state.step in validated):
            with average.swapped() if average is not None else contextlib.nullcontext():
                validated.clear()
                v = validated[state.step] = obj.validate()
                if loop.keep_best and (state.best is None or v.scores[obj.select] > state.best[obj.select]):
                    state.best = dict(v.record(), step=state.step)
                    save_checkpoint(run.path, state.step, model, None, asdict(state), keep=1, kind="best",
                                    pointer="BEST")
        v = validated[state.step]
        metrics.write(step=state.step, seconds=round(state.seconds, 1), final=final,
                      **{f"val_{k}": x for k, x in v.record().items()})
        return v

    model.train()
    bar = progress_bar(total=max_steps or None, initial=state.step, desc="training", unit="step",
                       progress=progress and d.main, dynamic_ncols=True)
    start, last_ckpt, ema = time.time() - state.seconds, time.time(), None
    batches = obj.epoch(state.epoch)
    stop = None  # why the patience rule stopped the run (rank 0), or None
    if validate_first and resume_from is None and obj.validate is not None:  # the model before any step
        checkpoint()  # the model as the caller set it (train: a hybrid's term alone), servable before validation
        if d.main:
            v = validation()
            stalled(v)
            bar.write("step      0  before training: val " + _brief(v))
        state.seconds = time.time() - start
        checkpoint()  # servable now (BEST, and LATEST: a resume starts from here, the term fitted)
        last_ckpt = time.time()
    try:
        while ((not max_steps or state.step < max_steps)
               and not any_rank(time.time() - start >= budget or stop is not None, d)):
            if state.cursor >= len(batches):  # next epoch
                state.epoch += 1
                state.cursor = 0
                batches = obj.epoch(state.epoch)
            if prepare is not None:  # before the first step, the term already served
                prepare.run()
                if average is not None:  # the average starts from the prepared weights
                    average = WeightAverage(model, loop.ema, tables)
                checkpoint()
                prepare.done()
                prepare, last_ckpt = None, time.time()
            rows = batches[state.cursor][d.rank * per_rank:(d.rank + 1) * per_rank]
            loss, gnorm, lr = train_step(model, ddp, opt, obj.batch(rows, rng), optim, state.step + 1,
                                          max_steps, grads, average)
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
                metrics.write(step=state.step, loss=round(ema, 5), grad_norm=round(gnorm, 4), lr=lr,
                              examples_per_s=round(state.examples / state.seconds, 1),
                              seconds=round(state.seconds, 1), epoch=state.epoch)
            if loop.eval_every and state.step % loop.eval_every == 0 and obj.validate and d.main:
                v = validation()
                bar.write(f"step {state.step:>6}  loss {ema:.3f}  val " + _brief(v))
                if stalled(v):
                    stop = (f"stopped at step {state.step}: {loop.patience} validations in a row "
                            f"({loop.patience * loop.eval_every} steps) improved neither the validation {obj.select} "
                            "nor its network alone's (patience)")
            if any_rank(time.time() - last_ckpt > loop.checkpoint_every, d):
                checkpoint()
                last_ckpt = time.time()
    except BaseException:
        metrics.close()  # the callbacks end with the run, stopped by an error too
        raise
    finally:
        bar.close()
        sparse_rows(model, False)  # the model leaves training as it came (plain indexing)
    if stop is not None:
        log.info(stop)
    if d.main and obj.validate is not None:
        v = validation(final=True)
        log.info(f"trained {state.step} steps ({state.examples:,} examples, {state.seconds:.0f} s, "
                 f"{state.examples / max(state.seconds, 1e-9):.0f} examples/s); validation " + _brief(v))
        if loop.keep_best:
            log.info(f"best validation {obj.select} {state.best[obj.select]:.3f} at step {state.best['step']}: "
                     "kept as BEST, which predict / eval / serve load")
            note = (obj.parts_note(Validation.read(state.best), state.best.get("step"))
                    if obj.parts_note is not None else None)
            if note:
                log.info(note)  # a head of several parts: what each scored there (HeadBase.parts_note)
    metrics.close()
    checkpoint()
    if d.world > 1:
        dist.barrier()
    return state


def _brief(v: Validation) -> str:
    return "  ".join(f"{k} {x:.3f}" for k, x in list(v.scores.items())[:3])
