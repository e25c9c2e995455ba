"""Time to quality at millions of ids (issue 29 item 4): rec@10 against wall clock for our recipe
(the hybrid, its network alone and its term alone) and for the baselines a user would run, on the
same examples, with paired 95% intervals.

    # the baselines once, their per-example ranks kept (fit s, query ms, peak RSS per baseline)
    .venv/bin/python -m benchmarks.scale.baselines DATA --eval-sets 1000 --baselines popularity,cooc-count,cooc-idf,cooc-cosine \\
        --ranks-dir WORK/baselines --name NAME_baselines
    # our recipe: train in cumulative wall-clock budgets, evaluating after each (resumable: a stage done is kept)
    .venv/bin/python -m benchmarks.scale.time_to_quality DATA --work WORK --budgets 900,1800,3600 --threads 1
    .venv/bin/python -m benchmarks.scale.time_to_quality DATA --work WORK --report --name NAME \\
        --baselines-json benchmarks/results/scale/NAME_baselines.json [--oracle E2E_WORK/ranks-oracle.npz]

Training: `superbloom train DATA --out WORK/model --time-budget B` with the dataset's preset (auto:
millions of ids -> the hashed hybrid) and any --train-args, then `--resume --time-budget B2` for the
next budget (the loop's budget counts the seconds already trained, so the segments add up to one run
of the last budget; the schedule is step-based, so it is the same run). Each segment is a child process
measured by os.wait4: wall seconds, CPU seconds (user + system, all threads), peak RSS. The x axis of
the curve is the cumulative wall seconds of the training processes: everything the recipe needs before
it answers (the co-occurrence start, the hash maps, the item-item term, training, saving), but not the
evaluations between segments.

Evaluation after each segment: in a child process, `sb.load` (BEST: what predict / eval / serve use)
and `evaluate` with no baselines, exact decoding (certified top-k), the examples of
evaluate.make_protocol's drawer with --eval-sets / --seed: the very examples the baselines script ranks
(checked: the targets must be equal). The result (EvalResult.save: the hybrid and its variants' ranks)
is kept in WORK/eval_B. The report pairs every method with the hybrid on the same examples (bootstrap
over held-out sets) and draws rec@10 against wall clock (log scale): the model's three curves, each
baseline a point at its fit seconds.
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

ROOT = Path(__file__).resolve().parents[2]
METHODS = {"model": "hybrid (our recipe)", "network_only": "network alone", "term_only": "term alone"}


def run_measured(cmd: list[str], log: Path) -> dict:
    """Run a child process; -> wall s, CPU s (user + sys) and peak RSS GB of that child, its exit code."""
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    with log.open("a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n")
        f.flush()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    return {"wall_s": round(wall, 1), "cpu_s": round(ru.ru_utime + ru.ru_stime, 1), "peak_rss_gb": round(ru.ru_maxrss / 1e6, 2),
            "exit": os.waitstatus_to_exitcode(status), "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2)}


def load_state(work: Path) -> dict:
    p = work / "state.json"
    return json.loads(p.read_text()) if p.exists() else {"segments": []}


def save_state(work: Path, state: dict) -> None:
    tmp = work / "state.json.tmp"
    tmp.write_text(json.dumps(state, indent=1) + "\n")
    tmp.replace(work / "state.json")


def eval_worker(args) -> None:
    """In this process: load the model, evaluate (no baselines, exact decoding), save the result + timing."""
    import dataclasses

    import superbloom as sb
    from superbloom.data.dataset import Dataset
    from superbloom.evaluation.evaluate import EvalConfig, evaluate
    from superbloom.heads.beam import DecodeConfig

    t = time.perf_counter()
    sb.set_threads(args.threads)
    predictor = sb.load(args.eval_worker, device="cpu")
    load_s = time.perf_counter() - t
    data = Dataset(args.data)
    cfg = EvalConfig(seed=args.seed, max_sets=args.eval_sets, baselines=(), decode=DecodeConfig(exact=True))
    t = time.perf_counter()
    result = evaluate(predictor, data, cfg, progress=False)
    seconds = time.perf_counter() - t
    out = Path(args.out)
    result.save(out)
    (out / "timing.json").write_text(json.dumps({"load_s": round(load_s, 2), "eval_s": round(seconds, 1),
                                                  "examples": int(len(result.targets)),
                                                  "decode": dataclasses.asdict(cfg.decode)}))


def train_and_eval(args, work: Path) -> None:
    state = load_state(work)
    model = work / "model"
    for budget in [float(b) for b in args.budgets.split(",") if b]:
        seg = next((s for s in state["segments"] if s["budget"] == budget), None)
        if seg is None:
            first = not state["segments"]
            cmd = [sys.executable, "-m", "superbloom", "train", args.data, "--out", str(model), "--time-budget", str(budget),
                   "--threads", str(args.threads), "--quiet"]
            cmd += (args.train_args.split() if first else ["--resume"])
            m = run_measured(cmd, work / "train.log")
            if m["exit"] != 0:
                raise SystemExit(f"train exited {m['exit']}: see {work / 'train.log'}")
            steps = [json.loads(x) for x in (model / "metrics.jsonl").read_text().splitlines() if x.strip()]
            seg = {"budget": budget, "train": m, "steps": max((r.get("step", 0) for r in steps), default=0),
                   "trained_s": max((r.get("seconds", 0) for r in steps), default=0)}
            state["segments"].append(seg)
            save_state(work, state)
            print(f"trained to {budget:.0f} s: {seg['steps']} steps, {m}", flush=True)
        if "eval" not in seg:
            out = work / f"eval_{int(budget)}"
            cmd = [sys.executable, "-m", "benchmarks.scale.time_to_quality", args.data, "--work", str(work),
                   "--eval-worker", str(model), "--out", str(out), "--eval-sets", str(args.eval_sets),
                   "--seed", str(args.seed), "--threads", str(args.threads)]
            m = run_measured(cmd, work / "eval.log")
            if m["exit"] != 0:
                raise SystemExit(f"eval exited {m['exit']}: see {work / 'eval.log'}")
            seg["eval"] = m | json.loads((out / "timing.json").read_text()) | {"dir": out.name}
            save_state(work, state)
            res = json.loads((out / "result.json").read_text())
            print(f"evaluated at {budget:.0f} s: rec@10 hybrid {res['model']['rec@10']:.4f}, "
                  + ", ".join(f"{k} {v['rec@10']:.4f}" for k, v in res["variants"].items()), flush=True)


def report(args, work: Path) -> None:
    from superbloom.evaluation.compare import paired
    from superbloom.evaluation.metrics import summarize_ci

    from ..machine import machine_info, machine_line, write_results

    state = load_state(work)
    base_json = {"baselines": {}}  # one or more benchmarks.scale.baselines results, merged
    for f in [f for f in (args.baselines_json or "").split(",") if f]:
        base_json["baselines"].update(json.loads(Path(f).read_text())["baselines"])
    bdir = Path(args.baselines_ranks) if args.baselines_ranks else work / "baselines"
    targets, groups, rows, curves = None, None, [], {m: [] for m in METHODS}
    cum_wall = cum_cpu = 0.0
    last = {}
    for seg in state["segments"]:
        cum_wall += seg["train"]["wall_s"]
        cum_cpu += seg["train"]["cpu_s"]
        if "eval" not in seg:
            continue
        z = np.load(work / seg["eval"]["dir"] / "ranks.npz")
        if targets is None:
            targets = z["targets"]
            groups = z["groups"] if "groups" in z.files else None
        assert np.array_equal(targets, z["targets"]), "two evaluations ranked different examples"
        for key, label in METHODS.items():
            if f"ranks.{key}" not in z.files:
                continue
            r = z[f"ranks.{key}"]
            s = summarize_ci(r, groups)
            # extra: what was spent after training before this evaluation's model answered (reweigh.py's
            # weightings and their validation choice), counted for this point only
            extra_wall, extra_cpu = seg["eval"].get("extra_wall_s", 0.0), seg["eval"].get("extra_cpu_s", 0.0)
            curves[key].append((cum_wall + extra_wall, s["rec@10"]))
            last[key] = r
            rows.append({"method": label, "key": key, "budget_s": seg["budget"], "wall_s": round(cum_wall + extra_wall, 1),
                         "cpu_s": round(cum_cpu + extra_cpu, 1), "steps": seg["steps"], "peak_rss_gb": seg["train"]["peak_rss_gb"],
                         "query_ms": round(1e3 * seg["eval"]["eval_s"] / max(1, seg["eval"]["examples"]), 1), **s})
    baselines = {}
    for name, b in base_json.get("baselines", {}).items():
        f = bdir / f"{name}.npz"
        if "rec@10" not in b or not f.exists():
            continue
        z = np.load(f)
        if targets is not None and not np.array_equal(targets, z["targets"]):
            raise SystemExit(f"{f}: the baseline ranked other examples than the model (check --eval-sets / --seed)")
        baselines[name] = z["ranks"]
        rows.append({"method": name, "key": name, "wall_s": b["fit_s"], "cpu_s": b.get("fit_cpu_s"),
                     "peak_rss_gb": b["peak_rss_gb"], "query_ms": round(1e3 * b["query_s"], 1), **summarize_ci(z["ranks"], groups)})
    if args.oracle and Path(args.oracle).exists():
        z = np.load(args.oracle)
        if targets is not None and np.array_equal(targets, z["targets"]):
            baselines["planted-topic oracle"] = z["model"]
            rows.append({"method": "planted-topic oracle (no model: knows the generator)", "key": "oracle",
                         **summarize_ci(z["model"], groups)})
    # paired: the final hybrid minus each other method on the same examples
    diffs = {}
    if "model" in last:
        for key in ("network_only", "term_only"):
            if key in last:
                diffs[METHODS[key]] = paired(last["model"], last[key], groups)
        for name, r in baselines.items():
            diffs[name] = paired(last["model"], r, groups)
    result = {"data": args.data, "work": str(work), "rows": rows, "paired_final_hybrid_minus": diffs,
              "segments": state["segments"], "machine": machine_info(), "loadavg": os.getloadavg(),
              "baselines_json": args.baselines_json, "note": args.note}
    md = [f"# Time to quality: {args.name}", "",
          f"Data: `{args.data}`; {len(targets) if targets is not None else 0:,} held-out examples (the same for every "
          "method: targets checked equal). Model: `superbloom train` with the dataset's preset"
          + (f" and `{args.train_args}`" if args.train_args else "") + f", {args.threads} torch thread(s), trained in "
          "cumulative budgets (resumed), evaluated after each with exact, certified top-k (BEST checkpoint). "
          "Wall s: cumulative wall seconds of the training processes (start-up, co-occurrence start, hash maps, "
          "item-item term, training, saving); a baseline's: its fit. 95% intervals: bootstrap over held-out sets.", ""]
    if args.note:
        md += [args.note, ""]
    md += ["| method | wall s | CPU s | steps | rec@1 | rec@10 [95%] | rec@20 | query ms | peak RSS GB |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        fmt = lambda v, d=1: "-" if v is None else (f"{v:,.{d}f}" if isinstance(v, float) else f"{v:,}")
        md.append(f"| {r['method']} | {fmt(r.get('wall_s'))} | {fmt(r.get('cpu_s'))} | {fmt(r.get('steps'))} | "
                  f"{r['rec@1']:.4f} | {r['rec@10']:.4f} [{r['rec@10_lo']:.4f}, {r['rec@10_hi']:.4f}] | {r['rec@20']:.4f} | "
                  f"{fmt(r.get('query_ms'))} | {fmt(r.get('peak_rss_gb'), 2)} |")
    if diffs:
        md += ["", "Paired differences, the final hybrid minus each method, same examples (95% bootstrap interval):", "",
               "| hybrid minus | rec@1 | rec@10 | rec@20 |", "|---|---|---|---|"]
        for name, d in diffs.items():
            md.append(f"| {name} | " + " | ".join(f"{d[k]['diff']:+.4f} [{d[k]['lo']:+.4f}, {d[k]['hi']:+.4f}]"
                                                  for k in ("rec@1", "rec@10", "rec@20")) + " |")
    loads = [s["train"]["load_before"] for s in state["segments"]] + [s["train"]["load_after"] for s in state["segments"]]
    md += ["", f"Load average during training (1-min, at segment starts/ends): {min(loads, default=0):.1f}-{max(loads, default=0):.1f} "
           "on 2 cores (other jobs ran beside it: the wall seconds are pessimistic for the model; CPU s is its own). "
           + machine_line(result["machine"])]
    if any(curves.values()):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for key, pts in curves.items():
            if pts:
                ax.plot(*zip(*pts), marker="o", label=METHODS[key])
        for r in rows:
            if r["key"] in baselines or r["key"] == "oracle":
                x = r.get("wall_s") or 1.0
                ax.scatter([max(x, 0.1)], [r["rec@10"]], marker="s" if r["key"] != "oracle" else "*", s=50, zorder=3)
                ax.annotate(r["method"].split(" (")[0], (max(x, 0.1), r["rec@10"]), fontsize=8, xytext=(4, 2),
                            textcoords="offset points")
        ax.set_xscale("log")
        ax.set_xlabel("wall seconds (fit / training, this CPU)")
        ax.set_ylabel("rec@10")
        ax.set_title(f"Time to quality: {args.name}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        png = ROOT / "benchmarks" / "results" / "scale" / f"{args.name}.png"
        fig.tight_layout()
        fig.savefig(png, dpi=110)
        md += ["", f"![rec@10 against wall clock]({png.name})"]
    write_results(ROOT / "benchmarks" / "results" / "scale", args.name, result, md)
    print("\n".join(md))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("data", help="a prepared dataset directory")
    ap.add_argument("--work", required=True, help="folder for the model, the evaluations and state.json")
    ap.add_argument("--budgets", default="900,1800,3600", help="cumulative training seconds, comma-separated")
    ap.add_argument("--train-args", default="", help="extra `superbloom train` flags for the first segment")
    ap.add_argument("--eval-sets", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--report", action="store_true", help="write results/scale/NAME.{json,md,png} from the state")
    ap.add_argument("--name", default="time_to_quality")
    ap.add_argument("--baselines-json", help="benchmarks.scale.baselines' results JSON (fit s, query, RSS); comma-separated for several")
    ap.add_argument("--baselines-ranks", help="its --ranks-dir (default WORK/baselines)")
    ap.add_argument("--oracle", help="e2e.py's ranks-oracle.npz (synthetic data: the planted-topic oracle)")
    ap.add_argument("--note", default="", help="a paragraph for the report")
    ap.add_argument("--eval-worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.eval_worker:
        return eval_worker(args)
    if args.report:
        return report(args, work)
    train_and_eval(args, work)


if __name__ == "__main__":
    main()
