"""A probe (issue 33): next-item training with the user's history out of each position's softmax.

The sequence benchmark ranks every id except the user's history (S3-Rec's convention): an id the
user has already met is never an answer. The sampled softmax of training does not know that: the
ids at or before a position are among its negatives when drawn, so the network is also taught to
rank what the user just saw below the next id. The set form of this probe (benchmarks/quality/shown.py)
gave the network alone +0.003 to +0.0075 rec@10 on four of five set datasets. Here, inside
`history_excluded()`, the training loss of a hybrid or sampled head with sampled negatives leaves
out of each target's negatives the ids its position has seen in the window (the element ids up to
and including its own; the target's own logit stays); validation, ranking and everything else are
unchanged. `python -m benchmarks.sequence.run ... --exclude-history` trains inside it.
"""
from __future__ import annotations

import contextlib

import torch

from superbloom.model.encoder import SetModel


def seen_mask(context: torch.Tensor, position: torch.Tensor, neg: torch.Tensor, n_ids: int) -> torch.Tensor:
    """(M, S) True where drawn id neg[s] is among target m's window ids at or before its element:
    `context` (M, n) element ids of its row (-1 at specials), `position` (M,) its element's column."""
    lut = torch.full((n_ids,), -1, dtype=torch.long, device=neg.device)
    lut[neg] = torch.arange(len(neg), device=neg.device)
    ids = context.masked_fill((context < 0) | (context >= n_ids), -1)
    idx = lut[ids.clamp(min=0)].masked_fill(ids < 0, -1)  # (M, n): each seen id's column among the drawn
    upto = torch.arange(context.shape[1], device=context.device)[None, :] <= position[:, None]
    r, c = ((idx >= 0) & upto).nonzero(as_tuple=True)
    mask = torch.zeros(len(context), len(neg), dtype=torch.bool, device=neg.device)
    mask[r, idx[r, c]] = True
    return mask


def loss_without_history(model: SetModel, batch) -> torch.Tensor:
    """The mean sampled-softmax loss (heads/sampled.py, log-Q corrected) with each target's seen ids
    out of its negatives."""
    head = model.head
    if getattr(head, "proposal", None) is None:
        raise SystemExit("--exclude-history: the probe needs a head trained with sampled negatives (--samples N > 0)")
    n = batch.mult.shape[1]
    targets = batch.target_ids
    v = model.element_hidden(batch)[batch.target_elem].mean(1)  # (M, d)
    neg = torch.unique(head.proposal.sample(head.cfg.samples))  # (S,) shared by the batch
    true = (v * head.rows(targets)).sum(-1) + head.bias[targets]
    logits = v @ head.rows(neg).T + head.bias[neg] - head.proposal.log_inclusion(neg, head.cfg.samples).to(v.dtype)
    seen = seen_mask(batch.context(batch.target_elem), batch.target_elem % n, neg, head.n_ids)
    logits = logits.masked_fill(seen | (neg[None, :] == targets[:, None]), float("-inf"))
    return (torch.logsumexp(torch.cat([true[:, None], logits], 1), 1) - true).mean()


@contextlib.contextmanager
def history_excluded():
    """Inside the block, SetModel's training loss leaves each position's seen ids out of its negatives."""
    original = SetModel.forward

    def forward(self, batch):
        return loss_without_history(self, batch) if self.training else original(self, batch)

    SetModel.forward = forward
    try:
        yield
    finally:
        SetModel.forward = original


@contextlib.contextmanager
def proposal(kind: str):
    """A second probe: inside the block a hybrid head draws its sampled negatives from `kind`
    (heads/sampled.py: uniform or log_uniform; or "mixed", Q the mean of uniform and log-uniform)
    instead of the proposal it is built with. Uniform and log-uniform are now the head's own setting
    (HybridConfig.proposal, what run.py --proposal uniform sets); "mixed" is only here."""
    from superbloom.heads import hybrid
    from superbloom.heads.sampled import Proposal

    def built(_kind: str, n: int, counts=None):
        if kind != "mixed":
            return Proposal(kind, n, counts)
        q = Proposal("log_uniform", n)  # "mixed": half uniform, half log-uniform draws (one Q, its own pi)
        q.kind = "mixed"
        q.q = 0.5 * q.q + 0.5 / n
        q.cdf = torch.cumsum(q.q, 0)
        return q

    hybrid.Proposal = built
    try:
        yield
    finally:
        hybrid.Proposal = Proposal

