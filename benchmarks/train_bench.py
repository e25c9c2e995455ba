"""Benchmark: training throughput and model FLOP utilisation (MFU) of a d = 256, 4-layer model.

    python -m benchmarks.train_bench            # ~3 minutes on 2 cores (from the repository root)

Real batches from the embedded Wikispeedia links (full segments of 32 ids from pages with at least
32 links; m = 2, alpha = 4), masked as the library trains them (MaskConfig defaults: half of the
segment masked, the identical [MASK] elements merged into one), so a batch holds about 40 tokens
per example; one optimizer step = forward + backward + AdamW update. FLOPs per step are counted by
PyTorch's FlopCounterMode on the actual step (matmuls, attention; elementwise ops are not
counted, as is usual for MFU). MFU = counted FLOPs / step time / peak, against two peaks: the
brief's yardstick of 60 GFLOP/s fp32 for this 2-core machine, and the fp32 matmul rate measured
here at the start of the run (2048 x 2048). Results: benchmarks/results/train.{json,md}.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

import superbloom as sb
from benchmarks.machine import machine_info, write_results
from superbloom.model.batches import MaskConfig, training_batch
from superbloom.hashing.bloom import BloomHash
from superbloom.model.encoder import build_model, count_parameters

YARDSTICK = 60e9  # fp32 FLOP/s, the project's reference rate for this machine


def matmul_peak(n: int = 2048, reps: int = 20) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        a @ b
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n ** 3 * reps / (time.perf_counter() - t0)


def bench(data, batch_size: int, d: int, layers: int, dropout: float, steps: int, warm: int = 3) -> dict:
    torch.manual_seed(0)
    hashing = BloomHash.build(data.n_ids, sb.HashConfig(alpha=4, m=2))
    mcfg = sb.ModelConfig(d=d, heads=8, d_ff=4 * d, layers=layers, dropout=dropout)
    model = build_model(mcfg, sb.SuperbloomConfig(), hashing).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    rows = np.flatnonzero(data.train.lengths >= 32)  # full segments: every batch is (B, 64 tokens)
    batches = [training_batch(data.train, rng.choice(rows, batch_size), hashing, MaskConfig(), rng)
               for _ in range(warm + steps)]

    def step(b):
        loss = model(b)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for b in batches[:warm]:
        step(b)
    flops = 0
    times = []
    for b in batches[warm:]:
        counter = FlopCounterMode(display=False)
        with counter:  # counting costs a little time: counted and timed steps are separate
            step(b)
        flops += counter.get_total_flops()
        t0 = time.perf_counter()
        step(b)
        times.append(time.perf_counter() - t0)
    seconds = float(np.sum(times))
    ex = batch_size * len(times)
    return {"batch_size": batch_size, "d": d, "layers": layers, "heads": 8, "d_ff": 4 * d, "dropout": dropout,
            "parameters": count_parameters(model), "steps": len(times), "step_seconds": round(seconds / len(times), 4),
            "examples_per_second": round(ex / seconds, 1), "tokens_per_second": round(
                sum(int((~b.pad).sum()) for b in batches[warm:]) / seconds, 1),
            "gflop_per_step": round(flops / len(times) / 1e9, 2), "achieved_gflops": round(flops / seconds / 1e9, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--results", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        sb.prepare(sb.PrepareConfig(str(sb.embedded_dataset()), tmp), progress=False)
        data = sb.Dataset(tmp)
        peak = matmul_peak()
        runs = [bench(data, bs, 256, 4, dropout, args.steps) for bs in (64, 128, 256) for dropout in (0.1, 0.0)]
    for r in runs:
        r["mfu_vs_60_gflops"] = round(r["achieved_gflops"] * 1e9 / YARDSTICK, 3)
        r["mfu_vs_measured_peak"] = round(r["achieved_gflops"] * 1e9 / peak, 3)
    result = {"benchmark": "train", "data": "embedded Wikispeedia links, alpha=4, m=2",
              "measured_matmul_gflops": round(peak / 1e9, 1), "yardstick_gflops": YARDSTICK / 1e9,
              "runs": runs, "machine": machine_info()}
    md = ["# training throughput (d = 256, 4 layers, 8 heads, d_ff = 1024, m = 2, alpha = 4)", "",
          f"Measured fp32 matmul peak here: {peak / 1e9:.0f} GFLOP/s (2048 x 2048); the project's yardstick: "
          f"{YARDSTICK / 1e9:.0f} GFLOP/s. FLOPs counted by torch FlopCounterMode per step (fwd + bwd).", "",
          "| batch | dropout | examples/s | tokens/s | GFLOP/step | achieved GFLOP/s | MFU vs 60 | MFU vs measured |",
          "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        md.append(f"| {r['batch_size']} | {r['dropout']} | {r['examples_per_second']} | {r['tokens_per_second']} | "
                  f"{r['gflop_per_step']} | {r['achieved_gflops']} | {r['mfu_vs_60_gflops']:.0%} | "
                  f"{r['mfu_vs_measured_peak']:.0%} |")
    md.append("")
    write_results(Path(args.results), "train", result, md)
    print("\n".join(md))


if __name__ == "__main__":
    main()
