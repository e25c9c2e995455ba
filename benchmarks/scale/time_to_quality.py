"""Time to quality: rec@10 against wall clock for our recipe (the anytime hybrid, its network alone and
its term alone) and for the baselines a user would run, on the same examples, with paired 95% intervals.

    # one command per dataset (a prepared folder, or a name of benchmarks/datasets.py, prepared into WORK/data):
    # the baselines (fit s, query ms, peak RSS each; ALS and item2vec with the settings chosen on a validation
    # split where quality_user_baselines.json has them), then our recipe trained in cumulative budgets,
    # evaluated after each (resumable: a stage done is kept), then the report
    flock /tmp/superbloom-cpu.lock .venv/bin/python -m benchmarks.scale.time_to_quality wikispeedia --work WORK \
        --budgets 0,30,120,600 --threads 1 --baselines popularity,cooc-count,cooc-idf,cooc-cosine,ease,sansa,als,item2vec \
        --report --name tq_wikispeedia
    # several reports as one table and one figure (the README's results table)
    .venv/bin/python -m benchmarks.scale.time_to_quality --summary tq_wikispeedia,tq_fb15k237 --name time_to_quality_sets

Training: `superbloom train DATA --out WORK/model --time-budget B` with the dataset's preset (auto) and any
--train-args, then `--resume --time-budget B2` for the next budget (the loop's budget counts the seconds
already trained, so the segments add up to one run of the last budget; the schedule is step-based, so it is
the same run). The first answer: while the first segment runs, the moment its first checkpoint lands
(train writes the term alone before its step-0 validation) is noted (wall and CPU seconds) and the
folder is snapshotted then (hard links, WORK/first_answer) and evaluated as served at that moment.
Budget 0: the run stops right after its step-0 validation (BEST: the term alone or the weight the
validation chose). Each segment is a child process measured by os.wait4: wall seconds, CPU
seconds (user + system, all threads), peak RSS. The x axis is the cumulative wall seconds of the training
processes: everything the recipe needs before it answers (start-up, reading the data, the co-occurrence
start, the hash maps, the item-item term, the step-0 validation, training, saving), but not the
evaluations between segments.

Evaluation after each segment: in a child process, `sb.load` (BEST: what predict / eval / serve use)
and `evaluate` with no baselines, exact decoding (certified top-k), the examples of
evaluate.make_protocol's drawer with --eval-sets / --seed: the very examples the baselines script ranks
(checked: the targets must be equal). The result (EvalResult.save: the hybrid and its variants' ranks)
is kept in WORK/eval_B. The report pairs every method with the hybrid on the same examples (bootstrap
over held-out sets), says for every baseline when the hybrid first reaches it and first passes it with
its interval (in multiples of the baseline's fit seconds: the bar against the best closed form, every
baseline but ALS and item2vec), and draws rec@10 against wall clock (log scale): the model's three
curves, each baseline a point at its fit seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
METHODS = {"model": "hybrid (our recipe)", "network_only": "network alone", "term_only": "term alone"}
ITERATIVE = ("als", "item2vec")  # the baselines that are not closed forms (the bar is against the best closed form)
FIRST_ANSWER = 0.001  # budget 0's --time-budget: the loop stops right after the step-0 checkpoint
TUNED = ROOT / "benchmarks" / "results" / "quality_user_baselines.json"  # ALS / item2vec settings chosen on val


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_measured(cmd: list[str], log: Path, watch=None) -> dict:
    """Run a child process; -> wall s, CPU s (user + sys) and peak RSS GB of that child, its exit code.
    `watch(pid, wall_s)`, if given, is called every 0.05 s while the child runs."""
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    with log.open("a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n")
        f.flush()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG if watch else 0)
            if pid:
                break
            watch(proc.pid, time.perf_counter() - t)
            time.sleep(0.05)
    wall = time.perf_counter() - t
    return {"wall_s": round(wall, 1), "cpu_s": round(ru.ru_utime + ru.ru_stime, 1), "peak_rss_gb": round(ru.ru_maxrss / 1e6, 2),
            "exit": os.waitstatus_to_exitcode(status), "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2)}


class FirstAnswer:
    """Watches a new run's model folder for its first complete checkpoint (train writes the term alone
    before its step-0 validation): when LATEST appears, notes the wall and CPU seconds and snapshots the
    folder as it stands (hard links: train never rewrites a file in place) into `snapshot`, its BEST and
    any checkpoint but LATEST's left out, so that the first answer is evaluated as served then."""

    def __init__(self, model: Path, snapshot: Path):
        self.model, self.snapshot, self.seen = model, snapshot, None

    def __call__(self, pid: int, wall: float) -> None:
        if self.seen is not None or not (self.model / "LATEST").is_file():
            return
        self.seen = {"wall_s": round(wall, 1), "cpu_s": round(cpu_seconds(pid), 1), "load_before": round(os.getloadavg()[0], 2)}
        pointed = (self.model / "LATEST").read_text().strip()
        shutil.rmtree(self.snapshot, ignore_errors=True)
        self.snapshot.mkdir(parents=True)
        for p in self.model.iterdir():
            try:
                if p.is_file() and p.name not in ("BEST", "LATEST") and not p.name.endswith(".tmp"):
                    os.link(p, self.snapshot / p.name)
                elif p.is_dir() and p.name != "checkpoints":
                    shutil.copytree(p, self.snapshot / p.name, copy_function=os.link)
            except FileNotFoundError:  # a temporary file renamed meanwhile
                pass
        (self.snapshot / "LATEST").write_text(pointed + "\n")
        shutil.copytree(self.model / pointed, self.snapshot / pointed, copy_function=os.link)
        self.seen["dir"] = self.snapshot.name


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
    cfg = EvalConfig(seed=args.seed, max_sets=args.eval_sets, baselines=(), decode=DecodeConfig(exact=True),
                     targets_per_set=args.targets_per_set)
    t = time.perf_counter()
    result = evaluate(predictor, data, cfg, progress=False)
    seconds = time.perf_counter() - t
    out = Path(args.out)
    result.save(out)
    (out / "timing.json").write_text(json.dumps({"load_s": round(load_s, 2), "eval_s": round(seconds, 1),
                                                  "examples": int(len(result.targets)),
                                                  "checkpoint": predictor.config.get("checkpoint"),
                                                  "decode": dataclasses.asdict(cfg.decode)}))


def resolve_data(args, work: Path) -> str:
    """The prepared dataset: args.data itself (a folder), or a name of benchmarks/datasets.py (the
    quality family's aliases: beauty is S3-Rec's) prepared once into WORK/data."""
    if "/" in args.data or Path(args.data, "meta.json").exists():
        return args.data
    from benchmarks.datasets import prepare

    prepare(args.data, work / "data", family="quality")
    return str(work / "data")


def tuned_settings(name: str, path: Path = TUNED) -> dict[str, str]:
    """{"als": "field=value,...", "item2vec": ...}: the settings quality_user_baselines.py chose on the
    validation split of dataset `name` (its registry or alias name), or {} where it has none."""
    if not path.exists():
        return {}
    rows = json.loads(path.read_text()).get("rows", [])
    chosen = {r["method"]: r.get("setting") or {} for r in rows
              if r.get("dataset") == name and r.get("method") in ITERATIVE}
    return {m: ",".join(f"{k}={v}" for k, v in setting.items()) for m, setting in chosen.items()}


def run_baselines(args, work: Path, data: str) -> None:
    """benchmarks.scale.baselines for --baselines (each in its own process; ranks into WORK/baselines,
    WORK/baselines.json), once: a baseline already there is kept."""
    path = work / "baselines.json"
    done = json.loads(path.read_text())["baselines"] if path.exists() else {}
    todo = [b for b in args.baselines.split(",") if b and "rec@10" not in done.get(b, {})]
    if not todo:
        return
    tuned = tuned_settings(Path(args.data).name if "/" in args.data else args.data)
    cmd = [sys.executable, "-m", "benchmarks.scale.baselines", data, "--eval-sets", str(args.eval_sets),
           "--seed", str(args.seed), "--targets-per-set", str(args.targets_per_set), "--threads", str(args.threads), "--baselines", ",".join(todo),
           "--ranks-dir", str(work / "baselines"), "--results", str(work), "--name", "baselines_new"]
    cmd += args.baselines_args.split()
    for family, setting in tuned.items():
        cmd += [f"--{family}", setting] + (["--als-confidence", "plain"] if "confidence=plain" in setting else [])
    m = run_measured(cmd, work / "baselines.log")
    if m["exit"] != 0:
        raise SystemExit(f"baselines exited {m['exit']}: see {work / 'baselines.log'}")
    new = json.loads((work / "baselines_new.json").read_text())
    for b, r in new["baselines"].items():
        if "rec@10" in r and b in tuned:
            r["setting"] = tuned[b] + " (chosen on val: quality_user_baselines.json)"
    merged = dict(new, baselines={**done, **new["baselines"]})
    (work / "baselines.json").write_text(json.dumps(merged, indent=1) + "\n")
    for f in ("baselines_new.json", "baselines_new.md"):
        (work / f).unlink(missing_ok=True)


def train_and_eval(args, work: Path, data: str) -> None:
    state = load_state(work)
    model = work / "model"
    for budget in [float(b) for b in args.budgets.split(",") if b]:
        seg = next((s for s in state["segments"] if s["budget"] == budget), None)
        if seg is None:
            first = not state["segments"]
            cmd = [sys.executable, "-m", "superbloom", "train", data, "--out", str(model),
                   "--time-budget", str(budget or FIRST_ANSWER), "--threads", str(args.threads), "--quiet"]
            cmd += (args.train_args.split() if first else ["--resume"])
            watch = FirstAnswer(model, work / "first_answer") if first else None
            m = run_measured(cmd, work / "train.log", watch)
            if m["exit"] != 0:
                raise SystemExit(f"train exited {m['exit']}: see {work / 'train.log'}")
            steps = [json.loads(x) for x in (model / "metrics.jsonl").read_text().splitlines() if x.strip()]
            seg = {"budget": budget, "train": m, "steps": max((r.get("step", 0) for r in steps), default=0),
                   "trained_s": max((r.get("seconds", 0) for r in steps), default=0)}
            if watch is not None and watch.seen is not None:  # the first answer: evaluated as its own point
                state["segments"].append({"budget": -1.0, "first_answer": True, "train": watch.seen, "steps": 0})
            state["segments"].append(seg)
            save_state(work, state)
            print(f"trained to {budget:.0f} s: {seg['steps']} steps, {m}", flush=True)
        for seg in [s for s in state["segments"] if s.get("first_answer") and "eval" not in s] + [seg]:
            evaluate_segment(args, work, data, state, seg)


def evaluate_segment(args, work: Path, data: str, state: dict, seg: dict) -> None:
    """Evaluate the model a segment left (the first answer: its snapshot) in a child process, once."""
    budget, model = seg["budget"], work / seg["train"].get("dir", "model")
    if "eval" not in seg:
        out = work / ("eval_first" if seg.get("first_answer") else f"eval_{int(budget)}")
        cmd = [sys.executable, "-m", "benchmarks.scale.time_to_quality", data, "--work", str(work),
               "--eval-worker", str(model), "--out", str(out), "--eval-sets", str(args.eval_sets),
               "--seed", str(args.seed), "--threads", str(args.threads),
               "--targets-per-set", str(args.targets_per_set)]
        m = run_measured(cmd, work / "eval.log")
        if m["exit"] != 0:
            raise SystemExit(f"eval exited {m['exit']}: see {work / 'eval.log'}")
        seg["eval"] = m | json.loads((out / "timing.json").read_text()) | {"dir": out.name}
        save_state(work, state)
        res = json.loads((out / "result.json").read_text())
        seg["eval"]["head"] = res.get("head")
        save_state(work, state)
        print(f"evaluated at {budget:.0f} s: rec@10 hybrid {res['model']['rec@10']:.4f}, "
              + ", ".join(f"{k} {v['rec@10']:.4f}" for k, v in res["variants"].items()), flush=True)


def report(args, work: Path) -> None:
    from superbloom.evaluation.compare import paired
    from superbloom.evaluation.metrics import summarize_ci

    from ..machine import machine_info, machine_line, write_results

    state = load_state(work)
    base_json = {"baselines": {}}  # one or more benchmarks.scale.baselines results, merged (default WORK/baselines.json)
    files = [f for f in (args.baselines_json or "").split(",") if f] or (
        [str(work / "baselines.json")] if (work / "baselines.json").exists() else [])
    for f in files:
        base_json["baselines"].update(json.loads(Path(f).read_text())["baselines"])
    bdir = Path(args.baselines_ranks) if args.baselines_ranks else work / "baselines"
    targets, groups, rows, curves = None, None, [], {m: [] for m in METHODS}
    cum_wall = cum_cpu = 0.0
    last, points = {}, []  # points: (wall s, the model's ranks, its row) for every evaluation, in order
    for seg in state["segments"]:
        at_wall, at_cpu = cum_wall + seg["train"]["wall_s"], cum_cpu + seg["train"]["cpu_s"]
        if not seg.get("first_answer"):  # the first answer: a moment inside the next (budget 0) segment
            cum_wall, cum_cpu = at_wall, at_cpu
        if "eval" not in seg:
            continue
        z = np.load(work / seg["eval"]["dir"] / "ranks.npz")
        if targets is None:
            targets = z["targets"]
            groups = z["groups"] if "groups" in z.files else None
        assert np.array_equal(targets, z["targets"]), "two evaluations ranked different examples"
        head = seg["eval"].get("head") or {}
        for key, label in METHODS.items():
            if f"ranks.{key}" not in z.files:
                continue
            r = z[f"ranks.{key}"]
            s = summarize_ci(r, groups)
            # extra: what was spent after training before this evaluation's model answered (reweigh.py's
            # weightings and their validation choice), counted for this point only
            extra_wall, extra_cpu = seg["eval"].get("extra_wall_s", 0.0), seg["eval"].get("extra_cpu_s", 0.0)
            curves[key].append((at_wall + extra_wall, s["rec@10"]))
            last[key] = r
            rows.append({"method": label, "key": key, "budget_s": seg["budget"], "wall_s": round(at_wall + extra_wall, 1),
                         "cpu_s": round(at_cpu + extra_cpu, 1), "steps": seg["steps"], "peak_rss_gb": seg["train"].get("peak_rss_gb"),
                         "query_ms": round(1e3 * seg["eval"]["eval_s"] / max(1, seg["eval"]["examples"]), 1),
                         "best": seg["eval"].get("checkpoint"), "item_mix": head.get("item_mix"), **s})
            if key == "model":
                points.append((at_wall + extra_wall, r, rows[-1]))
    baselines, fit_s = {}, {}
    for name, b in base_json.get("baselines", {}).items():
        f = bdir / f"{name}.npz"
        if "rec@10" not in b or not f.exists():
            continue
        z = np.load(f)
        if targets is not None and not np.array_equal(targets, z["targets"]):
            raise SystemExit(f"{f}: the baseline ranked other examples than the model (check --eval-sets / --seed)")
        baselines[name], fit_s[name] = z["ranks"], b["fit_s"]
        rows.append({"method": name, "key": name, "wall_s": b["fit_s"], "cpu_s": b.get("fit_cpu_s"),
                     "peak_rss_gb": b["peak_rss_gb"], "query_ms": round(1e3 * b["query_s"], 1),
                     "setting": b.get("setting"), **summarize_ci(z["ranks"], groups)})
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
    reach = reaching(points, baselines, fit_s, groups, paired)
    closed = [n for n in fit_s if n not in ITERATIVE]
    best_closed = max(closed, key=lambda n: float(hits10(baselines[n])), default=None)
    bar = bar_check(reach, best_closed) if best_closed else None
    result = {"data": args.data, "work": str(work), "rows": rows, "paired_final_hybrid_minus": diffs,
              "reaching": reach, "best_closed_form": best_closed, "bar": bar,
              "segments": state["segments"], "machine": machine_info(), "loadavg": os.getloadavg(),
              "baselines_json": files, "note": args.note}
    md = [f"# Time to quality: {args.name}", "",
          f"Data: `{Path(args.data).name if '/' in args.data else args.data}`; {len(targets) if targets is not None else 0:,} "
          "held-out examples (the same for every method: targets checked equal). Model: `superbloom train` with the "
          "dataset's preset" + (f" and `{args.train_args}`" if args.train_args else "") + f", {args.threads} torch "
          "thread(s), trained in cumulative budgets (resumed; the first answer: the folder as it stood when its first "
          "checkpoint landed, the term alone written before any validation, snapshotted then; budget 0: stopped right "
          "after the step-0 validation), evaluated after each with exact, certified top-k (BEST checkpoint, or the "
          "first answer's only one). Wall s: cumulative wall seconds of the training processes (start-up, reading the data, hash "
          "maps, item-item term, step-0 validation, training, saving); a baseline's: its fit. 95% intervals: bootstrap "
          "over held-out sets.", ""]
    if args.note:
        md += [args.note, ""]
    md += ["| method | wall s | CPU s | steps | BEST (weight) | rec@1 | rec@10 [95%] | rec@20 | query ms | peak RSS GB |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        fmt = lambda v, d=1: "-" if v is None else (f"{v:,.{d}f}" if isinstance(v, float) else f"{v:,}")  # noqa: E731
        best = (f"{r['best'].split('-')[1].lstrip('0') or '0'} ({r['item_mix']:g})" if r.get("best") and r["key"] == "model"
                and r.get("item_mix") is not None else "-")
        name = r["method"] + (f" ({r['setting']})" if r.get("setting") else "")
        md.append(f"| {name} | {fmt(r.get('wall_s'))} | {fmt(r.get('cpu_s'))} | {fmt(r.get('steps'))} | {best} | "
                  f"{r['rec@1']:.4f} | {r['rec@10']:.4f} [{r['rec@10_lo']:.4f}, {r['rec@10_hi']:.4f}] | {r['rec@20']:.4f} | "
                  f"{fmt(r.get('query_ms'))} | {fmt(r.get('peak_rss_gb'), 2)} |")
    if diffs:
        md += ["", "Paired differences, the final hybrid minus each method, same examples (95% bootstrap interval):", "",
               "| hybrid minus | rec@1 | rec@10 | rec@20 |", "|---|---|---|---|"]
        for name, d in diffs.items():
            md.append(f"| {name} | " + " | ".join(f"{d[k]['diff']:+.4f} [{d[k]['lo']:+.4f}, {d[k]['hi']:+.4f}]"
                                                  for k in ("rec@1", "rec@10", "rec@20")) + " |")
    if reach:
        md += ["", "When the anytime hybrid (its BEST, as served) first reaches each baseline's rec@10, and first passes "
               "it with its paired interval above 0: cumulative wall seconds, and that as a multiple of the baseline's fit "
               "seconds:", "", "| baseline | its rec@10 | fit s | hybrid >= it at | x fit | above it [interval > 0] at | x fit |",
               "|---|---|---|---|---|---|---|"]
        for name, r in reach.items():
            at = lambda k: "-" if r[k] is None else f"{r[k]:,.0f}"  # noqa: E731
            x = lambda k: "-" if r[k] is None else f"{r[k] / max(r['fit_s'], 1e-9):.2f}"  # noqa: E731
            md.append(f"| {name} | {r['rec@10']:.4f} | {r['fit_s']:,.1f} | {at('reached_s')} | {x('reached_s')} | "
                      f"{at('above_s')} | {x('above_s')} |")
    if bar:
        md += ["", f"The bar against the best closed form ({best_closed}, rec@10 {bar['rec@10']:.4f}, fit {bar['fit_s']:,.1f} s): "
               f">= it within 1.5x its fit time: **{'holds' if bar['reached_within_1.5x'] else 'fails'}**; above it with "
               f"its interval within 2x: **{'holds' if bar['above_within_2x'] else 'fails'}**."]
    loads = [s["train"][k] for s in state["segments"] for k in ("load_before", "load_after") if k in s["train"]]
    md += ["", f"Load average during training (1-min, at segment starts/ends): {min(loads, default=0):.1f}-{max(loads, default=0):.1f} "
           "on 2 cores (where other jobs ran beside it the wall seconds are pessimistic for the model; CPU s is its own). "
           + machine_line(result["machine"])]
    if any(curves.values()):
        png = ROOT / "benchmarks" / "results" / "scale" / f"{args.name}.png"
        plot(args.name, curves, rows, set(baselines) | {"oracle"}, png)
        md += ["", f"![rec@10 against wall clock]({png.name})"]
    write_results(ROOT / "benchmarks" / "results" / "scale", args.name, result, md)
    print("\n".join(md))


def hits10(ranks: np.ndarray) -> float:
    from superbloom.evaluation.metrics import hits_at

    return float(hits_at(ranks, 10).mean())


def reaching(points, baselines: dict, fit_s: dict, groups, paired) -> dict:
    """For each baseline: its rec@10 and fit seconds, the first evaluation's wall seconds at which the
    model's rec@10 >= its rec@10 (`reached_s`), and the first at which the paired interval of the
    model minus it lies above 0 (`above_s`); None where none did."""
    out = {}
    for name, ranks in baselines.items():
        if name not in fit_s:
            continue
        base = hits10(ranks)
        reached = next((w for w, r, _ in points if hits10(r) >= base), None)
        above = next((w for w, r, _ in points if paired(r, ranks, groups)["rec@10"]["lo"] > 0), None)
        out[name] = {"rec@10": base, "fit_s": fit_s[name], "reached_s": None if reached is None else round(reached, 1),
                     "above_s": None if above is None else round(above, 1)}
    return out


def bar_check(reach: dict, name: str) -> dict:
    """The bar against baseline `name`: the model >= it within 1.5x its fit seconds, above it with its
    interval within 2x."""
    r = reach[name]
    return dict(r, baseline=name, **{"reached_within_1.5x": r["reached_s"] is not None and r["reached_s"] <= 1.5 * r["fit_s"],
                                      "above_within_2x": r["above_s"] is not None and r["above_s"] <= 2 * r["fit_s"]})


def plot(name: str, curves: dict, rows: list[dict], points: set, png: Path, ax=None) -> None:
    """rec@10 against wall seconds (log): the model's curves, each baseline a square at its fit seconds."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, pts in curves.items():
        if pts:
            ax.plot(*zip(*[(max(x, 0.1), y) for x, y in pts]), marker="o", label=METHODS[key])
    for r in rows:
        if r["key"] in points:
            x = max(r.get("wall_s") or 1.0, 0.1)
            ax.scatter([x], [r["rec@10"]], marker="s" if r["key"] != "oracle" else "*", s=40, zorder=3)
            ax.annotate(r["method"].split(" (")[0], (x, r["rec@10"]), fontsize=7, xytext=(4, 2), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("wall seconds (fit / training, this CPU)")
    ax.set_ylabel("rec@10")
    ax.set_title(name, fontsize=9)
    ax.grid(alpha=0.3)
    if own:
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(png, dpi=110)
        plt.close(fig)


def summary(args) -> None:
    """Several reports (benchmarks/results/scale/NAME.json) as one table, the README's, and one figure."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..machine import write_results

    names = [n for n in args.summary.split(",") if n]
    results = {n: json.loads((ROOT / "benchmarks" / "results" / "scale" / f"{n}.json").read_text()) for n in names}
    md = [f"# Time to quality, every dataset: {args.name}", "",
          "Per dataset (the reports of benchmarks/scale/time_to_quality.py, each with its command): the anytime hybrid's "
          "first answer (budget 0: its term validated before any training step) and its last evaluation, its network "
          "alone and its term alone there, and the best closed form and the best baseline on the same examples, "
          "rec@10 [95%] and wall seconds.", "",
          "| data | hybrid at its first answer | hybrid at the last budget | network alone | term alone | best closed form | "
          "best baseline | hybrid - best baseline [95%] |", "|---|---|---|---|---|---|---|---|"]
    table = []
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    for (n, res), ax in zip(results.items(), axes[0]):
        model = [r for r in res["rows"] if r["key"] == "model"]
        at = lambda key, budget: next(r for r in res["rows"] if r["key"] == key and r["budget_s"] == budget)  # noqa: E731
        first, final = model[0], model[-1]
        base = [r for r in res["rows"] if r["key"] not in METHODS and r["key"] != "oracle"]
        best = max(base, key=lambda r: r["rec@10"], default=None)
        closed = res.get("best_closed_form")
        closed_row = next((r for r in base if r["key"] == closed), None)
        d = res["paired_final_hybrid_minus"].get(best["key"]) if best else None
        cell = lambda r: f"{r['rec@10']:.4f} [{r['rec@10_lo']:.3f}, {r['rec@10_hi']:.3f}], {r['wall_s']:,.0f} s"  # noqa: E731
        row = {"data": res.get("data_name") or Path(res["data"]).name, "first": first, "final": final,
               "network": at("network_only", final["budget_s"]), "term": at("term_only", final["budget_s"]),
               "closed": closed_row, "best": best, "diff": d}
        table.append(row)
        md.append(f"| {n.replace('tq_', '')} | {cell(first)} | {cell(final)} | {row['network']['rec@10']:.4f} | "
                  f"{row['term']['rec@10']:.4f} | " + (f"{closed} {cell(closed_row)} | " if closed_row else "- | ")
                  + (f"{best['method']} {cell(best)} | " if best else "- | ")
                  + (f"{d['rec@10']['diff']:+.4f} [{d['rec@10']['lo']:+.4f}, {d['rec@10']['hi']:+.4f}] |" if d else "- |"))
        curves = {k: [(r["wall_s"], r["rec@10"]) for r in res["rows"] if r["key"] == k] for k in METHODS}
        plot(n.replace("tq_", ""), curves, res["rows"], {r["key"] for r in base}, None, ax=ax)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    png = ROOT / "benchmarks" / "results" / "scale" / f"{args.name}.png"
    fig.savefig(png, dpi=100)
    plt.close(fig)
    md += ["", f"![rec@10 against wall clock, every dataset]({png.name})"]
    write_results(ROOT / "benchmarks" / "results" / "scale", args.name, {"reports": names, "rows": table}, md)
    print("\n".join(md))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("data", nargs="?", help="a prepared dataset directory, or a dataset name of benchmarks/datasets.py")
    ap.add_argument("--work", help="folder for the data, the baselines, the model, the evaluations and state.json")
    ap.add_argument("--budgets", default="900,1800,3600",
                    help="cumulative training seconds, comma-separated (0: the first answer, right after step 0)")
    ap.add_argument("--train-args", default="", help="extra `superbloom train` flags for the first segment")
    ap.add_argument("--baselines", default="", help="run benchmarks.scale.baselines for these first (comma-separated)")
    ap.add_argument("--baselines-args", default="", help="more benchmarks.scale.baselines flags, e.g. "
                    "'--sansa l2=20,density=2e-5'")
    ap.add_argument("--eval-sets", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--targets-per-set", type=int, default=1, help="held-out ids per set, each its own example "
                    "(the baselines' and every evaluation's)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--report", action="store_true", help="write results/scale/NAME.{json,md,png} from the state")
    ap.add_argument("--summary", help="comma-separated report names: one table and one figure (results/scale/NAME.*)")
    ap.add_argument("--name", default="time_to_quality")
    ap.add_argument("--baselines-json", help="benchmarks.scale.baselines' results JSON (fit s, query, RSS); comma-separated "
                    "for several (default WORK/baselines.json)")
    ap.add_argument("--baselines-ranks", help="its --ranks-dir (default WORK/baselines)")
    ap.add_argument("--oracle", help="e2e.py's ranks-oracle.npz (synthetic data: the planted-topic oracle)")
    ap.add_argument("--note", default="", help="a paragraph for the report")
    ap.add_argument("--eval-worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.summary:
        return summary(args)
    if not args.data or not args.work:
        ap.error("DATA and --work are needed (or --summary)")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.eval_worker:
        return eval_worker(args)
    data = resolve_data(args, work)
    if args.baselines:
        run_baselines(args, work, data)
    if args.budgets and not (args.report and not args.baselines and load_state(work)["segments"]):
        train_and_eval(args, work, data)
    if args.report:
        report(args, work)


if __name__ == "__main__":
    main()
