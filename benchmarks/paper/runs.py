"""One training run of the paper benchmarks, cached: its configuration, training, the rankings it
makes on the evaluation examples, and the baselines' rankings on the same examples. (Model widths
matched to a parameter count: superbloom/sizing.py.)

A trained model is cached under runs/paper/models/DATASET/KEY, KEY a hash of its full
configuration, so a script reuses the identical run another script made (e.g. f3_frequency reuses
t2_heads's models) and trains it itself otherwise. Rankings are cached beside the model (and the
baselines' under runs/paper/baselines/), keyed by the examples and the decoding options.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

import superbloom as sb
from superbloom.evaluation.baselines import EASE_MAX_IDS, fit_baseline
from superbloom.model.batches import MaskConfig, query_batch
from superbloom.storage.checkpoint import latest_checkpoint
from superbloom.evaluation.evaluate import EvalConfig, Examples, evaluate
from superbloom.storage.files import load_json
from superbloom.heads import HeadConfig, head_config_dict
from superbloom.evaluation.metrics import target_ranks

from .datasets import EVAL_SEED, SEGMENT, TARGETS_PER_SET, WORK, dataset, examples_tag

THREADS = 2  # torch threads: this machine's cores
DEPTH = 20  # ids retrieved per example (rec@20 at most)
BASELINES = ("popularity", "cooccurrence", "ease")


@dataclass(frozen=True)
class Run:
    """One training run: every field is part of the cache key. Budget in seconds of training."""
    dataset: str
    hash: sb.HashConfig
    model: sb.ModelConfig
    head: HeadConfig
    budget: float
    mask: MaskConfig = field(default_factory=MaskConfig)  # the library's recipe: mask rate 0.5
    batch_size: int = 64  # the library's recipe (LoopConfig / OptimConfig defaults)
    lr: float = 3e-3
    warmup: int = 300
    seed: int = 0

    def config(self) -> dict:
        """The run as JSON-able values (the head with its name)."""
        return {**asdict(self), "head": head_config_dict(self.head)}

    def key(self) -> str:
        return hashlib.sha1(json.dumps(self.config(), sort_keys=True).encode()).hexdigest()[:12]

    @property
    def dir(self) -> Path:
        return WORK / "models" / self.dataset / self.key()


def fit(run: Run) -> dict:
    """Train `run` unless an identical finished run is cached. -> its training record."""
    done = run.dir / "done.json"
    if done.exists():
        return load_json(done)
    data = dataset(run.dataset)
    if run.dir.exists():  # an interrupted run: start over (a time budget cannot resume fairly)
        shutil.rmtree(run.dir)
    cfg = sb.TrainConfig(data=str(data.path), out=str(run.dir), hash=run.hash, model=run.model, head=run.head,
                         mask=run.mask, optim=sb.OptimConfig(lr=run.lr, warmup=run.warmup),
                         loop=sb.LoopConfig(batch_size=run.batch_size, time_budget=run.budget, eval_every=0,
                                            checkpoint_every=1e9, seed=run.seed),
                         val_fraction=0.0)
    load_before = os.getloadavg()[0]
    print(f"training {run.dataset}/{run.key()}: {run.head.name} alpha={run.hash.alpha} m={run.hash.m} "
          f"coherent={run.hash.coherent} d={run.model.d} L={run.model.layers} for {run.budget:.0f} s", flush=True)
    t0 = time.time()
    sb.train(cfg, progress=False)
    wall = time.time() - t0
    state = load_json(latest_checkpoint(run.dir) / "state.json")
    config = load_json(run.dir / "config.json")
    record = {"key": run.key(), "run": json.loads(json.dumps(run.config())), "parameters": config["parameters"],
              "steps": state["step"], "train_examples": state["examples"], "train_seconds": round(state["seconds"], 1),
              "examples_per_s": round(state["examples"] / max(state["seconds"], 1e-9), 1),
              "hash_build_seconds": config.get("hash_build_seconds"), "wall_seconds": round(wall, 1),
              "load_avg_before": round(load_before, 2), "load_avg_after": round(os.getloadavg()[0], 2)}
    done.write_text(json.dumps(record, indent=2) + "\n")
    return record


def score(run: Run, data: sb.Dataset, ex: Examples, decode: sb.DecodeConfig = sb.DecodeConfig(),
          tokens: bool = False) -> dict:
    """Train (or reuse) `run`, rank the examples (top-20, context excluded). -> record with `ranks`
    (E,) and, with tokens=True for hashed models, `token_hits` (E,): the fraction of the m maps
    whose most probable bucket is the target's (the paper's token rec@1, Table 7)."""
    record = fit(run)
    cache = run.dir / f"eval-{examples_tag(ex, repr(decode), tokens)}.npz"
    if cache.exists():
        z = np.load(cache, allow_pickle=False)
        out = json.loads(str(z["meta"]))
        out.update({k: z[k] for k in z.files if k != "meta"})
        return record | out
    torch.set_num_threads(THREADS)
    predictor = sb.load(run.dir)
    cfg = EvalConfig(seed=EVAL_SEED, n=SEGMENT, targets_per_set=TARGETS_PER_SET, depth=DEPTH, decode=decode,
                     baselines=())
    res = evaluate(predictor, data, cfg, progress=False)
    if not np.array_equal(res.targets, ex.targets):
        raise RuntimeError("evaluate() drew other examples than the baselines were given; protocol mismatch")
    arrays = {"ranks": res.ranks["model"].astype(np.int16)}
    if tokens:
        arrays["token_hits"] = token_hits(predictor, ex)
    meta = {k: res.decoding[k] for k in ("certified_exact", "mean_beam", "queries_per_second")}
    np.savez(cache, meta=json.dumps(meta), **arrays)
    return record | meta | arrays


@torch.no_grad()
def token_hits(predictor, ex: Examples, batch_size: int = 256) -> np.ndarray:
    """(E,) fraction of the m hash maps whose top bucket is the target's bucket (0 for unseen targets)."""
    model, hashing = predictor.model, predictor.hashing
    buckets = torch.from_numpy(hashing.buckets).long()  # (m, N)
    out = []
    for a in range(0, len(ex.targets), batch_size):
        ctx, tgt = ex.contexts[a:a + batch_size], torch.from_numpy(ex.targets[a:a + batch_size]).long()
        hidden = model.target_hidden(query_batch(ctx, hashing))  # (q, m, d)
        top = model.head.log_probs(hidden).argmax(-1)  # (q, m) most probable bucket per map
        hit = (top == buckets[:, tgt.clamp(min=0)].T).float().mean(1)
        out.append(torch.where(tgt >= 0, hit, torch.zeros_like(hit)).numpy())
    return np.concatenate(out)


def baselines(name: str, data: sb.Dataset, ex: Examples, which=BASELINES) -> dict:
    """{baseline: {ranks (E,), seconds, stored}} on the very examples `ex`; cached per dataset.
    EASE is skipped (with the reason) above superbloom's dense limit of EASE_MAX_IDS ids."""
    tag = examples_tag(ex)
    out = {}
    for b in which:
        cache = WORK / "baselines" / f"{name}-{b}-{tag}.npz"
        if b == "ease" and data.n_ids > EASE_MAX_IDS:
            out[b] = {"skipped": f"EASE is dense: {data.n_ids:,} ids > {EASE_MAX_IDS:,}"}
            continue
        if not cache.exists():
            cache.parent.mkdir(parents=True, exist_ok=True)
            t0 = time.time()
            model = fit_baseline(b, data.train, data.n_ids)
            ranks = target_ranks(model.rank(ex.contexts, ex.contexts, DEPTH), ex.targets).astype(np.int16)
            stored = model.cos.nnz if b == "cooccurrence" else data.n_ids ** 2 if b == "ease" else data.n_ids
            np.savez(cache, ranks=ranks, seconds=time.time() - t0, stored=stored)
        z = np.load(cache)
        out[b] = {"ranks": z["ranks"], "seconds": round(float(z["seconds"]), 1), "stored": int(z["stored"])}
    return out
