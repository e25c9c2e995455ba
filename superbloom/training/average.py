"""The exponential moving average of the weights (Polyak averaging) that validation and BEST use.

    average = WeightAverage(model, 0.999, tables)   # tables: the row tables (heads/rows.py), or none
    ...; average.before_step(grads.touched()); opt.step(); average.update(step)

Every step moves the average toward the weights: avg <- avg + w (p - avg), w = 1 - min(decay,
(1 + step) / (10 + step)) (warm-started: early on it covers the steps taken so far). A row of a
table that the step does not change keeps its value p, so k such steps take its average to
p + (avg - p) x (1 - w_1) ... (1 - w_k): the row is brought up to date only when its value is about
to change (before_step, with the rows the optimizer will update), when the average is read
(swapped) or saved, from the running sum of log(1 - w) and the sum at which the row was last
current. A step then costs the rows it touches, not the table (0.1-0.3 s a step at 5M ids for the
dense pass); the average is the dense one's up to float rounding (tests/test_sparse_rows.py).
"""
from __future__ import annotations

import contextlib
import math

import torch
import torch.nn as nn


class WeightAverage:
    """Exponential moving average of the weights, for validation and the BEST checkpoint (module docstring)."""

    def __init__(self, model: nn.Module, decay: float, tables: list[nn.Parameter] = ()):
        self.params = list(model.parameters())
        self.decay = decay
        self.shadow = [p.detach().clone() for p in self.params]
        ids = {id(t) for t in tables}
        self.lazy = [i for i, p in enumerate(self.params) if id(p) in ids]
        self.dense = [i for i in range(len(self.params)) if id(self.params[i]) not in ids]
        self.kept = torch.zeros((), dtype=torch.float64)  # sum over the steps so far of log(1 - w)
        # per row of each table: `kept` when the row's average was last brought up to date
        self.current = {i: torch.zeros(self.params[i].shape[0], dtype=torch.float64) for i in self.lazy}
        self._index = {id(self.params[i]): i for i in self.lazy}
        self._touched: dict[int, torch.Tensor | None] | None = None  # None: before_step not called (all rows)

    def _catch_up(self, i: int, rows: torch.Tensor | None) -> None:
        """Bring the average of table i's `rows` (None: all) up to date with the steps they sat out."""
        behind = self.current[i] != self.kept if rows is None else self.current[i][rows] != self.kept
        rows = behind.nonzero().squeeze(1) if rows is None else rows[behind]
        if rows.numel():
            p, avg = self.params[i].detach(), self.shadow[i]
            kept = torch.exp(self.kept - self.current[i][rows]).to(avg.dtype).view(-1, *[1] * (avg.dim() - 1))
            avg[rows] = p[rows] + (avg[rows] - p[rows]) * kept
            self.current[i][rows] = self.kept

    @torch.no_grad()
    def before_step(self, touched: dict[nn.Parameter, torch.Tensor | None]) -> None:
        """The tables' rows the optimizer is about to change (grads.touched(): rows, or None for all;
        a table absent does not change): their averages are brought up to date first."""
        self._touched = {}
        for p, rows in touched.items():
            i = self._index.get(id(p))
            if i is not None:
                self._catch_up(i, rows)
                self._touched[i] = rows

    @torch.no_grad()
    def update(self, step: int) -> None:
        """Move the average toward the weights after optimizer step `step` (0-based). Without a
        before_step for this step every table counts as changed in every row (the dense average)."""
        w = 1.0 - min(self.decay, (1 + step) / (10 + step))
        if self.dense:
            torch._foreach_lerp_([self.shadow[i] for i in self.dense],
                                 [self.params[i].detach() for i in self.dense], w)
        if self._touched is None:
            self._touched = {i: None for i in self.lazy}
        for i, rows in self._touched.items():
            p, avg = self.params[i].detach(), self.shadow[i]
            if rows is None:
                avg.lerp_(p, w)
            else:
                avg[rows] = avg[rows].lerp_(p[rows], w)
        self.kept += math.log(1.0 - w)
        for i, rows in self._touched.items():
            self.current[i][slice(None) if rows is None else rows] = self.kept
        self._touched = None

    def averaged(self) -> list[torch.Tensor]:
        """The average of every parameter, every table row up to date (the stored state unchanged)."""
        out = list(self.shadow)
        for i in self.lazy:
            behind = (self.current[i] != self.kept).nonzero().squeeze(1)
            if behind.numel():
                p, avg = self.params[i].detach(), self.shadow[i].clone()
                kept = torch.exp(self.kept - self.current[i][behind]).to(avg.dtype).view(-1, *[1] * (avg.dim() - 1))
                avg[behind] = p[behind] + (avg[behind] - p[behind]) * kept
                out[i] = avg
        return out

    @contextlib.contextmanager
    def swapped(self):
        """The averaged weights in the model for the block; the trained ones back after it."""
        with torch.no_grad():
            saved = [p.detach().clone() for p in self.params]
            torch._foreach_copy_(self.params, self.averaged())
        try:
            yield
        finally:
            with torch.no_grad():
                torch._foreach_copy_(self.params, saved)

    def tensors(self) -> dict[str, torch.Tensor]:
        """The state to checkpoint as it is (rows not brought up to date: a resumed run goes on bit for bit)."""
        out = {str(i): t for i, t in enumerate(self.shadow)}
        if self.lazy:
            out["kept"] = self.kept
            out.update({f"current.{i}": self.current[i] for i in self.lazy})
        return out

    def load(self, tensors: dict[str, torch.Tensor]) -> None:
        """A checkpoint's state (one saved without table rows' markers: every row up to date)."""
        with torch.no_grad():
            for i, t in enumerate(self.shadow):
                t.copy_(tensors[str(i)])
            self.kept = tensors.get("kept", torch.zeros((), dtype=torch.float64)).to(torch.float64).clone()
            for i in self.lazy:
                saved = tensors.get(f"current.{i}")
                self.current[i] = saved.to(torch.float64).clone() if saved is not None else torch.full_like(
                    self.current[i], float(self.kept))
