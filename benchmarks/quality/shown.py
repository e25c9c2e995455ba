"""A probe (issue 33, the network alone against EASE): the training softmax without the ids the row shows.

Every ranking we report excludes the context's ids (they are given, not predicted), and EASE's
closed form never lets an id predict itself (its diagonal is 0). The full softmax of training does
neither: the ids a training row shows are in the normaliser, so the network is also taught to rank
the ids it sees *below* the masked ones. That costs it most where it trails EASE: long contexts
(many shown ids) and frequent targets (the frequent ids are the ones most often shown, and they sit
next to the frequent targets in the output space). Inside `shown_excluded()`, the training loss of a
full or hybrid head is the NLL of a softmax over the ids the row does not show (a row's own targets
always stay in it), the ranking's own question; validation, ranking and everything else are unchanged.

Harness recipes with `exclude_shown` set train inside it (harness.train_model).

Measured (benchmarks/results/quality.md, "a training softmax without the shown ids"): the network
alone gains +0.003 to +0.0075 rec@10 on Wikispeedia, Beauty, Toys and FB15k-237 (val and test;
LastFM -0.004 and -0.013 inside wide intervals), about a fifth of its gap to EASE; the hybrid does
not move (val: +0.004, 0.000, 0.000). Not a library option.
"""
from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from superbloom.heads.full import target_rows
from superbloom.model.encoder import SetModel


def shown_mask(logits: torch.Tensor, shown: torch.Tensor, rows: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(U, N) True at the ids row u shows (`shown` (U, n), -1 at specials and unknown ids), except the
    row's own targets (`rows`, `targets` (M,))."""
    n_ids = logits.shape[1]
    ids = shown.masked_fill((shown < 0) | (shown >= n_ids), -1)
    mask = torch.zeros(logits.shape, dtype=torch.bool, device=logits.device)
    r, c = (ids >= 0).nonzero(as_tuple=True)
    mask[r, ids[r, c]] = True
    mask[rows, targets] = False
    return mask


def loss_without_shown(model: SetModel, batch) -> torch.Tensor:
    """The mean NLL of each target under a softmax over the ids its row does not show."""
    elements, rows = torch.unique(batch.target_elem, return_inverse=True)
    hidden = model.element_hidden(batch)[elements]
    logits = model.head.logits(hidden)  # (U, N): the full and hybrid heads' network logits
    rows = target_rows(rows, batch.target_ids)
    mask = shown_mask(logits, batch.context(elements), rows, batch.target_ids)
    logp = F.log_softmax(logits.masked_fill(mask, float("-inf")), -1)
    return -logp[rows, batch.target_ids].mean()


@contextlib.contextmanager
def shown_excluded():
    """Inside the block, SetModel's training loss leaves the shown ids out of the softmax."""
    original = SetModel.forward

    def forward(self, batch):
        return loss_without_shown(self, batch) if self.training else original(self, batch)

    SetModel.forward = forward
    try:
        yield
    finally:
        SetModel.forward = original
