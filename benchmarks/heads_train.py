"""Benchmark: training step time and peak memory of every output head (superbloom/heads/), at equal hidden
size and at equal parameter count, for vocabularies of 10K, 100K, 1M and 5.3M ids.

    flock /tmp/superbloom-cpu.lock .venv/bin/python -m benchmarks.heads_train    # ~12 min on 2 cores

Heads as in the paper's comparison (sec. 3.3, Table 1):
  superbloom    hashed softmax, m = 2, alpha = 50 (the paper's 5.3M-entity setting)
  full          one row per id, full softmax, no hashing (alpha = 1, m = 1: output tied to the input)
  sampled       the same with sampled softmax: 2.5% of the ids drawn per step (the paper: 128K of
                5.3M), at least 256; log-uniform proposal
  hierarchical  no hashing; Huffman tree over the training counts
Model: 2 Transformer layers, 4 attention heads, d_ff = 4d, no dropout. "equal hidden size": d = 64 for every
head. "equal parameter count": the budget is the parameter count of the full-softmax model at
d = 64; every other head gets the largest d (a multiple of 16, at most 512 to keep the run short)
whose model fits the budget; the table gives the actual counts.

Data: synthetic sets of 32 ids drawn from a Zipf law over the ids (id 0 the most frequent, as
vocab.py numbers them), whose expected counts are the training counts given to the heads. A step
is what train.py does: 16 sets, 15% masked, forward, backward, gradient clipping, AdamW update.
Time: median of 3 steps after 2 warm-up steps. Memory: each configuration runs in a fresh process;
peak memory is that process's peak resident set size (VmHWM), next to its size after importing
torch and building the data (baseline). Configurations whose estimated memory (20 bytes per
parameter: weights, gradients, Adam moments and temporaries, as measured here; plus 4 copies of
the logits) exceeds --max-gb (default 16) are skipped and say so. Results: benchmarks/results/heads_train.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.machine import machine_info, write_results

REPO = Path(__file__).resolve().parents[1]
SIZES = {"10K": 10_000, "100K": 100_000, "1M": 1_000_000, "5.3M": 5_300_000}
HEADS = ("superbloom", "full", "sampled", "hierarchical")
RESULTS = Path(__file__).parent / "results"
D_EQUAL, D_MAX, LAYERS, BATCH, SET_LEN = 64, 512, 2, 16, 32


def hashing_of(head: str) -> tuple[int, int]:
    return (50, 2) if head == "superbloom" else (1, 1)


def samples_for(n: int) -> int:
    return max(256, round(0.025 * n))


def zipf_counts(n: int) -> np.ndarray:
    return np.maximum(1, (1e8 / np.arange(1, n + 1))).astype(np.int64)


def param_count(head: str, n: int, d: int) -> int:
    """Parameters of the model, counted without building it (embedding, blocks, final norm, head)."""
    alpha, m = hashing_of(head)
    vocab = 5 * m + m * -(-n // alpha)
    block = 4 * d * d + 4 * d + 2 * d * 4 * d + 4 * d + d + 4 * d  # attention, feed-forward, 2 norms
    enc = vocab * d + LAYERS * block + 2 * d
    out = {"superbloom": vocab, "full": n, "sampled": n, "hierarchical": (n - 1) * (d + 1)}[head]
    return enc + out


def pick_d(head: str, n: int, budget: int) -> int:
    d = 16
    while d + 16 <= D_MAX and param_count(head, n, d + 16) <= budget:
        d += 16
    return d


def estimate_gb(head: str, n: int, d: int) -> float:
    targets = BATCH * round(0.15 * SET_LEN)
    alpha, m = hashing_of(head)
    width = {"superbloom": m * (5 * m + m * -(-n // alpha)), "full": n, "sampled": samples_for(n),
             "hierarchical": 64}[head]
    return (20 * param_count(head, n, d) + 4 * 4 * targets * width) / 1e9


# ------------------------------------------------------------------------------- one configuration


def vm_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def run_one(cfg: dict) -> dict:
    """Build and time one configuration (in its own process)."""
    import torch

    import superbloom as sb
    from superbloom.model.batches import MaskConfig, training_batch
    from superbloom.data.dataset import SetArray
    from superbloom.hashing.bloom import BloomHash
    from superbloom.model.encoder import build_model, count_parameters

    torch.set_num_threads(cfg["threads"])
    n, d, head = cfg["n_ids"], cfg["d"], cfg["head"]
    counts = zipf_counts(n)
    rng = np.random.default_rng(0)
    p = counts / counts.sum()
    sets = SetArray.from_lists([np.unique(row) for row in rng.choice(n, (BATCH * 5, SET_LEN), p=p)])
    base_kb = vm_kb("VmRSS")
    t0 = time.perf_counter()
    alpha, m = hashing_of(head)
    hashing = BloomHash.build(n, sb.HashConfig(alpha, m, 0))
    torch.manual_seed(0)
    mcfg = sb.ModelConfig(d=d, heads=4, d_ff=4 * d, layers=LAYERS, dropout=0.0)
    hcfg = sb.head_config(head, samples=samples_for(n)) if head == "sampled" else sb.head_config(head)
    model = build_model(mcfg, hcfg, hashing, counts).train()
    build_s = time.perf_counter() - t0
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = [training_batch(sets, np.arange(i * BATCH, (i + 1) * BATCH), hashing, MaskConfig(), rng)
               for i in range(5)]
    times, losses = [], []
    for b in batches:
        t0 = time.perf_counter()
        loss = model(b)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
    return {"params": count_parameters(model), "build_s": round(build_s, 2),
            "step_ms": round(float(np.median(times[2:])) * 1e3, 1), "targets_per_step": int(batches[-1].n_targets),
            "loss_finite": bool(np.isfinite(losses).all()), "peak_rss_mb": round(vm_kb("VmHWM") / 1024),
            "baseline_rss_mb": round(base_kb / 1024)}


# ------------------------------------------------------------------------------- driver


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(SIZES), help="comma-separated subset of " + ",".join(SIZES))
    ap.add_argument("--heads", default=",".join(HEADS))
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    ap.add_argument("--max-gb", type=float, default=16.0, help="skip configurations estimated above this")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one configuration, print JSON
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(json.loads(args.one))))
        return
    result = {"machine": machine_info(), "layers": LAYERS, "batch_sets": BATCH, "set_len": SET_LEN,
              "d_equal": D_EQUAL, "d_max": D_MAX, "threads": args.threads, "cases": []}
    result["machine"]["torch_threads"] = args.threads
    result["machine"]["load_average_at_start"] = [round(x, 2) for x in os.getloadavg()]
    for size in args.sizes.split(","):
        n = SIZES[size]
        budget = param_count("full", n, D_EQUAL)
        for setting in ("equal_d", "equal_params"):
            for head in args.heads.split(","):
                d = D_EQUAL if setting == "equal_d" else pick_d(head, n, budget)
                case = {"size": size, "n_ids": n, "setting": setting, "head": head, "d": d,
                        "alpha": hashing_of(head)[0], "m": hashing_of(head)[1],
                        "samples": samples_for(n) if head == "sampled" else None,
                        "estimated_gb": round(estimate_gb(head, n, d), 1)}
                if case["estimated_gb"] > args.max_gb:
                    case["skipped"] = f"estimated {case['estimated_gb']} GB > --max-gb {args.max_gb}"
                else:
                    one = json.dumps({"n_ids": n, "d": d, "head": head, "threads": args.threads})
                    r = subprocess.run([sys.executable, "-m", "benchmarks.heads_train", "--one", one], cwd=REPO,
                                       capture_output=True, text=True)
                    if r.returncode:
                        case["error"] = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
                    else:
                        case.update(json.loads(r.stdout.strip().splitlines()[-1]))
                result["cases"].append(case)
                print(json.dumps(case), flush=True)
    write_results(Path(args.out), "heads_train", result, markdown(result))


def markdown(r: dict) -> list[str]:
    lines = ["# Training step per output head", "",
             f"{r['layers']} layers, 4 attention heads, d_ff = 4d; {r['batch_sets']} sets of {r['set_len']} ids per "
             "step (15% masked); AdamW; median of 3 steps after 2 warm-up steps; peak = the process's peak RSS "
             f"(baseline: after importing torch). equal d: d = {r['d_equal']}; equal params: the full-softmax "
             f"model's count at d = {r['d_equal']}, d capped at {r['d_max']}. superbloom: alpha = 50, m = 2; "
             "the others unhashed; sampled: 2.5% of the ids per step. See heads_train.py.", "",
             "| ids | setting | head | d | params | step ms | peak MB (baseline) |", "|---|---|---|---|---|---|---|"]
    for c in r["cases"]:
        if "step_ms" in c:
            d = f"{c['d']} (cap)" if c["setting"] == "equal_params" and c["d"] == r["d_max"] else c["d"]
            lines.append(f"| {c['size']} | {c['setting']} | {c['head']} | {d} | {c['params'] / 1e6:.2f}M | "
                         f"{c['step_ms']:.0f} | {c['peak_rss_mb']} ({c['baseline_rss_mb']}) |")
        else:
            lines.append(f"| {c['size']} | {c['setting']} | {c['head']} | {c['d']} | "
                         f"{param_count(c['head'], c['n_ids'], c['d']) / 1e6:.2f}M | "
                         f"{c.get('skipped') or c.get('error')} | |")
    lines.append(f"Load average when the run started: {r['machine']['load_average_at_start']} (a shared machine: "
                 "other work on the same cores slows some rows).")
    return lines + [""]


if __name__ == "__main__":
    main()
