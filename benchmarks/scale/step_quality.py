"""Benchmark: a change to the training step must not lose quality at equal sets seen (paired runs).

    flock /tmp/superbloom-cpu.lock .venv/bin/python -m benchmarks.scale.step_quality --data DATA --name synth283k \\
        --steps 300 --eval-every 100 --parallel 2 --max-sets 500 \\
        --variant before=/tmp/step/before-python:--item-term,cooccurrence,--val-fraction,0.005 \\
        --variant after=.venv/bin/python:--item-term,cooccurrence,--val-fraction,0.005

(/tmp/step/before-python: the code before the change, as in step_bench.py; DATA: `superbloom synth
--ids 283000 --links 3000000 --topics 1000 --format edges --out L.tsv` then `superbloom prepare L.tsv
--out DATA`.)

Each variant is `superbloom train DATA` with no preset flag (the recipe `auto` picks for the data, as
a user gets it), the same seed, steps and validation (the same validation sets and examples), one
torch thread, run by its own Python (a checkout of the code before a change has its own venv) with
its extra flags (after the colon, comma-separated), under /usr/bin/time (wall, CPU seconds, peak RSS).
From each run's metrics.jsonl: the validation curve against sets seen (rec@10 of the model and, for
a hybrid, of its network alone and its term alone; the loss every 50 steps) and the sets per second
of the loop. Then every model is evaluated (evaluation.evaluate, as `superbloom eval`) on the same
held-out test sets (--max-sets; the targets checked equal): the paired differences of each variant
minus the first, of the models and of their networks alone (and terms alone), with the bootstrap
intervals of the differences (evaluation.compare.paired). Results:
benchmarks/results/scale/step_quality_<name>.{json,md}; the runs stay under --runs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results" / "scale"


def load_average() -> float:
    return round(float(Path("/proc/loadavg").read_text().split()[0]), 2)


def start(cmd: list[str], log: Path) -> subprocess.Popen:
    """Start cmd under /usr/bin/time (its figures in log.time), its output into `log`; in the log's folder,
    so that `python -m superbloom` imports the package of that Python's own install, not a checkout in
    the working directory."""
    with open(log, "w") as out:
        return subprocess.Popen(["/usr/bin/time", "-f", "%e %U %S %M", "-o", str(log.with_suffix(".time"))] + cmd,
                                stdout=out, stderr=subprocess.STDOUT, cwd=log.parent)


def timed(proc: subprocess.Popen, log: Path) -> dict:
    """Wait for a started run: {wall_s, cpu_s, peak_rss_gb}."""
    if proc.wait():
        raise SystemExit(f"{' '.join(proc.args)} failed; see {log}")
    wall, user, sys_, rss = log.with_suffix(".time").read_text().split()[-4:]
    return {"wall_s": float(wall), "cpu_s": round(float(user) + float(sys_), 1), "peak_rss_gb": round(int(rss) / 1e6, 2)}


def curve(run: Path, batch: int) -> dict:
    """The validation curve and the loss curve of a run's metrics.jsonl."""
    val, loss = [], []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        if "val_rec@10" in r and not r.get("final"):
            val.append({"step": r["step"], "sets_seen": r["step"] * batch, "seconds": r["seconds"],
                        "rec@10": r["val_rec@10"], "network_rec@10": r.get("val_pure_rec@10"),
                        "term_rec@10": r.get("val_term_rec@10")})
        elif "loss" in r:
            loss.append({"step": r["step"], "loss": r["loss"], "sets_per_s": r["examples_per_s"]})
    return {"validation": val, "loss": loss}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="a prepared dataset")
    ap.add_argument("--name", required=True, help="results/scale/step_quality_<name>.{json,md}")
    ap.add_argument("--about", default="", help="a line on the data, for the markdown")
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--eval-every", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=64, help="the presets' batch")
    ap.add_argument("--variant", action="append", required=True, metavar="NAME=PYTHON[:FLAG,VALUE,...]",
                    help="a run: its name, the Python that runs superbloom, its extra train flags")
    ap.add_argument("--runs", default="/tmp/step_quality", help="where the model folders go")
    ap.add_argument("--max-sets", type=int, default=2000, help="held-out test sets of the paired evaluation")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--parallel", type=int, default=1,
                    help="runs at a time (each on --threads threads: on a 2-core machine 2 runs of 1 thread; the "
                         "sets/s of runs that share the cores are not the step's speed, step_bench.py measures that)")
    ap.add_argument("--skip-train", action="store_true", help="reuse the runs already under --runs")
    ap.add_argument("--report", action="store_true", help="write the markdown again from the results' JSON")
    args = ap.parse_args()
    if args.report:
        from benchmarks.machine import read_results, write_results

        out = read_results(RESULTS, f"step_quality_{args.name}")
        return write_md(out, args.name, lambda name, result, md: write_results(RESULTS, name, result, md, rewrite=True))
    runs = Path(args.runs) / args.name
    runs.mkdir(parents=True, exist_ok=True)
    variants = []
    for v in args.variant:
        name, rest = v.split("=", 1)
        python, _, flags = rest.partition(":")
        variants.append((name, python, [f for f in flags.split(",") if f]))
    out = {"benchmark": "step_quality", "data": args.data, "about": args.about, "steps": args.steps,
           "eval_every": args.eval_every, "batch_size": args.batch_size, "threads": args.threads, "variants": {}}
    entries, pending = {}, []
    for name, python, flags in variants:
        cmd = [os.path.abspath(python), "-m", "superbloom", "train", args.data, "--out", str(runs / name), "--steps", str(args.steps),
               "--eval-every", str(args.eval_every), "--batch-size", str(args.batch_size), "--threads",
               str(args.threads), "--quiet", "--overwrite", *flags]
        entries[name] = {"python": python, "flags": flags, "command": " ".join(cmd)}
        pending.append((name, cmd))
    while pending and not args.skip_train:
        batch, pending = pending[:args.parallel], pending[args.parallel:]
        procs = []
        for name, cmd in batch:
            entries[name]["load_before"] = load_average()
            procs.append((name, start(cmd, runs / f"{name}.log")))
        for name, proc in procs:
            entries[name].update(timed(proc, runs / f"{name}.log"), load_after=load_average(),
                                 parallel=[n for n, _ in batch])
            print(f"{name}: {entries[name]['wall_s']:.0f} s wall, {entries[name]['cpu_s']:.0f} s CPU", flush=True)
    for name, entry in entries.items():
        run = runs / name
        state = json.loads(sorted((run / "checkpoints").glob("step-*"))[-1].joinpath("state.json").read_text())
        entry["train_seconds"] = round(state["seconds"], 1)
        entry["train_sets_per_s"] = round(state["examples"] / max(state["seconds"], 1e-9), 2)
        entry.update(curve(run, args.batch_size))
        out["variants"][name] = entry
    out["evaluation"] = paired_evaluation(args.data, [runs / n for n, _, _ in variants], args.max_sets, args.threads)
    write_md(out, args.name)


def paired_evaluation(data: str, models: list[Path], max_sets: int, threads: int) -> dict:
    """Each model and its variants on the same held-out sets; each later model minus the first, paired."""
    import numpy as np
    import torch

    import superbloom as sb
    from superbloom.evaluation.compare import paired
    from superbloom.evaluation.evaluate import EvalConfig, evaluate

    torch.set_num_threads(threads)
    ds, cfg = sb.Dataset(data), EvalConfig(max_sets=max_sets, baselines=())
    results, t0 = [], time.time()
    for m in models:
        res = evaluate(sb.load(m), ds, cfg, progress=False)
        if results and not np.array_equal(res.targets, results[0].targets):
            raise SystemExit(f"{m}: its evaluation examples differ from {models[0]}'s: not a paired comparison")
        results.append(res)
    first = results[0]
    out = {"examples": int(len(first.targets)), "seconds": round(time.time() - t0, 1),
           "metrics": {m.name: {method: {k: float(v) for k, v in _metrics(r, method).items()} for method in r.ranks}
                       for m, r in zip(models, results)},
           "paired": {m.name: {method: paired(r.ranks[method], first.ranks[method], first.groups, first.entry.recall)
                               for method in r.ranks if method in first.ranks}
                      for m, r in zip(models[1:], results[1:])}}
    return out


def _metrics(res, method: str) -> dict:
    from superbloom.evaluation.compare import per_example

    return {("mrr" if k == "mrr" else f"rec@{k}"): v.mean() for k, v in per_example(res.ranks[method]).items()}


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.4f}"


def write_md(out: dict, name: str, write=None) -> None:
    """results/scale/step_quality_<name>.{json,md} through the one results writer (machine, load, command)."""
    from benchmarks.machine import write_results

    write = write or (lambda n, result, md: write_results(RESULTS, n, result, md))
    md = [f"# Training step: the same validation curve per sets seen ({name})", "",
          f"`benchmarks/scale/step_quality.py` (its docstring says what is run). Data: `{out['data']}`. {out['about']}",
          f"{out['steps']:,} steps of batch {out['batch_size']}, validation every {out['eval_every']:,} steps on the "
          f"same validation sets, {out['threads']} torch thread(s), the same seed.", "",
          "| variant | flags | train s | sets/s | wall s | CPU s | peak RSS GB | load before / after |",
          "|---|---|---|---|---|---|---|---|"]
    for v, e in out["variants"].items():
        md.append(f"| {v} | {' '.join(e['flags']) or '(the recipe)'} | {e['train_seconds']:,.0f} | {e['train_sets_per_s']:.1f} "
                  f"| {e.get('wall_s', 0):,.0f} | {e.get('cpu_s', 0):,.0f} | {e.get('peak_rss_gb', 0):.2f} "
                  f"| {e.get('load_before', 0):.1f} / {e.get('load_after', 0):.1f} |")
    md += ["", "Validation rec@10 against sets seen (model / its network alone / its term alone):", "",
           "| sets seen | " + " | ".join(out["variants"]) + " |", "|---|" + "---|" * len(out["variants"])]
    curves = {v: {c["sets_seen"]: c for c in e["validation"]} for v, e in out["variants"].items()}
    for seen in sorted(set().union(*[set(c) for c in curves.values()])):
        cells = []
        for v in out["variants"]:
            c = curves[v].get(seen)
            cells.append("-" if c is None else f"{_fmt(c['rec@10'])} / {_fmt(c['network_rec@10'])} / {_fmt(c['term_rec@10'])}")
        md.append(f"| {seen:,} | " + " | ".join(cells) + " |")
    md += ["", "Training loss (the loop's running mean) every 50 steps:", "",
           "| step | " + " | ".join(out["variants"]) + " |", "|---|" + "---|" * len(out["variants"])]
    losses = {v: {c["step"]: c["loss"] for c in e["loss"]} for v, e in out["variants"].items()}
    for step in sorted(set().union(*[set(c) for c in losses.values()])):
        if step % 200 == 0 or step == 50:
            md.append(f"| {step:,} | " + " | ".join(_fmt(losses[v].get(step)) for v in out["variants"]) + " |")
    ev = out["evaluation"]
    first = next(iter(out["variants"]))
    md += ["", f"Held-out test sets ({ev['examples']:,} examples, the same for every model), rec@10 of each model and "
           "its parts:", "", "| variant | " + " | ".join(next(iter(ev["metrics"].values()))) + " |",
           "|---|" + "---|" * len(next(iter(ev["metrics"].values())))]
    for v, m in ev["metrics"].items():
        md.append(f"| {v} | " + " | ".join(f"{x['rec@10']:.4f}" for x in m.values()) + " |")
    md += ["", f"Paired: each variant minus {first}, by part (95% bootstrap interval of the difference):", "",
           "| variant | part | rec@1 | rec@10 | rec@20 |", "|---|---|---|---|---|"]
    for v, parts in ev["paired"].items():
        for part, p in parts.items():
            md.append(f"| {v} | {part} | " + " | ".join(f"{p[k]['diff']:+.4f} [{p[k]['lo']:+.4f}, {p[k]['hi']:+.4f}]"
                                                        for k in ("rec@1", "rec@10", "rec@20")) + " |")
    md.append("")
    write(f"step_quality_{name}", out, md)


if __name__ == "__main__":
    main()
