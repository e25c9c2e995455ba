"""Benchmark: the whole pipeline at the paper's vocabulary size on this CPU machine (issue 14), on
SYNTHETIC data: synth -> prepare (out of core) -> train (superbloom, full softmax, sampled softmax;
equal steps) -> eval (exact decoding) -> serve (1 and 2 workers, memory-mapped weights).

    /work/tools/benchlock .venv/bin/python -m benchmarks.scale.e2e --stages synth,prepare
    /work/tools/benchlock .venv/bin/python -m benchmarks.scale.e2e --stages train,eval
    /work/tools/benchlock .venv/bin/python -m benchmarks.scale.e2e --stages serve
    .venv/bin/python -m benchmarks.scale.e2e --report            # results/scale/e2e.{json,md} from the state

Heads can train side by side, one torch thread each in the two benchmark slots, in one work directory
(the state file is updated under a lock, one key at a time):

    /work/tools/benchlock -1 .venv/bin/python -m benchmarks.scale.e2e --stages train,eval --only superbloom --threads 1 ...
    /work/tools/benchlock -1 .venv/bin/python -m benchmarks.scale.e2e --stages train,eval --only sampled --threads 1 ...

Every invocation ends by writing results/scale/NAME.{json,md} from the state: pass --name for a new run.

Every stage is a child process (the CLI where one exists) measured by GNU time: wall seconds and
peak RSS (max resident set of the child). Stages can be run in separate invocations (each one short
enough for the lock); what was measured is kept in WORK/state.json and a stage already done is not
re-run unless --force. The serve stage measures the server's process tree itself: RSS and PSS
(/proc/PID/smaps_rollup: a page shared by k processes counts 1/k in each) of every process, summed,
after loading and after the load, and the closed-loop load of benchmarks/load.py at each concurrency.

Table 2 at this size: the three heads with the same steps (or, with --time-budget, the same training
seconds: the paper's question), batch and recipe; parameter counts
matched the way benchmarks/paper/t2_heads.py matches them (full softmax: the width whose count is
closest to superbloom's; sampled softmax: 4x that width, 2.5% of the ids drawn per step). Every
method ranks the very same held-out examples; brackets are 95% bootstrap intervals over held-out
sets, and paired differences are bootstrapped on the same examples.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.scale.e2e_report import RESULTS, report


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def measure(cmd: list[str], out: Path | None = None) -> dict:
    """Run `cmd` under GNU time -> {seconds, peak_rss_mb, load_before, load_after, stdout (json if any)}."""
    tfile = Path(f"/tmp/e2e-time-{os.getpid()}")
    load_before = os.getloadavg()
    log("$ " + " ".join(a if len(a) < 80 else a.strip().splitlines()[0] + " ..." for a in cmd))
    proc = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", str(tfile), *cmd], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    wall, kb = tfile.read_text().split()[-2:]
    tfile.unlink()
    rec = {"seconds": round(float(wall), 1), "peak_rss_mb": round(int(kb) / 1024),
           "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()]}
    text = proc.stdout.strip()
    if text.startswith("{") or text.startswith("["):
        rec["output"] = json.loads(text)
    log(f"  {rec['seconds']} s, peak RSS {rec['peak_rss_mb']} MB")
    return rec


class State:
    def __init__(self, work: Path):
        self.path = work / "state.json"
        self.data = json.loads(self.path.read_text()) if self.path.exists() else {}

    def __contains__(self, k):
        return k in self.data

    def __getitem__(self, k):
        return self.data[k]

    def __setitem__(self, k, v):
        """Re-read, update one key and write under a lock, so that two invocations in one work directory
        (e.g. `--only superbloom` and `--only sampled` on one thread each) keep each other's stages."""
        import fcntl

        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.path.exists():
                self.data = json.loads(self.path.read_text())
            self.data[k] = v
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.data, indent=1, default=str))
            tmp.replace(self.path)


# ------------------------------------------------------------------------------------ stages


def heads(args, work: Path) -> dict:
    """{name: (train flags, parameters)}: superbloom alpha=50 m=2, and the two softmax heads matched
    to its parameter count as in benchmarks/paper/t2_heads.py."""
    import superbloom as sb
    from superbloom.model.sizing import count_params, matched_width, model_config

    data = sb.Dataset(work / "data")
    layers = args.layers
    sbm = model_config(args.d, layers)
    target = count_params(data.n_ids, data.counts, sb.HashConfig(50, 2), sbm, sb.SuperbloomConfig())
    full, full_p = matched_width(data.n_ids, data.counts, target, sb.HashConfig(1, 1), layers, sb.FullConfig(), widths=(2, 4, 8, 16, 32))
    samples = max(1, round(0.025 * data.n_ids))
    wide = model_config(4 * full.d, layers, heads=4 if (4 * full.d) % 4 == 0 else 2)
    wide_p = count_params(data.n_ids, data.counts, sb.HashConfig(1, 1), wide, sb.SampledConfig(samples=samples))

    def flags(m, extra):
        return ["--d", str(m.d), "--heads", str(m.heads), "--d-ff", str(m.d_ff), "--layers", str(m.layers), *extra]

    return {
        "superbloom": (flags(sbm, ["--alpha", "50", "--m", "2", "--head", "superbloom",
                                   *(["--coherent", str(args.coherent)] if args.coherent else [])]), target),
        "full softmax": (flags(full, ["--alpha", "1", "--m", "1", "--head", "full"]), full_p),
        "sampled softmax": (flags(wide, ["--alpha", "1", "--m", "1", "--head", "sampled", "--samples", str(samples)]),
                            wide_p),
    }


def stage_train(args, work: Path, state: State) -> None:
    for name, (flags, params) in heads(args, work).items():
        key = f"train/{name}"
        if (key in state and not args.force) or (args.only and name.split()[0] not in args.only.split(",")):
            continue
        out = work / "models" / name.split()[0]
        cmd = [sys.executable, "-m", "superbloom", "train", "--preset", "none", str(work / "data"), "--out", str(out),
               "--overwrite",  # --preset none: the flags below are the whole recipe, as measured
               *flags, *(["--time-budget", str(args.time_budget)] if args.time_budget else ["--steps", str(args.steps)]),
               "--batch-size", str(args.batch_size), "--warmup", str(args.warmup), "--lr", str(args.lr),
               "--segment", str(args.segment), "--eval-every", "0", "--val-fraction", "0", "--threads", str(args.threads),
               "--checkpoint-every", "1e9", "--init", args.init, "--quiet"]
        rec = measure(cmd)
        st = json.loads(next((out / "checkpoints").glob("step-*")).joinpath("state.json").read_text())
        cfg = json.loads((out / "config.json").read_text())
        rec.update(parameters=cfg.get("parameters", params), flags=flags, steps=st["step"], examples=st["examples"],
                   train_seconds=round(st["seconds"], 1),
                   examples_per_s=round(st["examples"] / max(st["seconds"], 1e-9), 1),
                   hash_build_seconds=cfg.get("hash_build_seconds"), time_budget=args.time_budget,
                   init=cfg.get("init", {"init": "normal"}),
                   loss_curve=[{k: r[k] for k in ("step", "loss", "seconds")} for r in map(
                       json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "loss" in r]
                   if (out / "metrics.jsonl").exists() else [])
        state[key] = rec


EVAL_CHILD = """
import json, sys, time, numpy as np, torch
import superbloom as sb
from superbloom.evaluation.evaluate import EvalConfig, evaluate
model, data, out, max_sets, exact, baselines, threads = sys.argv[1:8]
torch.set_num_threads(int(threads))
t0 = time.time()
p = sb.load(model)
load_s = time.time() - t0
cfg = EvalConfig(seed=0, max_sets=int(max_sets), decode=sb.DecodeConfig(exact=exact == "1"),
                 baselines=tuple(b for b in baselines.split(",") if b), depth=20)
res = evaluate(p, sb.Dataset(data), cfg, progress=False)
np.savez(out, set_rows=res.groups, targets=res.targets, **res.ranks)
r = res.to_dict()
r["load_seconds"] = round(load_s, 2)
print(json.dumps(r))
"""


def stage_eval(args, work: Path, state: State) -> None:
    for i, name in enumerate(("superbloom", "full softmax", "sampled softmax")):
        key = f"eval/{name}"
        if (key in state and not args.force) or (args.only and name.split()[0] not in args.only.split(",")):
            continue
        model = work / "models" / name.split()[0]
        base = "popularity" if i == 0 else ""
        rec = measure([sys.executable, "-c", EVAL_CHILD, str(model), str(work / "data"),
                       str(work / f"ranks-{name.split()[0]}.npz"), str(args.eval_sets), "1" if args.exact else "0",
                       base, str(args.threads)])
        state[key] = rec


def stage_oracle(args, work: Path, state: State) -> None:
    """The planted-topic oracle (superbloom.data.synth.TopicOracle: it knows the generator's topics and
    weights) ranks the eval stage's examples: what a model that had learned the planted structure
    could reach on this data. In process (no model; O(ids) tables)."""
    if "oracle" in state and not args.force:
        return
    import superbloom as sb
    from superbloom.evaluation.evaluate import EvalConfig, SetHoldout
    from superbloom.evaluation.metrics import target_ranks
    from superbloom.data.synth import SynthConfig, TopicOracle, read_provenance

    t0, load0 = time.time(), os.getloadavg()
    made = read_provenance(work / "links.parquet")
    if "arguments" not in made:
        raise SystemExit(f"oracle: {work / 'links.parquet'} was not written by `superbloom synth` (no generator record)")
    cfg = SynthConfig(out=str(work / "links.parquet"), **made["arguments"])
    data = sb.Dataset(work / "data")
    e = EvalConfig(seed=0, max_sets=args.eval_sets, depth=20)  # the eval stage's examples (EVAL_CHILD)
    ex = SetHoldout(e.n, e.targets_per_set, e.seed, e.max_sets).examples(data)
    synth_id = np.array(data.vocab.strings, dtype=np.int64)  # the generator's id of each dataset id
    dataset_id = np.full(cfg.ids, -1, np.int64)
    dataset_id[synth_id] = np.arange(len(synth_id))
    contexts = np.where(ex.contexts >= 0, synth_id[np.maximum(ex.contexts, 0)], -1)
    top = TopicOracle(cfg).rank(contexts, e.depth)
    ranked = np.where(top >= 0, dataset_id[np.maximum(top, 0)], -1)
    ranks = target_ranks(ranked, ex.targets)
    np.savez(work / "ranks-oracle.npz", set_rows=ex.set_rows, targets=ex.targets, model=ranks)
    state["oracle"] = {"seconds": round(time.time() - t0, 1), "examples": int(len(ranks)),
                       "load_before": [round(x, 2) for x in load0], "load_after": [round(x, 2) for x in os.getloadavg()],
                       "synth": cfg.arguments()}


def stage_synth(args, work: Path, state: State) -> None:
    if "synth" in state and not args.force:
        return
    state["synth"] = measure([sys.executable, "-m", "superbloom", "synth", "--ids", str(args.ids), "--links",
                              str(args.links), "--zipf", str(args.zipf), "--out", str(work / "links.parquet"),
                              "--quiet", "--json"])


def stage_prepare(args, work: Path, state: State) -> None:
    if "prepare" in state and not args.force:
        return
    state["prepare"] = measure([sys.executable, "-m", "superbloom", "prepare", str(work / "links.parquet"), "--format",
                                "parquet", "--out", str(work / "data"), "--memory-limit", args.memory_limit, "--json"]
                                + (["--overwrite"] if args.force else []))  # --force: replace the earlier dataset


def tree_memory(pid: int) -> dict:
    """RSS and PSS (MB) of a process and its descendants, summed, and per process."""
    pids, frontier = [pid], [pid]
    while frontier:
        p = frontier.pop()
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            kids = []
        pids += [int(k) for k in kids]
        frontier += [int(k) for k in kids]
    per = {}
    for p in pids:
        try:
            rows = dict(line.split(":", 1) for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines()[1:])
            per[p] = {"rss_mb": round(int(rows["Rss"].split()[0]) / 1024), "pss_mb": round(int(rows["Pss"].split()[0]) / 1024)}
        except OSError:
            pass
    return {"rss_mb": sum(v["rss_mb"] for v in per.values()), "pss_mb": sum(v["pss_mb"] for v in per.values()),
            "processes": per}


def stage_serve(args, work: Path, state: State) -> None:
    import asyncio

    import httpx

    from benchmarks.load import contexts, free_port, run_level

    model = work / "models" / "superbloom"
    ctxs = contexts(work / "data", model, 2000)
    for workers in (int(w) for w in args.workers.split(",")):
        key = f"serve/{workers}"
        if key in state and not args.force:
            continue
        port = free_port()
        logf = work / f"serve-{workers}.log"
        t0 = time.time()
        proc = subprocess.Popen([sys.executable, "-m", "superbloom", "serve", str(model), "--port", str(port),
                                 "--no-access-log", "--workers", str(workers)], stdout=logf.open("w"),
                                stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            up = 0
            while up < workers:  # until every worker has loaded its model and is warm (/metrics: one view of all)
                try:
                    httpx.post(url + "/v1/predict", json={"context": ctxs[0], "k": 10}, timeout=60)
                    text = httpx.get(url + "/metrics", timeout=60).text
                    value = lambda name: float(re.search(rf"^{name} (\S+)$", text, re.M)[1])  # noqa: E731
                    up = int(value("superbloom_workers")) if value("superbloom_ready") == 1 else 0
                except httpx.HTTPError:
                    if proc.poll() is not None:
                        sys.exit(f"server exited: {logf.read_text()[-3000:]}")
                    time.sleep(0.5)
                if time.time() - t0 > 600:
                    sys.exit("server did not start in 600 s")
            rec = {"workers": workers, "ready_seconds": round(time.time() - t0, 1), "memory_loaded": tree_memory(proc.pid),
                   "levels": []}
            log(f"serve {workers} worker(s) ready in {rec['ready_seconds']} s: {rec['memory_loaded']['rss_mb']} MB RSS, "
                f"{rec['memory_loaded']['pss_mb']} MB PSS")
            for exact in (False, True):
                for c in (int(x) for x in args.concurrency.split(",")):
                    lvl = asyncio.run(run_level(url, ctxs, c, args.duration, 10, exact=exact))
                    lvl["exact"] = exact
                    if workers > 1:
                        lvl["mean_batch"] = None  # /health counts one worker's batches only
                    rec["levels"].append(lvl)
                    log(f"  exact={exact} c={c}: {lvl['requests_per_s']} req/s p50 {lvl['p50_ms']} ms "
                        f"p99 {lvl['p99_ms']} ms errors {lvl['errors']}")
            rec["memory_after_load"] = tree_memory(proc.pid)
            state[key] = rec
        finally:
            proc.terminate()
            proc.wait(timeout=60)


def same_run_settings(ap: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """A later invocation of the same run (the same --name and --work: e.g. --stages oracle, or
    --report) keeps the settings recorded in results/scale/NAME.json, so that its stages and the
    rewritten report describe that run; what this command line sets to a non-default value wins."""
    saved = RESULTS / f"{args.name}.json"
    if not saved.exists():
        return args
    kept = json.loads(saved.read_text()).get("settings", {})
    if str(Path(kept.get("work", ""))) != str(Path(args.work)):
        return args  # another run under the same name: this command line's settings
    given = {k: v for k, v in vars(args).items() if v != ap.get_default(k)}
    control = {"stages", "report", "force", "only", "name", "work"}  # what this invocation does, not the run
    run = {k: v for k, v in kept.items() if k in vars(args) and k not in control}
    return argparse.Namespace(**{**vars(args), **run, **given})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/superbloom-e2e")
    ap.add_argument("--stages", default="synth,prepare,train,eval,oracle,serve")
    ap.add_argument("--ids", type=lambda x: int(float(x)), default=5_300_000)
    ap.add_argument("--links", type=lambda x: int(float(x)), default=100_000_000)
    ap.add_argument("--zipf", type=float, default=1.1, help="synth popularity exponent (lower: more of the ids drawn)")
    ap.add_argument("--memory-limit", default="4GB")
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--time-budget", type=float, default=0.0, help="> 0: train each head for this many seconds "
                    "(equal wall clock, the paper's Table 2 question) instead of --steps")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--coherent", type=int, default=0, help="coherent hash maps of the superbloom model (appendix C; "
                    "from 500K ids on built by the bisection tree): 0 (random, the paper's default), 1 or 2")
    ap.add_argument("--init", default="auto", choices=("auto", "normal", "cooccurrence"),
                    help="the models' token embedding start (superbloom train --init; auto: normal at this size)")
    ap.add_argument("--only", default="", help="train and evaluate only these heads (superbloom,full,sampled; default all)")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--segment", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-sets", type=int, default=1000)
    ap.add_argument("--exact", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--force", action="store_true", help="re-run stages already in the state")
    ap.add_argument("--report", action="store_true", help="only write the results from the state")
    ap.add_argument("--note", default="")
    ap.add_argument("--name", default="e2e", help="results file name under benchmarks/results/scale/")
    args = ap.parse_args()
    args = same_run_settings(ap, args)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    state = State(work)
    if not args.report:
        for name in args.stages.split(","):
            {"synth": stage_synth, "prepare": stage_prepare, "train": stage_train, "eval": stage_eval,
             "oracle": stage_oracle, "serve": stage_serve}[name](args, work, state)
    report(args, work, state)


if __name__ == "__main__":
    main()
