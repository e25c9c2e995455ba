"""Benchmark: where one training step's time goes at a large vocabulary (issue 14), per head.

    /work/tools/benchlock .venv/bin/python -m benchmarks.scale.step_profile --ids 5100000 --steps 6

Builds the model `train` builds for N ids (random hashing, no data: sets of random ids drawn from
a Zipf law, so batches look like the synthetic data's) and times the parts of `train.train_step`
separately, averaged over steps after the first: batch, forward, backward, gradient clipping,
optimizer step, the weight average (EMA) update. `--fused 0,1` runs each head with the reference
AdamW kernel (before) and the fused one (optim.FUSED_MIN_PARAMS, after). Seconds per step; nothing
here reads a dataset. `train` keeps no weight average when nothing validates it (the e2e runs), so
`ema_update` is paid only by runs with validation.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

import superbloom as sb
from superbloom.batches import MaskConfig, training_batch
from superbloom.dataset import SetArray
from superbloom.model import ModelConfig, build_model, count_parameters
from superbloom.optim import OptimConfig, make_optimizer, set_lr
from superbloom.loop import WeightAverage


def fake_sets(n_ids: int, n_sets: int, size: int, rng) -> SetArray:
    ids = (rng.zipf(1.3, n_sets * size) - 1) % n_ids
    return SetArray(np.arange(0, n_sets * size + 1, size, dtype=np.int64), ids.astype(np.int32))


def profile(head: str, n_ids: int, d: int, steps: int, batch_size: int, fused: bool, ema: float, seed: int = 0):
    from superbloom import optim as optim_mod

    optim_mod.FUSED_MIN_PARAMS = 1_000_000 if fused else 1 << 62
    rng = np.random.default_rng(seed)
    if head == "superbloom":
        hcfg, head_cfg = sb.HashConfig(50, 2), sb.SuperbloomConfig()
    elif head == "full":
        hcfg, head_cfg = sb.HashConfig(1, 1), sb.FullConfig()
    else:
        hcfg, head_cfg = sb.HashConfig(1, 1), sb.SampledConfig(samples=max(1, round(0.025 * n_ids)))
    hashing = sb.BloomHash.build(n_ids, hcfg)
    torch.manual_seed(seed)
    heads = 4 if d % 4 == 0 else 2
    model = build_model(ModelConfig(d=d, heads=heads, d_ff=4 * d, layers=2), head_cfg, hashing)
    optim = OptimConfig(warmup=20)
    opt = make_optimizer(optim, model.parameters())
    average = WeightAverage(model, ema) if ema else None
    sets = fake_sets(n_ids, 4000, 87, rng)
    mask = MaskConfig()
    t = {k: 0.0 for k in ("batch", "forward", "backward", "clip", "optimizer", "ema_update")}
    model.train()
    for step in range(steps):
        t0 = time.perf_counter()
        batch = training_batch(sets, rng.choice(len(sets), batch_size, replace=False), hashing, mask, rng)
        t1 = time.perf_counter()
        set_lr(opt, optim, step + 1)
        loss = model(batch)
        t2 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t3 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), optim.clip)
        t4 = time.perf_counter()
        opt.step()
        t5 = time.perf_counter()
        if average is not None:
            average.update(step)
        t6 = time.perf_counter()
        if step:  # the first step allocates the optimizer state
            for k, v in zip(t, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5)):
                t[k] += v / (steps - 1)
    return {"head": head, "n_ids": n_ids, "d": d, "fused": fused, "ema_decay": ema, "parameters": count_parameters(model),
            "tokens": hashing.n_tokens, "seconds_per_step": round(sum(t.values()), 4),
            **{k: round(v, 4) for k, v in t.items()}, "loss": round(float(loss.detach()), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ids", type=lambda x: int(float(x)), default=5_100_000)
    ap.add_argument("--heads", default="superbloom,full,sampled")
    ap.add_argument("--d", default="128,4,16", help="width per head, in --heads order (e2e.py's matched widths)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--fused", default="0,1", help="comma list of 0/1: the reference and/or the fused AdamW kernel")
    ap.add_argument("--ema", type=float, default=0.999)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for head, d in zip(args.heads.split(","), (int(x) for x in args.d.split(","))):
        for fused in (bool(int(s)) for s in args.fused.split(",")):
            print(json.dumps(profile(head, args.ids, d, args.steps, args.batch_size, fused, args.ema)), flush=True)


if __name__ == "__main__":
    main()


def report(rows: list[dict], note: str) -> None:
    """benchmarks/results/scale/step_profile.{json,md} from the printed rows (one JSON line each)."""
    from pathlib import Path

    from benchmarks.machine import machine_info, write_results

    parts = ("batch", "forward", "backward", "clip", "optimizer", "ema_update")
    md = ["# One training step at 5.1M ids, by part (issue 14)", "",
          "`benchmarks/scale/step_profile.py`: the model `train` builds per head (e2e.py's matched widths), batches of "
          "4 sets of random Zipf ids, seconds per step by part averaged over the steps after the first, 2 torch "
          "threads. MEASURED (under the load averages given: other people's unlocked work shared the 2 cores).", "",
          "| head | parameters | AdamW kernel | " + " | ".join(parts) + " | step with EMA | step without EMA |",
          "|---|---|---|" + "---|" * (len(parts) + 2)]
    for r in rows:
        md.append(f"| {r['head']} | {r['parameters']:,} | {'fused' if r['fused'] else 'reference'} | "
                  + " | ".join(f"{r[p]:.3f}" for p in parts)
                  + f" | {r['seconds_per_step']:.2f} | {r['seconds_per_step'] - r['ema_update']:.2f} |")
    md += ["", note]
    write_results(Path(__file__).parents[1] / "results" / "scale", "step_profile",
                  {"benchmark": "step_profile", "rows": rows, "note": note, "machine": machine_info()}, md)
