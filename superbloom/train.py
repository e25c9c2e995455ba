"""Masked training of a Superbloom model (sec. 2.4, 3.1-3.2): train(cfg) -> model directory.

    superbloom train data/wiki --out runs/wiki --alpha 4 --layers 4 --time-budget 600

One code path for 1 process and N processes: under torchrun (RANK / WORLD_SIZE set) the model is
wrapped in DistributedDataParallel (gloo on CPU, NCCL on GPU), every rank reads its own slice of
each global batch from the memory-mapped dataset, and rank 0 alone writes. The optimizer is Adam(W)
with linear warm-up then inverse-square-root decay, gradients are clipped, metrics go to
metrics.jsonl, and checkpoints are atomic and resumable (`resume=True` continues a killed run
where its last checkpoint left it: weights, optimizer, schedule, data order and RNG).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from .batches import MaskConfig, epoch_batches, training_batch
from .checkpoint import (latest_checkpoint, load_optimizer, load_weights, restore_rng, rng_state,
                         save_checkpoint)
from .dataset import Dataset, SetArray
from .decode import DecodeConfig
from .evaluate import make_examples
from .files import load_json, save_json
from .hashing import BloomHash, HashConfig
from .heads import HeadConfig
from .metrics import summarize, target_ranks
from .model import ModelConfig, build_model, count_parameters
from .predictor import rank_contexts


@dataclass(frozen=True)
class TrainConfig:
    data: str
    out: str
    hash: HashConfig = field(default_factory=HashConfig)
    model: ModelConfig = field(default_factory=lambda: ModelConfig(vocab_size=0))  # vocab_size set from hashing
    head: HeadConfig = field(default_factory=HeadConfig)
    mask: MaskConfig = field(default_factory=MaskConfig)
    batch_size: int = 64  # sets per step, over all ranks
    lr: float = 3e-3
    warmup: int = 300  # linear warm-up steps, then lr * sqrt(warmup / step)
    weight_decay: float = 0.0
    clip: float = 1.0
    steps: int = 0  # stop after this many steps (0: no step limit)
    epochs: float = 0.0  # ... or this many passes over the training sets
    time_budget: float = 0.0  # ... or this many seconds (whichever comes first)
    eval_every: int = 500  # validation every this many steps (0: only at the end)
    keep_best: bool = True  # keep the checkpoint with the best validation rec@10 too; inference uses it
    checkpoint_every: float = 60.0  # seconds between checkpoints
    val_fraction: float = 0.02  # training sets held out for validation (max 2000 sets)
    seed: int = 0
    threads: int = 0  # torch CPU threads (0: torch's default)
    resume: bool = False

    def __post_init__(self):
        if not (self.steps or self.epochs or self.time_budget):
            raise ValueError("set at least one of steps, epochs or time_budget")


SELECT = "rec@10"  # validation metric that picks the BEST checkpoint
VAL_TARGETS_PER_SET = 16


def lr_factor(step: int, warmup: int) -> float:
    """Linear warm-up to 1, then inverse square root decay (sec. 3.2)."""
    step = max(step, 1)
    return step / warmup if step < warmup else math.sqrt(warmup / step)


def split_validation(train: SetArray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of training sets used for training / validation (sets with >= 2 ids only)."""
    rows = np.flatnonzero(train.lengths >= 2)
    rng = np.random.default_rng([seed, 1])
    n_val = min(2000, int(round(fraction * len(rows))))
    perm = rng.permutation(rows)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def _dist_init() -> tuple[int, int]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return (dist.get_rank(), world) if world > 1 else (0, 1)


class MetricsLog:
    def __init__(self, path: Path, enabled: bool):
        self.path, self.enabled = path, enabled

    def write(self, **record) -> None:
        if self.enabled:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")


def train(cfg: TrainConfig, progress: bool = True) -> Path:
    rank, world = _dist_init()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    data = Dataset(cfg.data)
    ckpt = latest_checkpoint(out) if cfg.resume else None
    if cfg.resume and ckpt is None and rank == 0:
        print(f"no checkpoint in {out}; starting a new run")
    if ckpt is not None:
        saved = load_json(out / "config.json")
        hcfg, mcfg = HashConfig(**saved["hash"]), ModelConfig(**saved["model"])
        head_cfg = HeadConfig(**saved["head"])
        hashing = BloomHash.load(out / "hashing.safetensors")
    else:
        hcfg, head_cfg = cfg.hash, cfg.head
        t0 = time.time()
        hashing = BloomHash.build(data.n_ids, hcfg, data.train if hcfg.coherent else None)
        mcfg = dataclasses.replace(cfg.model, vocab_size=hashing.vocab_size, m=hcfg.m)
        hash_seconds = time.time() - t0
    torch.manual_seed(cfg.seed)
    model = build_model(mcfg, head_cfg, hashing, data.counts)
    n_params = count_parameters(model)
    train_rows, val_rows = split_validation(data.train, cfg.val_fraction, cfg.seed)
    if len(train_rows) < cfg.batch_size:
        raise ValueError(f"{cfg.data}: {len(train_rows)} training sets with two or more ids; "
                         f"need at least one batch ({cfg.batch_size}); lower --batch-size")
    if rank == 0 and ckpt is None:
        out.mkdir(parents=True, exist_ok=True)
        for old in ("metrics.jsonl", "LATEST", "BEST"):  # a new run replaces an old one in `out`
            (out / old).unlink(missing_ok=True)
        shutil.rmtree(out / "checkpoints", ignore_errors=True)
        hashing.save(out / "hashing.safetensors")
        data.vocab.save(out)
        save_json(out / "config.json", {
            "hash": asdict(hcfg), "model": asdict(mcfg), "head": asdict(head_cfg),
            "train": _jsonable(asdict(cfg)), "data": data.meta, "parameters": n_params,
            "hash_build_seconds": round(hash_seconds, 2)})
    if rank == 0:
        print(f"model: {n_params:,} parameters ({mcfg.layers} layers, d={mcfg.d}, {mcfg.heads} heads, "
              f"d_ff={mcfg.d_ff}); hashing: {data.n_ids:,} ids -> {hashing.vocab_size:,} tokens "
              f"(alpha={hcfg.alpha}, m={hcfg.m}); {len(train_rows):,} training sets, {len(val_rows):,} validation")

    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), eps=1e-9,
                            weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s + 1, cfg.warmup))
    state = {"step": 0, "epoch": 0, "cursor": 0, "examples": 0, "seconds": 0.0}
    rng = np.random.default_rng([cfg.seed, rank])
    if ckpt is not None:
        load_weights(model, ckpt)
        load_optimizer(opt, ckpt)
        state = load_json(ckpt / "state.json")
        sched.last_epoch = state["step"]
        for g in opt.param_groups:
            g["lr"] = cfg.lr * lr_factor(state["step"] + 1, cfg.warmup)
        rng = restore_rng(state["rng"][str(rank)] if str(rank) in state["rng"] else state["rng"]["0"])
        torch.set_rng_state(torch.tensor(state["torch_rng"], dtype=torch.uint8))
        if rank == 0:
            print(f"resuming from {ckpt.name} (step {state['step']}, {state['seconds']:.0f} s trained)")
    ddp = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    log = MetricsLog(out / "metrics.jsonl", rank == 0)
    # many held-out ids per validation set: a steadier score to pick the BEST checkpoint with
    val = make_examples(data.train.subset(val_rows), cfg.mask.n, VAL_TARGETS_PER_SET, cfg.seed) if len(val_rows) else None
    per_rank = max(1, cfg.batch_size // world)
    max_steps = cfg.steps or (int(math.ceil(cfg.epochs * len(train_rows) / cfg.batch_size)) if cfg.epochs else 0)
    budget = cfg.time_budget or float("inf")

    def checkpoint():
        if rank == 0:
            st = dict(state, rng={str(rank): rng_state(rng)}, torch_rng=torch.get_rng_state().tolist())
            save_checkpoint(out, state["step"], model, opt, st)

    def validation(final: bool = False) -> dict:
        """Validate (rank 0), log, and keep the weights if they are the best so far."""
        v = validate(model, hashing, val)
        log.write(step=state["step"], seconds=round(state["seconds"], 1), final=final,
                  **{f"val_{k}": x for k, x in v.items()})
        best = state.get("best")
        if cfg.keep_best and (best is None or v[SELECT] > best[SELECT]):
            state["best"] = dict(v, step=state["step"])
            save_checkpoint(out, state["step"], model, None, dict(state), keep=1, kind="best", pointer="BEST")
        return v

    model.train()
    bar = tqdm(total=max_steps or None, initial=state["step"], desc="training", unit="step",
               disable=not progress or rank != 0, dynamic_ncols=True)
    start, last_ckpt, ema = time.time() - state["seconds"], time.time(), None
    lengths = data.train.lengths

    def epoch(e):  # the same batches on every rank, a function of (seed, epoch) only
        return epoch_batches(train_rows, lengths, cfg.batch_size, cfg.mask.n, np.random.default_rng([cfg.seed, 2, e]))

    batches = epoch(state["epoch"])
    try:
        while (not max_steps or state["step"] < max_steps) and not _out_of_time(start, budget, world):
            if state["cursor"] >= len(batches):  # next epoch
                state["epoch"] += 1
                state["cursor"] = 0
                batches = epoch(state["epoch"])
            rows = batches[state["cursor"]][rank * per_rank:(rank + 1) * per_rank]
            batch = training_batch(data.train, rows, hashing, cfg.mask, rng, merge=not mcfg.positions)
            loss = ddp(batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
            opt.step()
            sched.step()
            state["step"] += 1
            state["cursor"] += 1
            state["examples"] += cfg.batch_size
            state["seconds"] = time.time() - start
            lv = float(loss.detach())
            ema = lv if ema is None else 0.98 * ema + 0.02 * lv
            if not math.isfinite(lv):
                raise FloatingPointError(f"loss became {lv} at step {state['step']}; lower the learning rate")
            bar.update(1)
            bar.set_postfix(loss=f"{ema:.3f}", ex_s=f"{state['examples'] / state['seconds']:.0f}",
                            lr=f"{sched.get_last_lr()[0]:.2e}", refresh=False)
            if state["step"] % 50 == 0:
                log.write(step=state["step"], loss=round(ema, 5), grad_norm=round(float(gnorm), 4),
                          lr=sched.get_last_lr()[0], examples_per_s=round(state["examples"] / state["seconds"], 1),
                          seconds=round(state["seconds"], 1), epoch=state["epoch"])
            if cfg.eval_every and state["step"] % cfg.eval_every == 0 and val is not None and rank == 0:
                v = validation()
                bar.write(f"step {state['step']:>6}  loss {ema:.3f}  val rec@1 {v['rec@1']:.3f}  "
                          f"rec@10 {v['rec@10']:.3f}  rec@20 {v['rec@20']:.3f}")
            if time.time() - last_ckpt > cfg.checkpoint_every:
                checkpoint()
                last_ckpt = time.time()
    finally:
        bar.close()
    if rank == 0:
        if val is not None:
            v = validation(final=True)
            print(f"trained {state['step']} steps ({state['examples']:,} examples, {state['seconds']:.0f} s, "
                  f"{state['examples'] / max(state['seconds'], 1e-9):.0f} examples/s); validation rec@1 "
                  f"{v['rec@1']:.3f} rec@10 {v['rec@10']:.3f} rec@20 {v['rec@20']:.3f}")
            if cfg.keep_best:
                b = state["best"]
                print(f"best validation {SELECT} {b[SELECT]:.3f} at step {b['step']}: kept as BEST, "
                      "which predict / eval / serve load")
        checkpoint()
    if world > 1:
        dist.barrier()
    return out


def _out_of_time(start: float, budget: float, world: int) -> bool:
    """Every rank must stop at the same step: the decision is all-reduced under torchrun."""
    over = time.time() - start >= budget
    if world > 1:
        flag = torch.tensor([float(over)])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        over = bool(flag.item())
    return over


def validate(model, hashing, val) -> dict:
    ranking = rank_contexts(model, hashing, val.contexts, 20, DecodeConfig())
    return summarize(target_ranks(ranking.ids.numpy(), val.targets))


def _jsonable(obj):
    return json.loads(json.dumps(obj, default=str))
