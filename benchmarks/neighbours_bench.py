"""What the blocked co-occurrence builder (superbloom/neighbours.py) costs, beside the hybrid's X^T X path.

    superbloom synth --out s.parquet --ids 300000 --links 3000000 --mean-set-size 20
    superbloom prepare s.parquet --format parquet --out d
    .venv/bin/python -m benchmarks.neighbours_bench d --neighbours 200 [--xtx] [--threads 1,2]

Times neighbours.cooccurrence_neighbours on the training sets of a prepared dataset and records its
peak traced memory (tracemalloc: numpy's allocations) and the process's peak RSS; with --xtx also
the hybrid's path (heads/hybrid.py neighbour_pattern + baselines.Cooccurrence: two X^T X products)
on the same sets, checking that both give the same term bit for bit. Also states sum over sets of
|set|^2 (the pairs the builder sorts) and the nnz of X^T X where it was formed.
Results: benchmarks/results/NAME.{json,md}, with the machine and the load average.
"""
from __future__ import annotations

import argparse
import os
import resource
import time
import tracemalloc
from pathlib import Path

import numpy as np

from .machine import machine_info, machine_line, write_results

ROOT = Path(__file__).resolve().parents[1]


def traced(fn):
    """fn() -> (its result, wall seconds, CPU seconds, peak traced MB)."""
    tracemalloc.start()
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    seconds, cpu = time.perf_counter() - t, time.process_time() - c
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return out, seconds, cpu, peak


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="a prepared dataset directory")
    ap.add_argument("--neighbours", type=int, default=200)
    ap.add_argument("--pair-budget", type=int, default=1 << 20)
    ap.add_argument("--xtx", action="store_true", help="also time the hybrid's X^T X path and compare")
    ap.add_argument("--threads", default="",
                    help="comma-separated block threads to time in turn, e.g. 1,2 (default: the library's)")
    ap.add_argument("--name", default="neighbours")
    args = ap.parse_args()

    from superbloom.data.dataset import Dataset
    from superbloom.heads import neighbours as nb
    from superbloom.heads.neighbours import cooccurrence_neighbours

    load0 = os.getloadavg()
    data = Dataset(args.data)
    sets = data.train
    sets = type(sets)(np.asarray(sets.offsets), np.asarray(sets.ids))  # in memory, not timed
    n = data.n_ids
    lengths = sets.lengths.astype(np.float64)
    result = {"data": str(args.data), "ids": n, "train_sets": len(sets), "train_links": int(lengths.sum()),
              "sum_set_size_squared": int((lengths ** 2).sum()), "neighbours": args.neighbours,
              "pair_budget": args.pair_budget}
    rows, first = [], None
    for threads in [int(t) for t in args.threads.split(",") if t] or [nb.BLOCK_THREADS]:
        nb.BLOCK_THREADS = threads  # blocks at once, at most the cores
        (indptr, cols, values), s, cpu, peak = traced(lambda: cooccurrence_neighbours(sets, n, args.neighbours,
                                                                                 args.pair_budget))
        first = first or (indptr, cols, values)
        rows.append({"block_threads": threads, "seconds": round(s, 2), "cpu_seconds": round(cpu, 2),
                     "peak_traced_mb": round(peak, 1), "values": len(cols),
                     "result_mb": round((indptr.nbytes + cols.nbytes + values.nbytes) / 2**20, 1),
                     "same_as_first": all(np.array_equal(a, b) for a, b in zip(first, (indptr, cols, values)))})
    result["blocked"], result["blocked_runs"] = rows[0], rows
    if args.xtx:
        from superbloom.evaluation.baselines import Cooccurrence
        from superbloom.heads.itemitem import neighbour_pattern

        def hybrid_path():
            ip, c = neighbour_pattern(sets, n, args.neighbours)
            cos = Cooccurrence(sets, n).cos
            return ip, c, np.asarray(cos[np.repeat(np.arange(n), np.diff(ip)), c]).reshape(-1), cos.nnz

        (ip, c, v, nnz), s, cpu, peak = traced(hybrid_path)
        same = bool(np.array_equal(ip, indptr) and np.array_equal(c, cols)
                    and np.array_equal(v.astype(np.float32).view(np.int32), values.view(np.int32)))
        result["xtx"] = {"seconds": round(s, 2), "cpu_seconds": round(cpu, 2), "peak_traced_mb": round(peak, 1), "xtx_nnz_off_diagonal": int(nnz),
                         "same_term_bit_for_bit": same}
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    result["machine"] = machine_info()
    result["load_average"] = [load0, os.getloadavg()]
    lines = [f"# Blocked co-occurrence neighbours ({args.data})", "",
             f"{n:,} ids, {len(sets):,} training sets, {result['train_links']:,} links, "
             f"sum |set|^2 = {result['sum_set_size_squared']:,}; neighbours {args.neighbours}, "
             f"pair budget {args.pair_budget:,}.", "",
             "| builder | wall s | CPU s | peak traced MB |", "|---|---:|---:|---:|",
             *[f"| blocked (neighbours.py), {r['block_threads']} block thread(s) | {r['seconds']} | {r['cpu_seconds']} | "
               f"{r['peak_traced_mb']} |" for r in rows],
             "", f"Result: {len(cols):,} values, {result['blocked']['result_mb']} MB (indptr int64, cols int32, "
             f"values float32); the same arrays from every run: {all(r['same_as_first'] for r in rows)}. CPU s "
             "sums the threads."]
    if args.xtx:
        lines.insert(-2, f"| X^T X (hybrid.py + baselines.Cooccurrence) | {result['xtx']['seconds']} | "
                         f"{result['xtx']['cpu_seconds']} | {result['xtx']['peak_traced_mb']} |")
        lines += ["", f"X^T X off-diagonal nnz {result['xtx']['xtx_nnz_off_diagonal']:,}; "
                      f"same term bit for bit: {result['xtx']['same_term_bit_for_bit']}."]
    lines += ["", f"Peak RSS of the process {result['peak_rss_mb']} MB; load average before/after "
                  f"{load0[0]:.1f} / {os.getloadavg()[0]:.1f} (a 2-core machine, shared with other work).", ""]
    write_results(ROOT / "benchmarks" / "results", args.name, result, lines)
    print("\n".join(lines + [machine_line(result["machine"])]))


if __name__ == "__main__":
    main()
