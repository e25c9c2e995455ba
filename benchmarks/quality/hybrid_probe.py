"""Probe: how many EASE weights per id, and which mix, does the hybrid head need? (issue 16)

On a trained hybrid harness model (its network is fixed), rebuild the item-item term with
`neighbours` in a list (the largest |EASE weight| per row; 0 = dense EASE) and score the harness
examples for a grid of mix values: rec@10 per (neighbours, mix). A probe on the split it is run
on (val): it says what the head's defaults should be, it is not a result.

    python -m benchmarks.quality.hybrid_probe --dataset beauty --split val --run hybrid-2000
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

from benchmarks.quality.harness import trained_run
from superbloom.baselines import Ease
from superbloom.batches import query_batch
from superbloom.heads.hybrid import largest_pattern
from superbloom.metrics import hits_at, target_ranks


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", default="beauty")
    p.add_argument("--split", default="val")
    p.add_argument("--run", default="hybrid-2000")
    p.add_argument("--neighbours", default="200,500,1000,0")
    p.add_argument("--mixes", default="10,30,100,200,300,500,1000")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    data, ex, pred = trained_run(a.dataset, a.split, a.run)
    head, n = pred.model.head, data.n_ids
    b = Ease(data.train, n).b  # the harness split's training sets (the model's own term saw 98% of them)
    net = []
    with torch.no_grad():
        for s in range(0, len(ex.contexts), 512):
            hidden = pred.model.target_hidden(query_batch(ex.contexts[s:s + 512], pred.hashing))
            net.append(torch.log_softmax(head.logits(hidden), -1))
    net = torch.cat(net)  # (E, N)
    ctx = np.zeros((len(ex.contexts), n), np.float32)
    rows, cols = np.nonzero(ex.contexts >= 0)
    np.add.at(ctx, (rows, ex.contexts[rows, cols]), 1.0)
    for k in [int(v) for v in a.neighbours.split(",")]:
        if k:
            indptr, pc = largest_pattern(b, k)
            sparse = np.zeros_like(b)
            r = np.repeat(np.arange(n), np.diff(indptr))
            sparse[r, pc] = b[r, pc]
        else:
            sparse = b
        term = torch.from_numpy(ctx @ sparse)  # (E, N)
        for mix in [float(v) for v in a.mixes.split(",")]:
            sc = net + mix * term
            sc[torch.from_numpy(rows), torch.from_numpy(ex.contexts[rows, cols])] = -torch.inf
            rk = target_ranks(torch.topk(sc, 20, dim=1).indices.numpy(), ex.targets)
            print(f"{a.dataset} [{a.split}] neighbours {k or 'dense'} mix {mix:g}: rec@10 {hits_at(rk, 10).mean():.4f}"
                  f"  rec@20 {hits_at(rk, 20).mean():.4f}", flush=True)


if __name__ == "__main__":
    main()
