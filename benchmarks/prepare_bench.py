"""Benchmark: `superbloom prepare` on a synthetic input at the paper's vocabulary scale.

    python -m benchmarks.prepare_bench                  # 5.3M distinct ids, 100M links (~1.9 GB of text)
    python -m benchmarks.prepare_bench --links 2e6 --ids 1e5 --sets 1e5   # a quick smoke run

Writes an edge list (`set<TAB>id`) with 5.3M sets of ~19 links (the paper's Wikipedia has 5.3M
pages, 462M links) where every one of the `--ids` ids appears and the rest follow a Zipf-like
long tail, then runs `superbloom prepare` on it in a child process and records wall time and peak
resident memory (the child's max RSS). Results: benchmarks/results/prepare.{json,md}.
The generated input lives in --workdir (default /tmp/superbloom-bench), never in the repo.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.machine import machine_info, write_results

WIDTH = 8  # digits per key


def fixed_width(prefix: bytes, values: np.ndarray) -> np.ndarray:
    """(n,) ints -> (n, 1 + WIDTH) bytes 'p0001234' without a Python loop."""
    out = np.empty((len(values), 1 + WIDTH), np.uint8)
    out[:, 0] = prefix[0]
    v = values.astype(np.int64)
    for k in range(WIDTH - 1, -1, -1):
        out[:, 1 + k] = 48 + v % 10
        v //= 10
    return out


def write_input(path: Path, n_links: int, n_ids: int, n_sets: int, seed: int = 0, chunk: int = 5_000_000) -> None:
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, n_ids + 1, dtype=np.float64)
    p = ranks ** -0.9  # long tail: a few very popular ids, most rare
    cdf = np.cumsum(p / p.sum())
    ids_order = rng.permutation(n_ids)  # popularity rank -> id
    per_set = n_links / n_sets
    with open(path, "wb") as f:
        for start in range(0, n_links, chunk):
            n = min(chunk, n_links - start)
            pos = np.arange(start, start + n)
            sets = (pos / per_set).astype(np.int64)  # links grouped by set, in order
            ids = np.where(pos < n_ids, pos % n_ids,  # every id appears once first ...
                           ids_order[np.minimum(np.searchsorted(cdf, rng.random(n)), n_ids - 1)])
            line = np.empty((n, 2 * (1 + WIDTH) + 2), np.uint8)
            line[:, :1 + WIDTH] = fixed_width(b"s", sets)
            line[:, 1 + WIDTH] = 9  # tab
            line[:, 2 + WIDTH:-1] = fixed_width(b"e", ids)
            line[:, -1] = 10  # newline
            f.write(line.tobytes())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--links", type=float, default=100e6)
    ap.add_argument("--ids", type=float, default=5.3e6)
    ap.add_argument("--sets", type=float, default=5.3e6)
    ap.add_argument("--workdir", default="/tmp/superbloom-bench")
    ap.add_argument("--results", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args()
    n_links, n_ids, n_sets = int(args.links), int(args.ids), int(args.sets)
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    inp = work / f"links-{n_links}-{n_ids}.tsv"
    if not inp.exists():
        t0 = time.time()
        write_input(inp.with_suffix(".tmp"), n_links, n_ids, n_sets)
        inp.with_suffix(".tmp").rename(inp)
        print(f"wrote {inp} ({inp.stat().st_size / 1e9:.2f} GB) in {time.time() - t0:.0f} s")
    out = work / "prepared"
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "superbloom", "prepare", str(inp), "--out", str(out), "--overwrite", "--json"],
                          capture_output=True, text=True)
    wall = time.time() - t0
    if proc.returncode:
        sys.exit(f"prepare failed:\n{proc.stderr}")
    peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6  # KiB on Linux -> GB
    summary = json.loads(proc.stdout)
    result = {
        "benchmark": "prepare", "input_links": n_links, "input_distinct_ids": n_ids, "input_sets": n_sets,
        "input_bytes": inp.stat().st_size, "wall_seconds": round(wall, 1), "peak_rss_gb": round(peak_gb, 2),
        "links_per_second": round(n_links / wall), "summary": {k: summary[k] for k in
                                                              ("sets", "ids", "links", "train", "test",
                                                               "test_links_unseen_in_train", "duplicates_removed")},
        "machine": machine_info(),
    }
    md = ["# prepare benchmark", "",
          f"Synthetic edge list: {n_links:,} links, {n_ids:,} distinct ids, {n_sets:,} sets "
          f"({inp.stat().st_size / 1e9:.2f} GB of text).", "",
          "| wall time | peak RSS | links/s | vocabulary (train) | duplicates removed |", "|---|---|---|---|---|",
          f"| {wall:.0f} s | {peak_gb:.2f} GB | {n_links / wall:,.0f} | {summary['ids']:,} | "
          f"{summary['duplicates_removed']:,} |", ""]
    write_results(Path(args.results), "prepare", result, md)
    print("\n".join(md))


if __name__ == "__main__":
    main()
