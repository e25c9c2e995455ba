"""A probe (issue 33, the network alone against EASE): a network taught by a trained ensemble with its term.

The library's `--item-distill S` teaches the network with EASE's term alone (softmax of 30 x the term
over the ids the row does not show). Here the teacher is instead a trained model folder of the same
data split (an ensemble of `train --members` with its chosen term weight, the harness's `kd3_x6`):
its scores (the members' mean log p + weight x the term, `sb.Ensemble.scores`) of every id given
the ids the training row shows. Harness recipes with `teacher` set train under `taught_by(folder)`,
which swaps the head's training-time term (heads/hybrid.py `_fold_term`) for the teacher's scores /
distill_scale, so the distilled loss is the cross-entropy to softmax(teacher's scores) over the ids
the row does not show. The student ranks alone (mix 0) and picks BEST by its own validation.

The teacher was trained on the same training sets as the student (not cross-fitted): a probe of
whether a stronger teacher than EASE lifts a single network, not a library feature.

Measured (benchmarks/results/quality.md, "a stronger teacher"): it does not. Val rec@10, recipes
teach3 / teach6: Wikispeedia 0.3185 / 0.3145, LastFM 0.1286 / 0.1328, where EASE-taught networks
(net_kd3, three seeds) score 0.3075-0.3190 and 0.1203-0.1286 and the teacher 0.3300 and 0.1390.
The teacher's six forward passes make a student's 2,000 steps take about 30 minutes on one thread.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import torch

import superbloom as sb
from superbloom.heads.hybrid import HybridHead


@contextlib.contextmanager
def taught_by(folder: Path):
    """Inside the block, every hybrid head's distilled loss is taught by the model in `folder`."""
    teacher = sb.load(folder)
    if not isinstance(teacher, sb.Ensemble):
        teacher = sb.Ensemble([teacher])
    original = HybridHead._fold_term

    def fold_term(self, context, like):
        ids = context.ids.masked_fill((context.ids < 0) | (context.ids >= self.n_ids), -1)
        with torch.no_grad():
            scores = teacher.scores(ids.cpu().numpy()).to(like.dtype).to(like.device)
        return scores / self.cfg.distill_scale, ids

    HybridHead._fold_term = fold_term
    try:
        yield teacher
    finally:
        HybridHead._fold_term = original
