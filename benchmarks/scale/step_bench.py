"""Benchmark: one training step of the recipe a user gets at 283K, 1M and 5.1M ids, by part.

    # the code before the row-sparse step: a checkout of it run on this venv's packages
    #   git worktree add --detach /tmp/step/before 325c9e9 && printf '#!/bin/sh\nPYTHONPATH=/tmp/step/before \
    #   exec %s/.venv/bin/python "$@"\n' "$PWD" > /tmp/step/before-python && chmod +x /tmp/step/before-python
    flock /tmp/superbloom-cpu.lock .venv/bin/python -m benchmarks.scale.step_bench \
        --code before=/tmp/step/before-python --code after=.venv/bin/python --steps 6
    flock /tmp/superbloom-cpu.lock .venv/bin/python -m benchmarks.scale.step_bench --code after=.venv/bin/python \
        --steps 6 --set samples=4096 --ids 1005296,5139571
    # what the step spends its time on, by operator (step_profile.{json,md})
    flock /tmp/superbloom-cpu.lock .venv/bin/python -m benchmarks.scale.step_bench --profile --steps 4 \
        --code before=/tmp/step/before-python --code after=.venv/bin/python --ids 5139571

For each size the model `train --preset auto` builds (the preset by presets.choose: `large` at 283K,
the unhashed hybrid with 4,096 sampled negatives; `millions` above 500K, the hashed hybrid, alpha 50,
m 2), batch 64 (the presets' batch), the default model (2 layers, d 128), random hash maps (the
coherent maps need the data; a step costs the same) and no item-item term (it never enters these
heads' training loss), on sets of Zipf ids (mean size 87, the synthetic data's), the training counts
theirs. Every step is timed by part: batch (the masked training batch), forward, backward,
gradients (averaged over ranks where DDP does not, clipped), optimizer, average (the weight average
validation uses, the presets' default 0.999), as train_step runs them (loop.py). After each step a
1024^3 fp32 matmul is timed: the matmul peak *at that moment* on a shared machine, so that "% of
peak" compares the step's useful FLOPs per second with what the cores gave a matmul then. Useful
FLOPs: the encoder's matmuls on the batch's real tokens (3x forward), and the head's logits over
what its loss needs: every token for the superbloom head's full softmax, each element's logits over
the drawn negatives (and its targets') for a sampled one (3x forward).

Each (code, size) runs in a child process of that code's Python (its peak RSS is the size's), the
codes one after the other for each size so that they meet about the same load; a child runs this
file by its path from a neutral folder, so it imports that Python's own superbloom (a loop without
gradients.py is the old dense step). Rows accumulate in benchmarks/results/scale/step.json (one per
code, size, batch and setting), and step.md shows them all.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

RESULTS = Path(__file__).resolve().parents[1] / "results"
SIZES = (283_000, 1_005_296, 5_139_571)
PARTS = ("batch", "forward", "backward", "gradients", "optimizer", "average")


def fake_sets(n_ids: int, n_sets: int, size: int, rng):
    from superbloom.data.dataset import SetArray

    ids = (rng.zipf(1.3, n_sets * size) - 1) % n_ids
    return SetArray(np.arange(0, n_sets * size + 1, size, dtype=np.int64), ids.astype(np.int32))


def preset_model(n_ids: int, overrides: dict):
    """The preset `auto` picks for n_ids set data -> (preset name, hashing, model config, head config)."""
    from superbloom.hashing.bloom import BloomHash, HashConfig
    from superbloom.heads import head_config, head_settings
    from superbloom.model.config import ModelConfig
    from superbloom.training.presets import PRESETS, DatasetFacts, choose

    name = choose(DatasetFacts(ids=n_ids, mean_set_size=87.0, split="sets", text=False))
    # a preset's settings by config path ("head.name", "hash.alpha") or, in the code before, by flag name
    flat = lambda d: {("head" if k == "head.name" else k.rsplit(".", 1)[-1]): v for k, v in d.items()}  # noqa: E731
    settings = {**flat(PRESETS[name].settings), **flat(overrides)}
    own = set(head_settings(settings["head"]))
    head = head_config(settings["head"], **{k: v for k, v in settings.items() if k in own})
    hashing = BloomHash.build(n_ids, HashConfig(alpha=settings["alpha"], m=settings["m"]))
    return name, hashing, ModelConfig(), head


def useful_flops(model, batch, hashing) -> float:
    """The step's useful FLOPs (module docstring): encoder matmuls on real tokens, the head's logits."""
    cfg = model.encoder.cfg
    d, ff = cfg.d, cfg.d_ff
    real = (~batch.pad).sum(1).double()  # (B,) real tokens per row
    t = float(real.sum())
    per_layer = 2 * t * (4 * d * d + 2 * d * ff) + 4 * float((real ** 2).sum()) * d
    encoder = 3 * cfg.layers * per_layer
    head = model.head
    u = len(torch.unique(batch.target_elem))  # element rows the head scores
    m = hashing.m
    samples = getattr(head.cfg, "samples", 0)
    if samples:  # each element's logits over the drawn negatives (about `samples` of a large table), its targets'
        drawn = min(samples, hashing.n_tokens if m > 1 else hashing.n_ids)
        rows = u * m if m > 1 else u  # the hashed head: m output vectors an element; the others: their mean
        logits = 2 * rows * drawn * d + 2 * len(batch.target_ids) * m * d
    else:  # the full softmax over every token (hashed) or id
        logits = 2 * u * m * hashing.n_tokens * d
    return encoder + 3 * logits


def matmul_peak(a: torch.Tensor) -> float:
    t0 = time.perf_counter()
    a @ a
    return 2 * a.shape[0] ** 3 / (time.perf_counter() - t0)


def one_size(n_ids: int, batch_size: int, steps: int, threads: int, overrides: dict, seed: int = 0,
             profile: bool = False) -> dict:
    from superbloom.model.batches import MaskConfig, training_batch
    from superbloom.model.encoder import build_model, count_parameters
    from superbloom.training import loop
    from superbloom.training.optim import OptimConfig, make_optimizer, set_lr

    torch.set_num_threads(threads)
    rng = np.random.default_rng(seed)
    preset, hashing, mcfg, hcfg = preset_model(n_ids, overrides)
    sets = fake_sets(n_ids, 4000, 87, rng)
    torch.manual_seed(seed)
    model = build_model(mcfg, hcfg, hashing, np.bincount(sets.ids, minlength=n_ids))  # the training counts
    optim = OptimConfig()
    opt = make_optimizer(optim, model.parameters())
    try:  # the row-sparse step (gradients.py); without it the old dense one
        from superbloom.heads.rows import sparse_rows
        from superbloom.training.gradients import StepGradients

        try:  # the optimizer registry's spec says whether it takes row-sparse gradients (loop.fit's test)
            from superbloom.training.optim import optimizer_spec

            takes = optimizer_spec(optim.name).sparse_rows
        except ImportError:  # before the registry: the optimizer said so itself
            takes = getattr(opt, "takes_sparse_rows", False)
        tables = sparse_rows(model) if takes else []
        grads = StepGradients(model, tables)
        average = loop.WeightAverage(model, 0.999, tables)
        code = "row-sparse" if tables else "dense"
    except ImportError:
        grads, average, code = None, loop.WeightAverage(model, 0.999), "dense (old loop)"
    mask = MaskConfig()
    ref = torch.randn(1024, 1024)
    times = {k: [] for k in PARTS}
    peaks, flops = [], []
    model.train()
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) if profile else None
    for step in range(steps):
        if prof is not None and step == 1:  # the timed steps only
            prof.__enter__()
        t0 = time.perf_counter()
        batch = training_batch(sets, rng.choice(len(sets), batch_size, replace=False), hashing, mask, rng)
        t1 = time.perf_counter()
        set_lr(opt, optim, step + 1)
        loss = model(batch)
        t2 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t3 = time.perf_counter()
        if grads is not None:
            grads.reduce()
            grads.clip(optim.clip)
            average.before_step(grads.touched())
        else:
            torch.nn.utils.clip_grad_norm_(model.parameters(), optim.clip)
        t4 = time.perf_counter()
        opt.step()
        t5 = time.perf_counter()
        average.update(step)
        t6 = time.perf_counter()
        if step:  # the first step allocates the optimizer state
            for k, v in zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5)):
                times[k].append(v)
            flops.append(useful_flops(model, batch, hashing))
            peaks.append(matmul_peak(ref))
    if prof is not None:
        prof.__exit__(None, None, None)
    med = {k: statistics.median(v) for k, v in times.items()}
    step_s = sum(med.values())
    compute_s = step_s - med["batch"]
    gflops = statistics.median(flops) / 1e9
    peak = statistics.median(peaks) / 1e9
    return {"ids": n_ids, "preset": preset, "head": hcfg.name, "samples": getattr(hcfg, "samples", 0),
            "batch_size": batch_size, "code": code, "threads": threads, "steps_timed": steps - 1,
            "parameters": count_parameters(model), "tokens": hashing.n_tokens,
            **{f"{k}_s": round(v, 4) for k, v in med.items()}, "step_s": round(step_s, 4),
            "sets_per_s": round(batch_size / step_s, 2), "useful_gflop": round(gflops, 2),
            "gflop_per_s": round(gflops / compute_s, 2), "peak_gflop_per_s": round(peak, 2),
            "percent_of_peak": round(100 * gflops / compute_s / peak, 1),
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
            "loss": round(float(loss.detach()), 3), "source": str(Path(sys.modules["superbloom"].__file__).parents[1]),
            **({"top_ops": top_ops(prof, steps - 1)} if prof is not None else {})}


def top_ops(prof, steps: int, n: int = 15) -> list[dict]:
    """The profiled steps' operators by their own CPU time (not their children's), per step."""
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    return [{"op": e.key, "self_s_per_step": round(e.self_cpu_time_total / 1e6 / steps, 4),
             "share": round(e.self_cpu_time_total / total, 3), "calls_per_step": round(e.count / steps, 1)}
            for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:n]]


def commit_of(source: str) -> str:
    """The commit of the checkout a child imported superbloom from (and whether it had changes)."""
    git = lambda *a: subprocess.run(["git", "-C", source, *a], capture_output=True, text=True).stdout.strip()  # noqa: E731
    head = git("rev-parse", "--short", "HEAD")
    return head + (" (modified)" if head and git("status", "--porcelain", "--untracked-files=no", "superbloom") else "")


def load_average() -> float:
    return round(float(Path("/proc/loadavg").read_text().split()[0]), 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ids", default=",".join(str(s) for s in SIZES), help="comma list of vocabulary sizes")
    ap.add_argument("--batch-size", default="64", help="comma list of batch sizes (the presets': 64)")
    ap.add_argument("--steps", type=int, default=10, help="steps per size (the first is not timed)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a preset setting to override (e.g. samples=4096), JSON values")
    ap.add_argument("--code", action="append", default=[], metavar="LABEL=PYTHON",
                    help="the code to measure: a label and the Python whose superbloom it is (default: after=this one)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child process: one size, a JSON line
    ap.add_argument("--report", action="store_true", help="write step.md again from step.json")
    ap.add_argument("--profile", action="store_true",
                    help="profile the timed steps by operator (torch.profiler, which slows them): rows in "
                         "step_profile.{json,md}, not step.json")
    args = ap.parse_args()
    overrides = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
    if args.one:
        (n,), (b,) = [int(float(x)) for x in args.ids.split(",")], [int(x) for x in args.batch_size.split(",")]
        print(json.dumps(one_size(n, b, args.steps, args.threads, overrides, profile=args.profile)), flush=True)
        return
    from benchmarks.machine import read_results  # the parent only: a child runs this file by its path

    name = "scale/step_profile" if args.profile else "scale/step"
    write = profile_report if args.profile else report
    if args.report:
        return write(read_results(RESULTS, name))
    codes = [c.split("=", 1) for c in args.code] or [["after", sys.executable]]
    result = read_results(RESULTS, name) or {"benchmark": "step_bench" + (" --profile" if args.profile else ""), "rows": []}
    for n in (int(float(x)) for x in args.ids.split(",")):
        for b in (int(x) for x in args.batch_size.split(",")):
            for label, python in codes:
                before = load_average()
                cmd = [os.path.abspath(python), str(Path(__file__).resolve()), "--one", "--ids", str(n),
                       "--batch-size", str(b), "--steps", str(args.steps), "--threads", str(args.threads)]
                cmd += sum((["--set", s] for s in args.set), []) + (["--profile"] if args.profile else [])
                done = subprocess.run(cmd, capture_output=True, text=True, cwd="/tmp")
                if done.returncode:
                    raise SystemExit(f"{label} at {n:,} ids failed:\n{done.stderr[-3000:]}")
                row = json.loads(done.stdout.strip().splitlines()[-1])
                row = dict(row, label=label, commit=commit_of(row["source"]), overrides=overrides,
                           setting=" ".join(f"{k}={v}" for k, v in overrides.items()),
                           load_before=before, load_after=load_average(), date=time.strftime("%Y-%m-%dT%H:%M:%S"))
                print(json.dumps(row), flush=True)
                key = (label, n, b, json.dumps(overrides, sort_keys=True))
                result["rows"] = [r for r in result["rows"] if (r["label"], r["ids"], r["batch_size"],
                                  json.dumps(r["overrides"], sort_keys=True)) != key] + [row]
                result.pop("machine", None)  # this run's machine and command
                result.pop("command", None)
                write(result)


def report(result: dict) -> None:
    """step.json as it is and step.md: every row, one table."""
    from benchmarks.machine import write_results

    md = ["# One training step at 283K, 1M and 5.1M ids: before and after", "",
          "`benchmarks/scale/step_bench.py` (its docstring says what is measured). Seconds per step, median of the "
          "timed steps, by part; % of peak: the step's useful GFLOP per second (without the batch) over a 1024^3 "
          "matmul's timed right after each step (the cores' rate at that moment, shared with other work); loads: the "
          "1-minute load average of the 2-core machine before and after the row's run.", "",
          "| code | ids | preset (head) | batch | " + " | ".join(f"{p} s" for p in PARTS) + " | step s | sets/s | useful GFLOP | GFLOP/s "
          "| matmul peak | % of peak | peak RSS GB | load before / after |",
          "|---|---|---|---|" + "---|" * len(PARTS) + "---|---|---|---|---|---|---|---|"]
    rows = sorted(result["rows"], key=lambda r: (r["ids"], r["batch_size"], r.get("samples", 0), r["label"] != "before"))
    for r in rows:
        head = r["head"] + (f", {r['samples']:,} samples" if r.get("samples") else "")
        md.append(f"| {r['label']} ({r['code']}, {r.get('commit', '?')}) | {r['ids']:,} | {r['preset']} ({head}) | {r['batch_size']} | "
                  + " | ".join(f"{r[k + '_s']:.3f}" for k in PARTS)
                  + f" | {r['step_s']:.3f} | {r['sets_per_s']:.1f} | {r['useful_gflop']:.1f} | {r['gflop_per_s']:.1f} "
                  f"| {r['peak_gflop_per_s']:.1f} | {r['percent_of_peak']:.0f}% | {r['peak_rss_gb']:.2f} "
                  f"| {r['load_before']:.1f} / {r['load_after']:.1f} |")
    write_results(RESULTS, "scale/step", result, md)



def profile_report(result: dict) -> None:
    """step_profile.json as it is and step_profile.md: each row's operators by their own CPU time."""
    from benchmarks.machine import write_results

    md = ["# What one training step spends its time on, by operator", "",
          "`benchmarks/scale/step_bench.py --profile` (torch.profiler over the timed steps, which it slows: the "
          "seconds are the profiled steps', their shares are what to read; step.md has the unprofiled times). "
          "Self CPU time: an operator's own time, without the operators it calls.", ""]
    for r in sorted(result["rows"], key=lambda r: (r["ids"], r.get("samples", 0), r["label"] != "before")):
        head = r["head"] + (f", {r['samples']:,} samples" if r.get("samples") else "")
        md += [f"## {r['label']} ({r['code']}, {r.get('commit', '?')}): {r['ids']:,} ids, {r['preset']} ({head}), "
               f"batch {r['batch_size']}", "",
               f"Profiled step {r['step_s']:.2f} s: forward {r['forward_s']:.2f}, backward {r['backward_s']:.2f}, "
               f"gradients {r['gradients_s']:.2f}, optimizer {r['optimizer_s']:.2f}, average {r['average_s']:.2f} s; "
               f"load {r['load_before']:.1f} / {r['load_after']:.1f}.", "",
               "| operator | self s per step | share | calls per step |", "|---|---|---|---|"]
        md += [f"| `{o['op']}` | {o['self_s_per_step']:.3f} | {o['share']:.0%} | {o['calls_per_step']:g} |"
               for o in r["top_ops"]]
        md.append("")
    write_results(RESULTS, "scale/step_profile", result, md)


if __name__ == "__main__":
    main()
