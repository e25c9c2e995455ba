"""What a short `train` of the hybrid costs at a large vocabulary, for two code trees in turn.

    superbloom prepare epinions_ratings.tsv.gz --out data/eps --order-column time --split leave-one-out
    git worktree add /tmp/before <commit>
    .venv/bin/python -m benchmarks.large_vocab_validation data/eps --tree before=/tmp/before --tree after=.

Runs `superbloom train DATA --out TMP --time-budget B --eval-every E` (the preset the data picks) once
per tree, one after the other (never side by side), each tree's package first on PYTHONPATH, and
records (GNU time) the wall time, the CPU time (user, system), the peak RSS of the process, the steps trained and
the validation line it printed. The training itself is capped by the budget, so what differs between
trees is what surrounds it: building the item-item term and ranking the validation sets.
Results: benchmarks/results/NAME.{json,md}, with the machine and the load average before each run.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .machine import machine_info, write_results

ROOT = Path(__file__).resolve().parents[1]
TIME = shutil.which("time") or "/usr/bin/time"  # GNU time: the child's own wall, CPU and peak RSS


def run_tree(name: str, tree: Path, data: str, budget: float, eval_every: int) -> dict:
    """One `train` of `data` with the package of `tree` -> its costs and what it printed."""
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
    data = str(Path(data).resolve())
    check = subprocess.run([sys.executable, "-c", "import superbloom; print(superbloom.__file__)"], env=env,
                           capture_output=True, text=True, check=True, cwd="/").stdout.strip()
    if not check.startswith(str(tree.resolve())):
        raise SystemExit(f"{name}: superbloom is imported from {check}, not from {tree}")
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [TIME, "-f", "COSTS %e %U %S %M", sys.executable, "-m", "superbloom", "train", data,
               "--out", f"{tmp}/model", "--time-budget", str(budget), "--eval-every", str(eval_every)]
        # cwd: `python -m` puts the working directory first on sys.path, before PYTHONPATH
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, cwd=tmp)
    if done.returncode:
        raise SystemExit(f"{name}: train exited {done.returncode}:\n{done.stderr[-2000:]}")
    err = done.stderr.replace("\r", "\n")
    wall, user, system, rss_kb = map(float, re.findall(r"^COSTS (\S+) (\S+) (\S+) (\S+)$", err, re.M)[-1])
    trained = re.search(r"trained (\d+) steps .*?validation (.*)", err)
    commit = subprocess.run(["git", "-C", str(tree), "describe", "--always", "--dirty"], capture_output=True,
                            text=True, check=False).stdout.strip() or None
    return {"tree": name, "path": str(tree), "commit": commit, "load_1min_before": round(load, 2), "wall_s": wall, "user_s": user,
            "system_s": system, "peak_rss_gb": round(rss_kb / 2**20, 2),
            "steps": int(trained.group(1)) if trained else None,
            "validation": trained.group(2).strip() if trained else None}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("data", help="a prepared dataset with a large vocabulary")
    p.add_argument("--tree", action="append", required=True, metavar="NAME=PATH",
                   help="a code tree (a checkout or worktree) to run; repeat, run in the order given")
    p.add_argument("--time-budget", type=float, default=30.0)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--name", default="large_vocab_validation")
    args = p.parse_args(argv)
    trees = [(t.split("=", 1)[0], Path(t.split("=", 1)[1])) for t in args.tree]
    rows = [run_tree(n, t, args.data, args.time_budget, args.eval_every) for n, t in trees]
    for r in rows:
        print(r, flush=True)
    result = {"machine": machine_info(), "data": args.data, "time_budget": args.time_budget,
              "eval_every": args.eval_every, "runs": rows}
    md = [f"# `train --time-budget {args.time_budget:g}` at a large vocabulary: {args.data}", "",
          "| tree | commit | wall s | user s | system s | peak RSS GB | steps | validation | load before |",
          "|---|---|---|---|---|---|---|---|---|"]
    md += [f"| {r['tree']} | {r['commit']} | {r['wall_s']} | {r['user_s']} | {r['system_s']} | {r['peak_rss_gb']} | {r['steps']} "
           f"| {r['validation']} | {r['load_1min_before']} |" for r in rows]
    md += ["", "Each row is one process (GNU time); the runs went one after the other, nothing else of ours beside "
           "them.", ""]
    write_results(ROOT / "benchmarks" / "results", args.name, result, md)


if __name__ == "__main__":
    main()
