"""What the bisection tree of coherent hash maps costs at the paper's scale (superbloom/coherent.py).

    /work/tools/benchlock .venv/bin/python -m benchmarks.scale.tree_order --ids 5139571 --alpha 50

Times coherent.tree_order on --ids seeded random rows of --rank dimensions (one row in 13 all zero,
as ids without co-occurrence are: ties for the sort), the step that orders the ids of the first
coherent map; the factorisation before it is not included. Also times the per-pass sort both ways
(np.lexsort and coherent._order_within) on the positions of a mid-depth level, and checks they agree.
Results: benchmarks/results/scale/NAME.{json,md}, with the machine and the load average.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from superbloom.cli.flags import POS_INT

from ..machine import machine_info, write_results

ROOT = Path(__file__).resolve().parents[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ids", type=POS_INT, default=5_139_571)
    ap.add_argument("--rank", type=POS_INT, default=32, help="embedding dimensions (the factorisation's rank)")
    ap.add_argument("--alpha", type=POS_INT, default=50)
    ap.add_argument("--threads", type=POS_INT, default=2)
    ap.add_argument("--name", default="tree_order")
    args = ap.parse_args()

    import torch

    from superbloom.hashing import coherent

    torch.set_num_threads(args.threads)
    load0 = os.getloadavg()
    emb = np.random.default_rng(0).standard_normal((args.ids, args.rank)).astype(np.float32)
    emb[::13] = 0
    t = time.perf_counter()
    perm = coherent.tree_order(emb, args.alpha, 0)
    tree_s = time.perf_counter() - t
    assert np.array_equal(np.sort(perm), np.arange(args.ids))

    sorts = []
    rng = np.random.default_rng(1)
    for n_segments in (1, 1_000, 100_000):
        seg = np.repeat(np.arange(n_segments), np.diff(np.linspace(0, args.ids, n_segments + 1).astype(np.int64)))
        proj = rng.standard_normal(args.ids).astype(np.float32)
        proj[::13] = 0
        t = time.perf_counter()
        a = np.lexsort((proj, seg))
        lex_s = time.perf_counter() - t
        t = time.perf_counter()
        b = coherent._order_within(proj, seg, n_segments)
        within_s = time.perf_counter() - t
        sorts.append({"segments": n_segments, "lexsort_s": round(lex_s, 2), "order_within_s": round(within_s, 2),
                      "same": bool(np.array_equal(a, b))})
    load1 = os.getloadavg()

    result = {"settings": vars(args), "tree_order_s": round(tree_s, 1), "sorts": sorts,
              "load_before": [round(v, 2) for v in load0], "load_after": [round(v, 2) for v in load1],
              "machine": machine_info()}
    md = [f"# coherent.tree_order at {args.ids:,} ids", "",
          f"Seeded random rows ({args.ids:,} x {args.rank}, one in 13 all zero), alpha {args.alpha}, "
          f"{args.threads} torch threads: **tree_order {tree_s:.1f} s** (the factorisation before it not included).", "",
          "The per-pass sort (within each segment, by projection) on {:,} positions:".format(args.ids), "",
          "| segments | np.lexsort | _order_within | same order |", "|---|---|---|---|"]
    md += [f"| {s['segments']:,} | {s['lexsort_s']} s | {s['order_within_s']} s | {s['same']} |" for s in sorts]
    md += ["", f"Load average (1/5/15 min) before {result['load_before']}, after {result['load_after']}.", ""]
    write_results(ROOT / "benchmarks" / "results" / "scale", args.name, result, md)
    print("\n".join(md))


if __name__ == "__main__":
    main()
