"""What the hash maps cost each serving process at the paper's scale: copied, or mapped and shared.

    /work/tools/benchlock -1 .venv/bin/python -m benchmarks.scale.hash_memory --ids 5139571 --alpha 50 --m 2

Builds the Bloom hash maps of --ids ids (seeded random maps, as `train` does for a model of that
size; the same maps as the 5.1M-id e2e model: alpha 50, m 2) and saves them as hashing.safetensors.
Then --workers child processes at once hold what a server process holds of them, in two ways:

  copied  (before): BloomHash.load reads the file into memory (int32 arrays) and the superbloom head
          keeps int64 copies of both tables as its decoding buffers;
  mapped  (now):    BloomHash.load(mmap=True) views a copy-on-write map of the file, and the head's
          buffers are int32 views of those arrays (Predictor.load on the CPU).

Each child builds exactly those objects (hashing.BloomHash, hashing.tables), touches every page,
and reports its RSS and PSS (/proc/self/smaps_rollup) growth while all children are alive; the
summed PSS is the machine's real cost. Results: benchmarks/results/scale/hash_memory.{json,md}.
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

from ..machine import machine_info, write_results

CHILD = r"""
import sys, time, torch
from superbloom.hashing import BloomHash
def mem():
    f = dict(l.split(":", 1) for l in open("/proc/self/smaps_rollup").read().splitlines()[1:])
    return int(f["Rss"].split()[0]) // 1024, int(f["Pss"].split()[0]) // 1024
path, mode = sys.argv[1], sys.argv[2]
before = mem()
h = BloomHash.load(path, mmap=mode == "mapped")
tables = h.tables(dtype=torch.int32 if mode == "mapped" else torch.long)
touched = int(sum(int(t.sum()) for t in tables)) + int(h.buckets.sum()) + int(h.inverse.sum())  # every page read
print("ready", flush=True)
sys.stdin.readline()  # every sibling has its pages now: measure
after = mem()
print(f"{after[0] - before[0]} {after[1] - before[1]}", flush=True)
"""


def measure(path: Path, mode: str, workers: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(path), mode], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env) for _ in range(workers)]
    for p in procs:
        if p.stdout.readline().strip() != "ready":
            raise SystemExit(f"{mode}: a child failed")
    time.sleep(0.5)
    out = []
    for p in procs:
        p.stdin.write("\n")
        p.stdin.flush()
        rss, pss = map(int, p.stdout.readline().split())
        out.append({"rss_mb": rss, "pss_mb": pss})
        p.wait()
    return {"mode": mode, "workers": workers, "per_process": out,
            "rss_mb_sum": sum(x["rss_mb"] for x in out), "pss_mb_sum": sum(x["pss_mb"] for x in out)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ids", type=int, default=5_139_571, help="ids (default: the 5.1M-id e2e model's)")
    p.add_argument("--alpha", type=int, default=50)
    p.add_argument("--m", type=int, default=2)
    p.add_argument("--workers", default="1,2,4", help="process counts to measure")
    p.add_argument("--name", default="hash_memory")
    args = p.parse_args()
    from superbloom.hashing.bloom import BloomHash, HashConfig

    t0 = time.time()
    h = BloomHash.build(args.ids, HashConfig(alpha=args.alpha, m=args.m, seed=0))
    build_s = time.time() - t0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hashing.safetensors"
        h.save(path)
        size_mb = path.stat().st_size / 2**20
        del h
        for n in map(int, args.workers.split(",")):
            for mode in ("copied", "mapped"):
                rows.append(measure(path, mode, n))
                print(json.dumps({k: rows[-1][k] for k in ("mode", "workers", "rss_mb_sum", "pss_mb_sum")}),
                      flush=True)
    md = [f"# Hash maps per serving process: copied vs mapped ({args.ids:,} ids, alpha {args.alpha}, m {args.m})", "",
          f"hashing.safetensors: {size_mb:.0f} MB (buckets (m, N) and inverse (m, n_buckets, alpha), int32); "
          f"built in {build_s:.1f} s. Each child holds what a server process holds of the maps (the BloomHash "
          "and the superbloom head's decoding tables), every page touched; memory growth measured while every "
          "child is alive. copied = before this change (file read into memory, int64 table copies); mapped = "
          "now (a shared copy-on-write map of the file, int32 views). Produced by "
          "`python -m benchmarks.scale.hash_memory`.", "",
          "| processes | copied: RSS sum | copied: PSS sum | mapped: RSS sum | mapped: PSS sum |", "|---|---|---|---|---|"]
    by = {(r["mode"], r["workers"]): r for r in rows}
    for n in map(int, args.workers.split(",")):
        c, m = by["copied", n], by["mapped", n]
        md.append(f"| {n} | {c['rss_mb_sum']:,} MB | {c['pss_mb_sum']:,} MB | {m['rss_mb_sum']:,} MB | {m['pss_mb_sum']:,} MB |")
    ns = sorted(map(int, args.workers.split(",")))
    if len(ns) > 1:
        extra = {mode: (by[mode, ns[-1]]["pss_mb_sum"] - by[mode, ns[0]]["pss_mb_sum"]) / (ns[-1] - ns[0])
                 for mode in ("copied", "mapped")}
        md += ["", f"Each process beyond the first adds {extra['copied']:.0f} MB PSS copied, {extra['mapped']:.0f} MB "
               "mapped (the part that is not the shared file: page tables, the process' own small objects)."]
    md += ["", f"Load average {[round(x, 2) for x in os.getloadavg()]} (memory figures do not depend on it)."]
    md.append("")
    write_results(Path("benchmarks/results/scale"), args.name,
                  {"ids": args.ids, "alpha": args.alpha, "m": args.m, "file_mb": round(size_mb, 1),
                   "build_seconds": round(build_s, 1), "rows": rows, "load_average": os.getloadavg(),
                   "machine": machine_info()}, md)


if __name__ == "__main__":
    main()
