"""Probe: does the query's [MASK] multiplicity matter at inference? (issue 16 diagnosis)

Training merges the c masked ids of a segment into one [MASK] element of multiplicity c (a log c
attention bias, batches.merge_masks): at mask rate 0.5 a 32-id segment has c ~ 13 (80% of 16). A
query has one [MASK] of multiplicity 1. This script re-ranks the harness's examples with the query's
multiplicity set to c (1 = the library's query), on an already trained harness model.

    python -m benchmarks.quality.mask_mult --dataset wikispeedia --split val --run a1_ema_ed-2000
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

from benchmarks.quality.harness import trained_run
from superbloom.batches import query_batch
from superbloom.metrics import hits_at, target_ranks


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", default="wikispeedia")
    p.add_argument("--split", default="val")
    p.add_argument("--run", default="a1_ema_ed-2000")
    p.add_argument("--mults", default="1,2,4,8,13,16,32")
    p.add_argument("--relative", action="store_true", help="multiplicity = round(x * context size) for x in --mults")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    _, ex, pred = trained_run(a.dataset, a.split, a.run)
    model, hashing = pred.model, pred.hashing
    n_ctx = (ex.contexts >= 0).sum(1)
    for x in [float(v) for v in a.mults.split(",")]:
        ranks = []
        for s in range(0, len(ex.contexts), 256):
            ctx = ex.contexts[s:s + 256]
            b = query_batch(ctx, hashing)
            c = np.maximum(1, np.round(x * n_ctx[s:s + 256])) if a.relative else np.full(len(ctx), x)
            b.mult[:, -1] = torch.from_numpy(c.astype(np.int64))
            with torch.no_grad():
                hidden = model.target_hidden(b)
                r = model.head.topk(hidden, 20, exclude=torch.from_numpy(np.asarray(ctx, np.int64)))
            ranks.append(target_ranks(r.ids.numpy(), ex.targets[s:s + 256]))
        ranks = np.concatenate(ranks)
        print(f"mult {'x ctx ' if a.relative else ''}{x:g}: rec@1 {hits_at(ranks, 1).mean():.4f}  "
              f"rec@10 {hits_at(ranks, 10).mean():.4f}  rec@20 {hits_at(ranks, 20).mean():.4f}", flush=True)


if __name__ == "__main__":
    main()
