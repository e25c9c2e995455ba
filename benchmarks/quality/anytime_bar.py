"""The anytime bar on the embedded data: `train --time-budget 30` against EASE on the same test examples.

    flock /tmp/superbloom-cpu.lock .venv/bin/python -m benchmarks.quality.anytime_bar --threads 1,2 --seeds 0,1,2

For each thread count and seed: `superbloom prepare` of the embedded Wikispeedia links (once), then the
very commands a user types, `superbloom train DATA --out M --time-budget 30 [--threads T] [--seed S]`
(the preset auto picks: the hybrid, its term fitted and validated before the first step) and
`superbloom eval M DATA --baselines ease,cooccurrence,popularity --json` (its default examples: one
held-out id per test set), plus the same evaluation with 5 held-out ids per set (about 5x the
examples, tighter intervals). The bar: the model's test rec@10 >= EASE's - 0.002 on the same examples.
Each row records the steps trained, the step BEST was kept at, its weight, the training wall seconds
and the load average. Results: benchmarks/results/anytime_bar.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.machine import write_results

ROOT = Path(__file__).resolve().parents[2]
BAR = 0.002  # the model may be this far below EASE's test rec@10
BASELINES = "ease,cooccurrence,popularity"


def sb(*args: str) -> subprocess.CompletedProcess:
    """`superbloom ARGS` in a child process (the command a user types), its output kept."""
    return subprocess.run([sys.executable, "-m", "superbloom", *args], cwd=ROOT, capture_output=True, text=True,
                          check=True)


def evaluate(model: Path, data: Path, threads: int, targets: int) -> dict:
    out = sb("eval", str(model), str(data), "--baselines", BASELINES, "--json", "--quiet", "--threads", str(threads),
             *(["--targets-per-set", str(targets)] if targets > 1 else []))
    return json.loads(out.stdout)


def one_run(data: Path, work: Path, threads: int, seed: int, budget: float) -> dict:
    model = work / f"m_t{threads}_s{seed}"
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    sb("train", str(data), "--out", str(model), "--time-budget", f"{budget:g}", "--threads", str(threads),
       "--seed", str(seed), "--quiet")
    wall = time.perf_counter() - t
    records = [json.loads(x) for x in (model / "metrics.jsonl").read_text().splitlines() if x.strip()]
    vals = [r for r in records if "val_rec@10" in r]
    best = json.loads((model / (model / "BEST").read_text().strip() / "state.json").read_text())["best"]
    row = {"threads": threads, "seed": seed, "budget_s": budget, "train_wall_s": round(wall, 1),
           "steps": max((r["step"] for r in records), default=0), "best_step": best["step"],
           "best_item_mix": best.get("item_mix"), "val_rec@10": best["rec@10"], "val_term_rec@10": best.get("term_rec@10"),
           "val_pure_rec@10": best.get("pure_rec@10"), "validations": [(v["step"], v["val_rec@10"]) for v in vals],
           "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2)}
    for targets in (1, 5):
        e = evaluate(model, data, threads, targets)
        key = "test" if targets == 1 else "test_5"
        row[key] = {"examples": e["examples"], "model": e["rec@10"], "term_only": e["term_only"]["rec@10"],
                    "network_only": e["network_only"]["rec@10"],
                    **{b: e["baselines"][b]["rec@10"] for b in BASELINES.split(",")},
                    "model_minus_ease": e["paired_vs_baselines"]["ease"]["rec@10"],
                    "model_minus_term": e["paired_vs_baselines"]["term_only"]["rec@10"]}
        row[key]["holds"] = row[key]["model"] >= row[key]["ease"] - BAR
    print(json.dumps({k: v for k, v in row.items() if k != "validations"}), flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2", help="torch thread counts, comma-separated")
    ap.add_argument("--seeds", default="0", help="training seeds, comma-separated (0: the command as typed)")
    ap.add_argument("--budget", type=float, default=30.0, help="train --time-budget (seconds)")
    ap.add_argument("--work", default="", help="folder for the data and models (default: a temporary one)")
    ap.add_argument("--name", default="anytime_bar")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        data = work / "wiki"
        if not (data / "meta.json").exists():
            import superbloom

            sb("prepare", str(superbloom.embedded_dataset()), "--out", str(data))
        rows = [one_run(data, work, int(t), int(s), args.budget) for t in args.threads.split(",")
                for s in args.seeds.split(",")]
    holds = all(r["test"]["holds"] for r in rows)
    md = ["# The anytime bar on the embedded Wikispeedia links", "",
          f"`superbloom train DATA --out M --time-budget {args.budget:g} --threads T --seed S` (preset auto: the hybrid "
          "head, its EASE term fitted and validated before the first step), then `superbloom eval M DATA --baselines "
          f"{BASELINES}` on the test sets (one held-out id per set; `test x5`: five per set). The bar: the model's "
          f"rec@10 >= EASE's - {BAR} on the same examples: **{'holds' if holds else 'fails'}** on every run below "
          "(one held-out id per set).", "",
          "| threads | seed | steps | BEST at step | its weight | val rec@10 (its term) | test: model | term alone | "
          "network alone | EASE | model - EASE [95%] | holds | test x5: model | EASE | model - EASE [95%] | train wall s | load |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        a, b = r["test"], r["test_5"]
        d, d5 = a["model_minus_ease"], b["model_minus_ease"]
        md.append(f"| {r['threads']} | {r['seed']} | {r['steps']} | {r['best_step']} | {r['best_item_mix']:g} | "
                  f"{r['val_rec@10']:.4f} ({r['val_term_rec@10']:.4f}) | {a['model']:.4f} | {a['term_only']:.4f} | "
                  f"{a['network_only']:.4f} | {a['ease']:.4f} | {d['diff']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}] | "
                  f"{'yes' if a['holds'] else 'no'} | {b['model']:.4f} | {b['ease']:.4f} | "
                  f"{d5['diff']:+.4f} [{d5['lo']:+.4f}, {d5['hi']:+.4f}] | {r['train_wall_s']:.0f} | "
                  f"{r['load_before']:.1f}-{r['load_after']:.1f} |")
    md += ["", f"Examples: {rows[0]['test']['examples']} (one per set), {rows[0]['test_5']['examples']} (five per set). "
           "Train wall s: the whole `train` process (start-up, preparing the term, the budget, the last validation). "
           "Load: the 1-minute load average before and after training, on 2 cores."]
    write_results(ROOT / "benchmarks" / "results", args.name, {"bar": BAR, "holds": holds, "rows": rows}, md)
    print("\n".join(md))


if __name__ == "__main__":
    main()
