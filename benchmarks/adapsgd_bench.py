"""Benchmark: AdapSGD vs AdamW at their defaults on the Wikispeedia id model, and what AdapSGD's
Hessian steps cost.

    /work/tools/benchlock .venv/bin/python -m benchmarks.adapsgd_bench     # ~5 minutes on 2 cores

The set model of model.py (d = 128, 4 heads, d_ff = 512, 2 layers, hashed softmax head; alpha = 4,
m = 2) on the embedded Wikispeedia links, batches of 64 masked segments as training draws them
(batches.training_batch, MaskConfig defaults). Both optimizers see the same batches, in one run:

- AdamW: the project's training recipe (train.py defaults): lr 3e-3, betas (0.9, 0.98), eps 1e-9,
  linear warm-up over 300 steps then inverse square root decay, gradient clipping at 1.
- AdapSGD: its defaults (weight decay 0.1, Hessian every 5 steps, clipping at 1), no learning rate,
  following the loop contract of superbloom/adapsgd.py (forward_context, create_graph); and, as a
  diagnosis rather than tuning, the same with weight decay 0.01 and 0 (adapsgd:0.01, adapsgd:0).

Reported at equal steps: the mean training loss over the last 100 steps, the loss on 8 fixed held-
out batches (test sets, same masking) every --eval-every steps, and seconds per step; for AdapSGD
also the time of its Hessian steps (math SDPA forward, backward with create_graph, H z) and of its
other steps, separately. The runs follow one another, so their step times are comparable only as far
as the machine's load stayed the same (recorded before and after). The loss is the library's: mean
over targets of the sum over the m hashes of the cross-entropy (lower is better). Results:
benchmarks/results/adapsgd.{json,md}.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from benchmarks.machine import machine_info, write_results

import superbloom as sb
from superbloom.training.adapsgd import AdapSGD
from superbloom.model.batches import MaskConfig, training_batch
from superbloom.hashing.bloom import BloomHash
from superbloom.model.encoder import build_model, count_parameters
from superbloom.training.optim import lr_factor

warnings.filterwarnings("ignore", message="Using backward\\(\\) with create_graph=True")


def held_out_loss(model, batches) -> float:
    model.eval()
    with torch.no_grad():
        loss = float(np.mean([model(b).item() for b in batches]))
    model.train()
    return round(loss, 4)


def run(name: str, data, hashing, steps: int, batch_size: int, eval_every: int, test_batches) -> dict:
    torch.manual_seed(0)
    mcfg = sb.ModelConfig(d=128, heads=4, d_ff=512, layers=2)
    model = build_model(mcfg, sb.SuperbloomConfig(), hashing).train()
    if name == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s + 1, 300))
    else:  # "adapsgd" (defaults) or "adapsgd:WD" (another weight decay)
        wd = {} if ":" not in name else {"weight_decay": float(name.split(":")[1])}
        opt, sched = AdapSGD(model.parameters(), **wd), None
    rng = np.random.default_rng(0)  # the same batches for both optimizers
    rows = np.arange(len(data.train.lengths))
    losses, curve, times, hess_times = [], [], [], []
    for step in range(steps):
        batch = training_batch(data.train, rng.choice(rows, batch_size), hashing, MaskConfig(), rng)
        t0 = time.perf_counter()
        graph = getattr(opt, "create_graph", False)
        with opt.forward_context() if graph else torch.enable_grad():
            loss = model(batch)
        loss.backward(create_graph=graph)
        if sched is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if sched is not None:
            sched.step()
        dt = time.perf_counter() - t0
        (hess_times if graph else times).append(dt)
        losses.append(loss.item())
        if (step + 1) % eval_every == 0:
            curve.append({"step": step + 1, "held_out_loss": held_out_loss(model, test_batches),
                          "train_loss_last_100": round(float(np.mean(losses[-100:])), 4)})
            print(name, curve[-1], flush=True)
    out = {"optimizer": name, "steps": steps, "parameters": count_parameters(model), "curve": curve,
           "final_held_out_loss": curve[-1]["held_out_loss"],
           "final_train_loss_last_100": curve[-1]["train_loss_last_100"],
           "seconds_per_step": round((sum(times) + sum(hess_times)) / steps, 4),
           "seconds_per_plain_step": round(float(np.mean(times)), 4)}
    if hess_times:
        out["seconds_per_hessian_step"] = round(float(np.mean(hess_times)), 4)
        out["hessian_steps"] = len(hess_times)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", default="adamw,adapsgd,adapsgd:0.01,adapsgd:0",
                    help="optimizers in order; adapsgd:WD = AdapSGD with weight decay WD instead of its 0.1")
    ap.add_argument("--results", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory() as tmp:
        sb.prepare(sb.PrepareConfig(str(sb.embedded_dataset()), tmp), progress=False)
        data = sb.Dataset(tmp)
        hashing = BloomHash.build(data.n_ids, sb.HashConfig(alpha=4, m=2))
        trng = np.random.default_rng(123)
        test_rows = np.arange(len(data.test.lengths))
        test_batches = [training_batch(data.test, trng.choice(test_rows, 64), hashing, MaskConfig(), trng)
                        for _ in range(8)]
        runs = [run(name, data, hashing, args.steps, args.batch_size, args.eval_every, test_batches)
                for name in args.runs.split(",")]
    after = [round(x, 2) for x in os.getloadavg()]
    result = {"benchmark": "adapsgd", "data": "embedded Wikispeedia links, alpha=4, m=2",
              "model": {"d": 128, "heads": 4, "d_ff": 512, "layers": 2, "batch_size": args.batch_size},
              "runs": runs, "load_average_before": before, "load_average_after": after,
              "machine": machine_info()}
    md = ["# AdapSGD vs AdamW at their defaults (Wikispeedia id model, d = 128, 2 layers, batch 64)", "",
          "Same batches, equal steps. Loss: mean over masked targets of the sum over the m = 2 hashes of the "
          f"cross-entropy; held out = 8 fixed batches of test sets. Load average before {before}, after {after}.", "",
          "| step | " + " | ".join(f"{r['optimizer']} train (last 100) | {r['optimizer']} held out"
                                   for r in runs) + " |",
          "|---|" + "---|---|" * len(runs)]
    for points in zip(*(r["curve"] for r in runs)):
        md.append(f"| {points[0]['step']} | " + " | ".join(
            f"{c['train_loss_last_100']} | {c['held_out_loss']}" for c in points) + " |")
    md += ["", "| optimizer | s/step (all) | s/step (plain) | s/step (Hessian steps) |", "|---|---|---|---|"]
    for r in runs:
        md.append(f"| {r['optimizer']} | {r['seconds_per_step']} | {r['seconds_per_plain_step']} | "
                  f"{r.get('seconds_per_hessian_step', '')} |")
    md.append("")
    write_results(Path(args.results), "adapsgd", result, md)
    print("\n".join(md))


if __name__ == "__main__":
    main()
