"""Probe (issue 33): the [MASK] element's weight at query time.

    .venv/bin/python -m benchmarks.quality.mask_weight --dataset wikispeedia --split val --run net-2000 --ratios 0,0.1,0.25,0.5,1

Training merges a set's [MASK] elements into one element of multiplicity c (model/batches.py
merge_masks: attention gives it weight c), about a third of the set's size; a query has one [MASK]
of multiplicity 1 (batches.query_batch). This ranks the harness's examples (5 held-out ids per set)
with a harness model's network, its query [MASK] given multiplicity max(1, round(ratio x context
size)) (ratio 0: as shipped), and prints rec@10 beside EASE's. No training; nothing is stored in
the model. Results: benchmarks/results/quality.md (a probe that gave nothing).
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True, help="a harness dataset (benchmarks/datasets.py)")
    ap.add_argument("--split", default="val", choices=("val", "test"))
    ap.add_argument("--run", required=True, help="a harness model under runs/quality/models/DATASET-SPLIT/")
    ap.add_argument("--ratios", default="0,0.1,0.25,0.5,1", help="comma-separated multiplicity / context size")
    ap.add_argument("--out", help="append a JSON line of the results here")
    a = ap.parse_args(argv)

    import torch

    import superbloom as sb
    from benchmarks.quality.ensemble import ranks_of
    from benchmarks.quality.harness import WORK, baseline_ranks, examples, split_dataset
    from superbloom.model.sequence_batches import ordered_query_batch

    torch.set_num_threads(1)
    data = split_dataset(a.dataset, a.split)
    ex = examples(data)
    ease = baseline_ranks(a.dataset, a.split, data, ex, ("ease",))["ease"]["ranks"]
    pred = sb.load(WORK / "models" / f"{a.dataset}-{a.split}" / a.run, threads=1, mmap=False)
    model, head = pred.model, pred.model.head
    model.eval()
    rows = head.rows()
    rec10 = lambda r: round(float(((r > 0) & (r <= 10)).mean()), 4)  # noqa: E731
    out = {"dataset": a.dataset, "split": a.split, "run": a.run, "ease": rec10(ease), "rec@10": {},
           "load": round(os.getloadavg()[0], 2)}
    print(f"{a.dataset} {a.split} {a.run}: EASE rec@10 {out['ease']}")
    for ratio in (float(x) for x in a.ratios.split(",")):
        ranks, t0 = np.zeros(len(ex.targets), np.int64), time.time()
        with torch.no_grad():
            for s in range(0, len(ex.contexts), 256):
                ctx = np.asarray(ex.contexts[s:s + 256], np.int64)
                qb = ordered_query_batch(ctx, pred.hashing, model.encoder.cfg)
                if ratio > 0:
                    qb.mult[:, -1] = torch.from_numpy(np.maximum(1, np.rint((ctx >= 0).sum(1) * ratio)).astype(np.int64))
                logp = head.log_probs(model.target_hidden(qb).mean(1), rows)
                ranks[s:s + len(ctx)] = ranks_of(logp, ctx, ex.targets[s:s + 256])
        out["rec@10"][f"{ratio:g}"] = rec10(ranks)
        print(f"  ratio {ratio:g}: rec@10 {rec10(ranks):.4f} ({time.time() - t0:.0f} s)")
    if a.out:
        with open(a.out, "a") as f:
            f.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
