"""What the queries-per-chunk floor of the exhaustive top-k (heads/ranking.py) saves in `eval`.

    .venv/bin/python -m benchmarks.chunk_queries MODEL DATA --max-sets 2048 --floors 1,64 --name chunk_queries

Evaluates a model (no baselines: the model and its variants) once per floor, in one process, the
floors in the order given: `ranking.CHUNK_MIN_QUERIES` set to each (1: chunks of chunk_elems
scores only, as before the floor), and checks that every floor ranks the same lists as the first.
Results: benchmarks/results/NAME.{json,md}, with the machine and the load average.
"""
from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

import numpy as np

from .machine import machine_info, write_results

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="a model directory")
    ap.add_argument("data", help="its prepared dataset")
    ap.add_argument("--max-sets", type=int, default=2048, help="examples (users or held-out sets) evaluated")
    ap.add_argument("--floors", default="1,64", help="comma-separated CHUNK_MIN_QUERIES values, timed in turn")
    ap.add_argument("--name", default="chunk_queries")
    args = ap.parse_args()

    import superbloom as sb
    from superbloom.evaluation.evaluate import EvalConfig, evaluate
    from superbloom.heads import ranking

    load0 = os.getloadavg()
    model, data = sb.load(args.model), sb.Dataset(args.data)
    rows, first = [], None
    for floor in [int(f) for f in args.floors.split(",")]:
        ranking.CHUNK_MIN_QUERIES = floor
        step = ranking.chunk_queries(data.n_ids, 1 << 22)  # the hybrid head's chunk_elems
        t = time.perf_counter()
        result = evaluate(model, data, EvalConfig(baselines=(), max_sets=args.max_sets), progress=False)
        seconds = time.perf_counter() - t
        first = first or result.ranks
        rows.append({"floor": floor, "queries_per_chunk": step, "seconds": round(seconds, 1),
                     "same_ranks_as_first": all(np.array_equal(first[k], result.ranks[k]) for k in first),
                     "methods": sorted(result.ranks), "examples": len(next(iter(result.ranks.values())))})
    info = machine_info()
    out = {"model": args.model, "data": args.data, "ids": data.n_ids, "runs": rows, "machine": info,
           "load_before": [round(x, 2) for x in load0], "load_after": [round(x, 2) for x in os.getloadavg()],
           "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)}
    md = [f"# `eval` and the queries per chunk of the exhaustive top-k ({data.n_ids:,} ids)", "",
          f"`python -m benchmarks.chunk_queries {args.model} {args.data} --max-sets {args.max_sets} "
          f"--floors {args.floors} --name {args.name}`: one process, the floors in turn, no baselines "
          "(the model and its variants, which a hybrid ranks in its own pass).", "",
          "| CHUNK_MIN_QUERIES | queries per chunk | eval s | same lists as the first row |", "|---|---|---|---|"]
    md += [f"| {r['floor']} | {r['queries_per_chunk']} | {r['seconds']} | {r['same_ranks_as_first']} |" for r in rows]
    md += ["", f"{rows[0]['examples']:,} examples; methods: {', '.join(rows[0]['methods'])}. Load average "
           f"{out['load_before'][0]} before, {out['load_after'][0]} after; peak RSS {out['peak_rss_gb']} GB.", ""]
    write_results(ROOT / "benchmarks" / "results", args.name, out, md)
    print("\n".join(md))


if __name__ == "__main__":
    main()
