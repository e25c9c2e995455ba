"""Optimizers behind a name, and the learning-rate schedule (Superbloom sec. 3.2).

    make_optimizer(OptimConfig(name="adamw", lr=3e-3), model.parameters())

    adamw   AdamW (betas 0.9 / 0.98, eps 1e-9) with linear warm-up to `lr` over `warmup` steps, then
            the schedule: inverse-square-root decay lr * sqrt(warmup / step) (the paper: Adam,
            inverse-sqrt decay; "rsqrt", the default), or a linear or cosine decay to 0 at the run's
            last step ("linear", "cosine": the run needs a step count, --steps or --epochs);
            torch's fused kernel from FUSED_MIN_PARAMS parameters on (the same update, much faster);
            a row-sparse gradient (heads/rows.py) updates only its rows, lazily (RowAdamW)
    adapsgd AdapSGD (adapsgd.py, the blog's): no learning rate; per-element rates from gradient
            statistics and a Hutchinson Hessian estimate every 5 steps

The training loop calls `set_lr(optimizer, cfg, step, total)` before optimizer step `step` (1-based) and
clips the gradient norm at `clip` (0: no clipping). A new optimizer is one `OptimizerSpec` in
OPTIMIZERS (its builder and what the loop must do for it; its name in config.OPTIMIZER_NAMES, which
--help reads without torch); it keeps its state as tensors and JSON-able scalars (checkpoint.py saves
it with safetensors, never pickle).
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Callable, Iterable

import torch

from .config import TO_ZERO, OptimConfig  # noqa: F401 (OptimConfig re-exported: callers import it here)


def _rsqrt(step: int, warmup: int, total: int) -> float:
    return math.sqrt(warmup / step)


def _linear(step: int, warmup: int, total: int) -> float:
    return max(0.0, (total - step) / max(total - warmup, 1))


def _cosine(step: int, warmup: int, total: int) -> float:
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step - warmup) / max(total - warmup, 1))))


# After the warm-up: the factor of step `step` of a run of `total` steps (config.SCHEDULE_NAMES)
SCHEDULES = {"rsqrt": _rsqrt, "linear": _linear, "cosine": _cosine}


def lr_factor(step: int, warmup: int, schedule: str = "rsqrt", total: int = 0) -> float:
    """Linear warm-up to 1, then the schedule (the paper's sec. 3.2: inverse square root decay). step
    is 1-based; `total` is the run's step count (linear and cosine reach 0 there)."""
    step, warmup = max(step, 1), max(warmup, 1)
    if schedule in TO_ZERO and total < 1:
        raise ValueError(f"the {schedule} schedule decays to 0 at the run's last step: give the run a step "
                         "count (--steps or --epochs), or use --schedule rsqrt")
    return step / warmup if step < warmup else SCHEDULES[schedule](step, warmup, total)


def set_lr(optimizer: torch.optim.Optimizer, cfg: OptimConfig, step: int, total: int = 0) -> float:
    """Set the learning rate of optimizer step `step` (1-based) of a run of `total` steps (0: no step
    count, which only the rsqrt schedule allows), where the optimizer has one (OptimizerSpec.scheduled);
    returns it."""
    lr = cfg.lr * lr_factor(step, cfg.warmup, cfg.schedule, total)
    if optimizer_spec(cfg.name).scheduled:
        for g in optimizer.param_groups:
            g["lr"] = lr
    return lr


# At or above this many parameters AdamW runs its fused kernel (one pass over parameter, gradient
# and both moments instead of ~10 elementwise passes): the same update up to float rounding (1 ulp,
# tests/test_scale_training.py), 5-10x faster on CPU (the optimizer over a 205K x 128 token table
# went from ~0.6 to ~0.06 s a step). Smaller models keep the
# reference (for-loop) kernel, bit for bit as before.
FUSED_MIN_PARAMS = 1_000_000


def use_fused(params: list[torch.nn.Parameter]) -> bool:
    """Fused AdamW for large models whose parameters are all float32 on a device it supports."""
    return (sum(p.numel() for p in params) >= FUSED_MIN_PARAMS
            and all(p.dtype == torch.float32 and p.device.type in ("cpu", "cuda") for p in params))


class RowAdamW(torch.optim.AdamW):
    """AdamW that also takes row-sparse gradients (heads/rows.py), updating only the rows they hold.

    A dense gradient gets torch's AdamW update (the same kernels, bit for bit). A sparse one is
    coalesced and its rows get the same update on their rows of the two moments (the lazy Adam of
    TensorFlow's LazyAdam and torch's SparseAdam, with AdamW's decoupled weight decay on the rows
    read): a row the step does not read keeps its value and its moments, where dense AdamW would
    decay both moments and still move it by its momentum. So it is not the same update as dense
    AdamW (except on the first step, and on every row read every step); its quality is measured
    against it (benchmarks/scale/step_quality.py). The state is AdamW's (step, exp_avg,
    exp_avg_sq per parameter): checkpoints of either load into the other."""

    @torch.no_grad()
    def step(self, closure=None):
        sparse = {p: p.grad for g in self.param_groups for p in g["params"] if p.grad is not None and p.grad.is_sparse}
        for p in sparse:
            p.grad = None  # AdamW skips a parameter without a gradient
        try:
            loss = super().step(closure)
        finally:
            for p, grad in sparse.items():
                p.grad = grad
        for group in self.param_groups:
            for p in group["params"]:
                if p in sparse:
                    self._row_step(p, sparse[p].coalesce(), group)
        return loss

    def _row_step(self, p: torch.Tensor, grad: torch.Tensor, group: dict) -> None:
        """torch's single-tensor AdamW step (adam.py, decoupled weight decay), on the rows of `grad` only."""
        state = self.state[p]
        if not state:  # AdamW's own layout, so a parameter can take dense and sparse steps in turn
            fused = bool(group.get("fused"))
            state["step"] = (torch.zeros((), dtype=torch.float32, device=p.device) if fused else
                             torch.tensor(0.0, dtype=torch.get_default_dtype()))
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        rows, g = grad.indices()[0], grad.values()  # (K,), (K, *row)
        beta1, beta2 = group["betas"]
        lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
        state["step"] += 1
        step = float(state["step"])
        param, exp_avg, exp_avg_sq = p[rows], state["exp_avg"][rows], state["exp_avg_sq"][rows]
        if wd:
            param.mul_(1 - lr * wd)
        exp_avg.lerp_(g, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        denom = (exp_avg_sq.sqrt() / (1 - beta2 ** step) ** 0.5).add_(eps)
        param.addcdiv_(exp_avg, denom, value=-lr / (1 - beta1 ** step))
        p[rows], state["exp_avg"][rows], state["exp_avg_sq"][rows] = param, exp_avg, exp_avg_sq


def _adamw(params, cfg: OptimConfig) -> torch.optim.Optimizer:
    params = list(params)
    return RowAdamW(params, lr=cfg.lr, betas=(0.9, 0.98), eps=1e-9, weight_decay=cfg.weight_decay,
                    fused=True if use_fused(params) else None)


def _adapsgd(params, cfg: OptimConfig) -> torch.optim.Optimizer:
    """No learning rate (lr and warmup are not used); weight decay as given (0 by default: the blog's
    0.1 stalls the id model), gradients clipped at `clip`."""
    from .adapsgd import AdapSGD

    return AdapSGD(params, weight_decay=cfg.weight_decay, max_grad_norm=cfg.clip or None)


@dataclass(frozen=True)
class OptimizerSpec:
    """An optimizer of the registry: its builder, and what the training loop does for it."""
    build: Callable[[Iterable[torch.nn.Parameter], OptimConfig], torch.optim.Optimizer]
    scheduled: bool = True  # its learning rate follows the schedule (set_lr); False: learning-rate free
    # some steps need second derivatives: the optimizer's `create_graph` says which, its
    # `forward_context()` wraps their forward pass (adapsgd.py); not with DistributedDataParallel
    second_order: bool = False
    sparse_rows: bool = False  # it takes row-sparse gradients of the tables (heads/rows.py; RowAdamW)

    def forward_context(self, optimizer) -> contextlib.AbstractContextManager:
        return optimizer.forward_context() if self.second_order else contextlib.nullcontext()

    def create_graph(self, optimizer) -> bool:
        return self.second_order and bool(optimizer.create_graph)


OPTIMIZERS = {"adamw": OptimizerSpec(_adamw, sparse_rows=True),
              "adapsgd": OptimizerSpec(_adapsgd, scheduled=False, second_order=True)}


def optimizer_spec(name: str) -> OptimizerSpec:
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}")
    return OPTIMIZERS[name]


def make_optimizer(cfg: OptimConfig, params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
    return optimizer_spec(cfg.name).build(params, cfg)
