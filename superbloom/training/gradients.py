"""A step's gradients between the backward and the optimizer: averaged over the ranks, measured, clipped.

    grads = StepGradients(model, tables, d)     # tables: heads.rows.sparse_rows(model) (or [])
    loss.backward(); grads.reduce(); norm = grads.clip(1.0); touched = grads.touched()

The dense gradients of a model wrapped in DistributedDataParallel are averaged over the ranks by
DDP during the backward. The row tables (heads/rows.py: the token embedding, output rows, biases)
are left out of DDP, whose reducer expects the gradient kinds it saw at construction and whose NCCL
backend has no sparse all-reduce; their gradients are averaged here, a sparse one by gathering every
rank's rows and values (their counts first) and coalescing the concatenation in rank order, so that
every rank holds the same gradient (the union of the rows the ranks read), a dense one by an
all-reduce. The norm and the clipping cover both kinds (a sparse gradient by its coalesced values:
a row read twice counts once, summed); a model without sparse gradients is clipped by torch's own
clip_grad_norm_, as before.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn

from ..model.device import Dist


class StepGradients:
    """The gradients of `model`'s parameters for one step; `tables` are the row tables (left out of DDP)."""

    def __init__(self, model: nn.Module, tables: list[nn.Parameter] = (), d: Dist | None = None):
        self.params = list(model.parameters())
        self.tables = list(tables)
        self.world = d.world if d is not None else 1

    def reduce(self) -> None:
        """Coalesce the sparse gradients and, with several ranks, average the tables' gradients."""
        for p in self.tables:
            if p.grad is None:
                continue  # read by no rank this step (every rank runs the same head)
            if p.grad.is_sparse:
                p.grad = p.grad.coalesce() if self.world == 1 else _gathered(p.grad, self.world)
            elif self.world > 1:
                dist.all_reduce(p.grad)
                p.grad.div_(self.world)

    def norm(self) -> torch.Tensor:
        """The 2-norm of every gradient together (sparse ones coalesced: call reduce first)."""
        norms = [(p.grad._values() if p.grad.is_sparse else p.grad).norm() for p in self.params if p.grad is not None]
        return torch.linalg.vector_norm(torch.stack(norms)) if norms else torch.zeros(())

    def clip(self, max_norm: float) -> float:
        """Scale the gradients to a norm of at most `max_norm` (0: no clipping) -> their norm before."""
        if not any(p.grad is not None and p.grad.is_sparse for p in self.params):
            if max_norm:
                return float(torch.nn.utils.clip_grad_norm_(self.params, max_norm))
            return float(self.norm())
        total = self.norm()
        if max_norm:
            scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)  # clip_grad_norm_'s rule
            for p in self.params:
                if p.grad is not None:
                    (p.grad._values() if p.grad.is_sparse else p.grad).mul_(scale)
        return float(total)

    def touched(self) -> dict[nn.Parameter, torch.Tensor | None]:
        """The rows the optimizer will change in each table: the rows of a sparse gradient, None for a
        dense one (every row); a table without a gradient is absent (it does not change)."""
        return {p: (p.grad._indices()[0] if p.grad.is_sparse else None) for p in self.tables if p.grad is not None}


def _gathered(grad: torch.Tensor, world: int) -> torch.Tensor:
    """The mean over the ranks of a sparse (rows) gradient, coalesced: every rank's rows and values."""
    grad = grad.coalesce()
    rows, values = grad._indices()[0], grad._values()
    count = torch.tensor([len(rows)], dtype=torch.long, device=rows.device)
    counts = [torch.zeros_like(count) for _ in range(world)]
    dist.all_gather(counts, count)
    counts = [int(c) for c in counts]
    width = max(counts)
    pad_rows = torch.zeros(width, dtype=rows.dtype, device=rows.device)
    pad_rows[:len(rows)] = rows
    pad_values = values.new_zeros((width, *values.shape[1:]))
    pad_values[:len(rows)] = values
    all_rows = [torch.empty_like(pad_rows) for _ in range(world)]
    all_values = [torch.empty_like(pad_values) for _ in range(world)]
    dist.all_gather(all_rows, pad_rows)
    dist.all_gather(all_values, pad_values)
    rows = torch.cat([r[:c] for r, c in zip(all_rows, counts)])
    values = torch.cat([v[:c] for v, c in zip(all_values, counts)]).div_(world)
    return torch.sparse_coo_tensor(rows[None], values, grad.shape, check_invariants=False).coalesce()
