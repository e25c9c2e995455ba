"""What the hashed-hybrid head's exact merge costs beside the superbloom head's Algorithm 1 alone.

    .venv/bin/python -m benchmarks.hashed_hybrid_bench DATA --alpha 16 --m 2 --neighbours 200

Builds a hashed-hybrid head (heads/hashed_hybrid.py) over a prepared dataset's ids with random
weights (the token embedding N(0, 0.3^2), d 64), fits its co-occurrence term on the training sets,
and ranks `--queries` test sets (their first 10 ids as the context, excluded) with random hidden
vectors, k 10: the head at mix 0 (the superbloom head, Algorithm 1) and at mix 3 (Algorithm 1 on
the untouched ids + the touched ids scored exactly + the merge), approximate (beam = k) and exact.
Reports CPU seconds of each topk call (the log-probabilities included), the share certified exact and
the mean beam. Random weights: the certificate rates say nothing about a trained model's.
Results: benchmarks/results/NAME.{json,md}, with the machine.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from .machine import machine_info, write_results

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data")
    ap.add_argument("--alpha", type=int, default=16)
    ap.add_argument("--m", type=int, default=2)
    ap.add_argument("--neighbours", type=int, default=200)
    ap.add_argument("--queries", type=int, default=256)
    ap.add_argument("--name", default="hashed_hybrid_topk")
    args = ap.parse_args()

    import torch
    import torch.nn as nn

    from superbloom.data.dataset import Dataset
    from superbloom.heads.beam import DecodeConfig
    from superbloom.hashing.bloom import BloomHash, HashConfig
    from superbloom.heads import head_config
    from superbloom.heads.hashed_hybrid import HashedHybridHead, mixed

    torch.set_num_threads(1)
    data = Dataset(args.data)
    n = data.n_ids
    h = BloomHash.build(n, HashConfig(args.alpha, args.m, 0))
    torch.manual_seed(0)
    emb = nn.Embedding(h.n_tokens, 64)
    nn.init.normal_(emb.weight, std=0.3)
    head = HashedHybridHead(emb, h, head_config("hashed-hybrid", neighbours=args.neighbours, term="cooccurrence"))
    t = time.process_time()
    built = head.fit(data.train)
    fit_cpu = time.process_time() - t
    rng = np.random.default_rng(0)
    rows = rng.choice(len(data.test), min(args.queries, len(data.test)), replace=False)
    ctx = np.full((len(rows), 10), -1, np.int64)
    for i, r in enumerate(rows):
        s = np.asarray(data.test[r])[:10]
        ctx[i, :len(s)] = s
    ctx = torch.from_numpy(ctx)
    hidden = torch.randn(len(rows), h.m, 64) * 0.3
    head.mix.fill_(3.0)
    result = {"data": args.data, "ids": n, "alpha": args.alpha, "m": args.m, "neighbours": args.neighbours,
              "queries": len(rows), "k": 10, "fit": built | {"cpu_seconds": round(fit_cpu, 2)}, "runs": []}
    lines = [f"# hashed-hybrid top-k vs Algorithm 1 alone ({n:,} ids, alpha {args.alpha}, m {args.m})", "",
             f"{len(rows)} queries, context 10 ids (excluded), k 10, term: {built['item_item_values']:,} "
             f"co-occurrence values ({args.neighbours} per id, fit {fit_cpu:.1f} s CPU); random weights.", "",
             "| decode | head | CPU s | certified | mean beam |", "|---|---|---:|---:|---:|"]
    with torch.no_grad():
        for name, dec in (("approximate", DecodeConfig()), ("exact", DecodeConfig(exact=True))):
            for label, mix in (("superbloom (mix 0)", 0.0), ("hashed-hybrid (mix 3)", 3.0)):
                with mixed(head, mix):
                    t = time.process_time()
                    r = head.topk(hidden, 10, ctx, dec, ctx)
                    cpu = time.process_time() - t
                run = {"decode": name, "head": label, "cpu_seconds": round(cpu, 3),
                       "certified": round(float(r.exact.float().mean()), 3), "mean_beam": round(float(r.beam.float().mean()), 1)}
                result["runs"].append(run)
                lines.append(f"| {name} | {label} | {run['cpu_seconds']} | {run['certified']} | {run['mean_beam']} |")
    result["machine"] = machine_info()
    lines.append("")
    write_results(ROOT / "benchmarks" / "results", args.name, result, lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
