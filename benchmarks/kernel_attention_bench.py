"""Benchmark: kernelized (quadratic-feature, linear) attention vs softmax attention as the set grows.

    /work/tools/benchlock .venv/bin/python -m benchmarks.kernel_attention_bench     # ~10 minutes on 2 cores

One attention layer as the encoder builds it (model.Attention: qkv projection, attention, output
projection; d = 128, 4 heads so dh = 32, batch 32), forward + backward of sum(out^2), for set sizes
T = 32 .. 4,096 (--heads 16: dh = 8, results kernel_attention_h16.*), with a quarter of each set's
tail padded (keep mask (B, 1, 1, T)). Three attentions:

- softmax: F.scaled_dot_product_attention with the boolean mask (PyTorch's fused CPU kernel),
- kernel:  superbloom.model.attention, features materialised (chunk=None),
- kernel/512: the same, keys and queries 512 at a time under activation checkpointing.

Each (attention, T) runs in a fresh subprocess, so its peak resident memory (VmHWM, this process image's own peak) is its own;
a run that would need more than --max-gb by a rough estimate is skipped and marked so. Timing: one
warm-up step, then the median of --reps steps (one step and no warm-up once the previous size took
more than --slow seconds: the first-step overhead is small against such steps). Load average before
and after is recorded, since the machine is shared. Results:
benchmarks/results/kernel_attention.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.machine import machine_info, write_results

SIZES = (32, 64, 128, 256, 512, 1024, 2048, 4096)
METHODS = ("softmax", "kernel", "kernel/512")
B, D, HEADS = 32, 128, 4


def estimate_gb(method: str, t: int, heads: int = HEADS) -> float:
    """Rough peak memory of one step: features (B, h, T, F) a few times over for the kernel;
    the fused softmax kernel keeps O(T) per row."""
    dh = D // heads
    f = 1 + dh + dh * dh
    if method == "kernel":
        return 4 * B * heads * t * f * 4 / 1e9
    if method.startswith("kernel/"):
        c = int(method.split("/")[1])
        return (4 * B * heads * min(t, c) * f * 4 + 20 * B * t * D * 4) / 1e9
    return 20 * B * t * D * 4 / 1e9


def one(method: str, t: int, reps: int, warm: int, threads: int, heads: int = HEADS) -> dict:
    import torch
    import torch.nn.functional as F

    from superbloom.model.attention import kernel_attention
    from superbloom.model.encoder import Attention

    torch.set_num_threads(threads)
    torch.manual_seed(0)

    class Layer(Attention):  # model.Attention with the attention function swapped
        def forward(self, x, keep):
            b, t_, d = x.shape
            q, k, v = self.qkv(x).view(b, t_, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            if method == "softmax":
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
            else:
                y = kernel_attention(q, k, v, keep, chunk=int(method.split("/")[1]) if "/" in method else None)
            return self.out(y.transpose(1, 2).reshape(b, t_, d))

    layer = Layer(D, heads, 0.0)
    x = torch.randn(B, t, D, requires_grad=True)
    keep = torch.ones(B, 1, 1, t, dtype=torch.bool)
    keep[..., t - t // 4:] = False  # padded tail

    def step():
        layer.zero_grad(set_to_none=True)
        x.grad = None
        layer(x, keep).pow(2).sum().backward()

    for _ in range(warm):
        step()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    peak_gb = int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1e6  # ru_maxrss: KiB on Linux
    return {"method": method, "T": t, "heads": heads, "median_s": round(times[len(times) // 2], 5),
            "min_s": round(times[0], 5), "reps": reps, "warm": warm, "peak_rss_gb": round(peak_gb, 2)}


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-gb", type=float, default=8.0, help="skip runs estimated to need more memory")
    ap.add_argument("--slow", type=float, default=4.0,
                    help="one timed step (after one warm-up) once a step of the previous size took this long")
    ap.add_argument("--heads", type=int, default=HEADS, help="attention heads (dh = 128 / heads)")
    ap.add_argument("--warm", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--one", nargs=2, metavar=("METHOD", "T"), help=argparse.SUPPRESS)
    ap.add_argument("--results", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), args.reps, args.warm, args.threads, args.heads)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    methods = args.methods.split(",")
    before = load_avg()
    runs = []
    for method in methods:
        reps, warm = args.reps, 1
        for t in sizes:
            est = estimate_gb(method, t, args.heads)
            if est > args.max_gb:
                runs.append({"method": method, "T": t, "skipped": f"estimated {est:.1f} GB > --max-gb {args.max_gb}"})
                print(runs[-1], flush=True)
                continue
            cmd = [sys.executable, "-m", "benchmarks.kernel_attention_bench", "--one", method, str(t), "--reps", str(reps), "--warm", str(warm),
                   "--threads", str(args.threads), "--heads", str(args.heads)]
            out = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
            if out.returncode:
                runs.append({"method": method, "T": t, "failed": out.stderr.strip().splitlines()[-1:]})
            else:
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
                if runs[-1]["median_s"] > args.slow:
                    reps, warm = 1, 0
            print(runs[-1], flush=True)
    after = load_avg()
    result = {"benchmark": "kernel_attention", "layer": {"batch": B, "d": D, "heads": args.heads, "dh": D // args.heads,
                                                          "padded_fraction": 0.25},
              "what": "median seconds per forward + backward of one attention layer (qkv + attention + out)",
              "runs": runs, "load_average_before": before, "load_average_after": after,
              "machine": machine_info() | {"torch_threads": args.threads}}
    by = {(r["method"], r["T"]): r for r in runs}
    dh = D // args.heads
    md = ["# kernelized vs softmax attention: time per forward + backward of one layer", "",
          f"d = {D}, {args.heads} heads (dh = {dh}), batch {B}, last quarter of every set padded; median "
          f"seconds per step (ms in the table) and peak resident memory (GB) of the process. Kernel features: "
          f"F = 1 + dh + dh^2 = {1 + dh + dh ** 2}. Load average before {before}, after {after}.",
          "", "| T | " + " | ".join(f"{m} ms | {m} GB" for m in methods) + " | best kernel / softmax |",
          "|---|" + "---|---|" * len(methods) + "---|"]
    for t in sizes:
        cells = []
        for m in methods:
            r = by.get((m, t), {})
            cells += ([f"{r['median_s'] * 1e3:.1f}", f"{r['peak_rss_gb']:.2f}"] if "median_s" in r
                      else ["skipped" if "skipped" in r else "failed", ""])
        s = by.get(("softmax", t), {})
        ks = [by[m, t]["median_s"] for m in methods if m.startswith("kernel") and "median_s" in by.get((m, t), {})]
        ratio = f"{min(ks) / s['median_s']:.2f}" if "median_s" in s and ks else ""
        md.append(f"| {t} | " + " | ".join(cells) + f" | {ratio} |")
    md.append("")
    name = "kernel_attention" if args.heads == HEADS else f"kernel_attention_h{args.heads}"
    write_results(Path(args.results), name, result, md)
    print("\n".join(md))


if __name__ == "__main__":
    main()
