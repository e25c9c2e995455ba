"""Row-sparse gradients: the tables a training step reads only a few rows of.

The token embedding, the output rows of the unhashed heads and their biases are tables of one row
per token or id (up to millions), of which one step reads the rows of the few thousand tokens its
sets use (and a sampled softmax's negatives). A module declares such parameters with
`declare_rows(module, names)` and reads them with `gather_rows(table, index, module.sparse_rows)`.

While `sparse_rows(model, True)` is on (the training loop turns it on when its optimizer takes
row-sparse gradients, optim.RowAdamW), the gradient of a declared parameter is a sparse COO tensor
of the rows read (a row read twice: two entries, summed when coalesced), so the backward, the
clipping, the optimizer and the weight average cost what the batch touches instead of the table's
size. A step that also uses the whole table (the superbloom head's full softmax over every token)
gets a dense gradient, as before: autograd adds the sparse and the dense parts into a dense one.
Off (the default) gather_rows is plain indexing, so a model trained with any torch optimizer
computes what it did before.
"""
from __future__ import annotations

import weakref

import torch
import torch.nn as nn

_DECLARED: "weakref.WeakKeyDictionary[nn.Module, tuple[str, ...]]" = weakref.WeakKeyDictionary()


class _Rows(torch.autograd.Function):
    """table[index] whose gradient is a sparse COO tensor with one entry per index read."""

    @staticmethod
    def forward(ctx, table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(index)
        ctx.shape = table.shape
        return table[index]  # (*index.shape, *table.shape[1:])

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (index,) = ctx.saved_tensors
        flat = index.reshape(1, -1)  # (1, K)
        values = grad.contiguous().reshape(flat.shape[1], *ctx.shape[1:])  # (K, *row)
        return torch.sparse_coo_tensor(flat, values, ctx.shape, check_invariants=False), None


def gather_rows(table: torch.Tensor, index: torch.Tensor, sparse: bool) -> torch.Tensor:
    """table[index] (index: any shape of int64 row numbers); with `sparse` its gradient is row-sparse."""
    return _Rows.apply(table, index) if sparse and torch.is_grad_enabled() and table.requires_grad else table[index]


def declare_rows(module: nn.Module, names) -> None:
    """Parameters `names` of `module` are tables it reads by rows (gather_rows with module.sparse_rows)."""
    _DECLARED[module] = tuple(_DECLARED.get(module, ())) + tuple(names)
    module.sparse_rows = False


def sparse_rows(model: nn.Module, on: bool = True) -> list[nn.Parameter]:
    """Turn row-sparse gradients on (or off) in every module of `model` that declared rows; -> the
    declared parameters (each once: a tied embedding is declared by the encoder and read by the head)."""
    out, seen = [], set()
    for module in model.modules():
        if module in _DECLARED:
            module.sparse_rows = on
            for name in _DECLARED[module]:
                p = getattr(module, name)
                if isinstance(p, nn.Parameter) and id(p) not in seen:
                    seen.add(id(p))
                    out.append(p)
    return out
