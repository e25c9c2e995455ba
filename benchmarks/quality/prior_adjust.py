"""Probe: does re-weighting the model's popularity prior at inference help? (issue 16 diagnosis)

The model ranks by log p(id | context); co-occurrence (cosine) favours rare ids, and the model trails
it on the rarest deciles of Beauty while it trails EASE on the most frequent ids of Wikispeedia.
Logit adjustment (Menon et al., "Long-tail learning via logit adjustment", ICLR 2021) ranks by

    log p(id | context) - beta * log(1 + training count of id)

beta > 0 moves rare ids up, beta < 0 frequent ones. This script scores every id exhaustively (the
unhashed or hashed model alike: an id's score is the sum of its m tokens' log-probabilities, Algorithm
1's sum_log) on a trained harness model's examples and prints rec@1/10/20 for a grid of beta.

    python -m benchmarks.quality.prior_adjust --dataset beauty --split val --run default-2000
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

from benchmarks.quality.harness import trained_run
from superbloom.batches import query_batch
from superbloom.metrics import hits_at, target_ranks


def id_scores(model, hashing, ctx: np.ndarray) -> torch.Tensor:
    """(B, C) context ids -> (B, N) sum over the m maps of log p_j(token_j(id))."""
    b = query_batch(ctx, hashing)
    with torch.no_grad():
        lp = model.head.log_probs(model.target_hidden(b))  # (B, m, nb)
        buckets = model.head.buckets  # (m, N)
        return sum(lp[:, j, buckets[j]] for j in range(buckets.shape[0]))


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", default="beauty")
    p.add_argument("--split", default="val")
    p.add_argument("--run", default="default-2000")
    p.add_argument("--betas", default="-0.3,-0.2,-0.1,0,0.05,0.1,0.2,0.3,0.5")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    data, ex, pred = trained_run(a.dataset, a.split, a.run)
    model, hashing = pred.model, pred.hashing
    prior = torch.from_numpy(np.log1p(np.bincount(np.asarray(data.train.ids), minlength=data.n_ids)).astype(np.float32))
    betas = [float(v) for v in a.betas.split(",")]
    ranks = {beta: [] for beta in betas}
    for s in range(0, len(ex.contexts), 256):
        ctx = ex.contexts[s:s + 256]
        scores = id_scores(model, hashing, ctx)
        rows, cols = np.nonzero(ctx >= 0)
        scores[torch.from_numpy(rows), torch.from_numpy(ctx[rows, cols])] = -torch.inf
        for beta in betas:
            top = torch.topk(scores - beta * prior, 20, dim=1).indices.numpy()
            ranks[beta].append(target_ranks(top, ex.targets[s:s + 256]))
    for beta in betas:
        r = np.concatenate(ranks[beta])
        print(f"{a.dataset} [{a.split}] {a.run} beta {beta:+.2f}: rec@1 {hits_at(r, 1).mean():.4f}  "
              f"rec@10 {hits_at(r, 10).mean():.4f}  rec@20 {hits_at(r, 20).mean():.4f}", flush=True)


if __name__ == "__main__":
    main()
