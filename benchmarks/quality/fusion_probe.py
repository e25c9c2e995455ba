"""Probe: how much do the pure model and EASE add to each other? (issue 16, the hybrid head's ceiling)

Late fusion on a trained harness model's examples: rank by  log p_model(id | context) + lam * EASE(id | context)
for a grid of lam (lam = inf: EASE alone), with EASE fitted on the same training sets (dense, <= 25,000 ids).
If no lam beats EASE, adding an item-item term to the model (heads/hybrid.py) cannot be expected to either.
A probe on the split it is run on (val): it reads a ceiling, it does not choose a setting for test.

    python -m benchmarks.quality.fusion_probe --dataset beauty --split val --run default-2000
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

from benchmarks.quality.harness import trained_run
from benchmarks.quality.prior_adjust import id_scores
from superbloom.baselines import Ease
from superbloom.metrics import hits_at, target_ranks


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", default="beauty")
    p.add_argument("--split", default="val")
    p.add_argument("--run", default="default-2000")
    p.add_argument("--lams", default="0,1,3,10,30,100,300,inf")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    data, ex, pred = trained_run(a.dataset, a.split, a.run)
    ease = Ease(data.train, data.n_ids)
    lams = [float(v) for v in a.lams.split(",")]
    ranks = {lam: [] for lam in lams}
    for s in range(0, len(ex.contexts), 256):
        ctx = ex.contexts[s:s + 256]
        model = torch.log_softmax(id_scores(pred.model, pred.hashing, ctx), -1)
        e = torch.from_numpy(np.asarray(ease.scores(ctx), np.float32))
        rows, cols = np.nonzero(ctx >= 0)
        for lam in lams:
            sc = e.clone() if lam == float("inf") else model + lam * e
            sc[torch.from_numpy(rows), torch.from_numpy(ctx[rows, cols])] = -torch.inf
            ranks[lam].append(target_ranks(torch.topk(sc, 20, dim=1).indices.numpy(), ex.targets[s:s + 256]))
    for lam in lams:
        r = np.concatenate(ranks[lam])
        print(f"{a.dataset} [{a.split}] {a.run} + {lam:g} x EASE: rec@1 {hits_at(r, 1).mean():.4f}  "
              f"rec@10 {hits_at(r, 10).mean():.4f}  rec@20 {hits_at(r, 20).mean():.4f}", flush=True)


if __name__ == "__main__":
    main()
