"""Benchmark: `superbloom synth` (SYNTHETIC links with planted topics) -- speed and peak memory.

    /work/tools/benchlock .venv/bin/python -m benchmarks.scale.synth_bench                 # 20M and 100M links, 5.3M ids
    .venv/bin/python -m benchmarks.scale.synth_bench --links 2e6,4e6 --ids 1e5             # a quick smoke run

Each run is a child process writing `--links` links over `--ids` ids (paper defaults for the rest:
1000 topics, 1..3 per set, mean set size 87, zipf 1.1) to a Parquet file in --workdir (deleted
afterwards, never in the repo). The child reports its own peak RSS twice: after building the
per-id tables alone (the O(ids) part) and at the end (tables + one chunk in flight + the Parquet
writer), so that runs of different lengths show whether memory grows with the links.
Results: benchmarks/results/scale/synth.{json,md}, with the machine and its load average.
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

CHILD = """
import json, resource, sys
from superbloom.data.synth import SynthConfig, build_tables, synth
cfg = SynthConfig(out=sys.argv[1], ids=int(sys.argv[2]), links=int(sys.argv[3]))
import_mb = int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024
tables = build_tables(cfg)
tables_mb = int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024
del tables
summary = synth(cfg, progress=False)
print(json.dumps({"summary": summary, "import_peak_mb": import_mb, "tables_peak_mb": tables_mb,
                  "peak_mb": int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024}))
"""


def run(work: Path, ids: int, links: int) -> dict:
    out = work / f"synth-{links}-{ids}.parquet"
    load_before = os.getloadavg()
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(out), str(ids), str(links)], capture_output=True,
                          text=True)
    wall = time.time() - t0
    if proc.returncode:
        sys.exit(f"synth failed:\n{proc.stderr}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    size = out.stat().st_size
    out.unlink()
    s = r["summary"]
    return {"ids": ids, "links": links, "sets": s["sets"], "ids_drawn": s["ids_drawn"],
            "generate_seconds": s["seconds"], "links_per_second": s["links_per_s"], "child_wall_seconds": round(wall, 1),
            "import_peak_rss_mb": round(r["import_peak_mb"]), "tables_peak_rss_mb": round(r["tables_peak_mb"]),
            "peak_rss_mb": round(r["peak_mb"]),
            "parquet_bytes": size, "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--links", default="20e6,100e6", help="comma-separated link counts, one child each")
    ap.add_argument("--ids", type=float, default=5.3e6)
    ap.add_argument("--note", default="", help="a sentence written into the results (e.g. how the run was scheduled)")
    ap.add_argument("--workdir", default="/tmp/superbloom-bench")
    ap.add_argument("--results", default=str(Path(__file__).parents[1] / "results" / "scale"))
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for links in (int(float(x)) for x in args.links.split(",")):
        rows.append(run(work, int(args.ids), links))
        print(json.dumps(rows[-1]), flush=True)
    result = {"benchmark": "synth", "synthetic": True, "rows": rows, "note": args.note, "machine": machine_info(),
              "settings": "topics 1000, topics per set 1..3, mean set size 87, zipf 1.1, seed 0 (SynthConfig defaults)"}
    md = ["# synth benchmark (SYNTHETIC data generator)", "",
          "`superbloom synth` writing Parquet, each run in its own process; peak RSS is the child's own "
          "(`import`: after importing the package, torch included; `tables`: after building the per-id tables "
          "only). Load average (1 min) before / after each run.", "",
          "| ids | links | sets | ids drawn | seconds | links/s | peak RSS import / tables / total | Parquet | load |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['ids']:,} | {r['links']:,} | {r['sets']:,} | {r['ids_drawn']:,} | {r['generate_seconds']:.0f} | "
                  f"{r['links_per_second']:,} | {r['import_peak_rss_mb']:,} / {r['tables_peak_rss_mb']:,} / {r['peak_rss_mb']:,} MB | "
                  f"{r['parquet_bytes'] / 1e6:,.0f} MB | {r['load_before'][0]} / {r['load_after'][0]} |")
    md += ["", args.note, ""] if args.note else [""]
    write_results(Path(args.results), "synth", result, md)
    print("\n".join(md))


if __name__ == "__main__":
    main()
