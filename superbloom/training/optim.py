"""Optimizers behind a name, and the learning-rate schedule (Superbloom sec. 3.2).

    make_optimizer(OptimConfig(name="adamw", lr=3e-3), model.parameters())

    adamw   AdamW (betas 0.9 / 0.98, eps 1e-9) with linear warm-up to `lr` over `warmup` steps, then
            the schedule: inverse-square-root decay lr * sqrt(warmup / step) (the paper: Adam,
            inverse-sqrt decay; "rsqrt", the default), or a linear or cosine decay to 0 at the run's
            last step ("linear", "cosine": the run needs a step count, --steps or --epochs);
            torch's fused kernel from FUSED_MIN_PARAMS parameters on (the same update, much faster)
    adapsgd AdapSGD (adapsgd.py, the blog's): no learning rate; per-element rates from gradient
            statistics and a Hutchinson Hessian estimate every 5 steps

The training loop calls `set_lr(optimizer, cfg, step, total)` before optimizer step `step` (1-based) and
clips the gradient norm at `clip` (0: no clipping). A new optimizer is one builder and one entry in
OPTIMIZERS (and its name in config.OPTIMIZER_NAMES, which --help reads without torch); it keeps its
state as tensors and JSON-able scalars (checkpoint.py saves it with safetensors, never pickle).
"""
from __future__ import annotations

import math
from typing import Iterable

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
    count, which only the rsqrt schedule allows); returns it."""
    lr = cfg.lr * lr_factor(step, cfg.warmup, cfg.schedule, total)
    for g in optimizer.param_groups:
        if "lr" in g:  # a learning-rate-free optimizer has none
            g["lr"] = lr
    return lr


# At or above this many parameters AdamW runs its fused kernel (one pass over parameter, gradient
# and both moments instead of ~10 elementwise passes): the same update up to float rounding (1 ulp,
# tests/test_scale_training.py), 5-10x faster on CPU (benchmarks/results/scale/step_profile.md: the
# optimizer over a 205K x 128 token table went from ~0.6 to ~0.06 s a step). Smaller models keep the
# reference (for-loop) kernel, bit for bit as before.
FUSED_MIN_PARAMS = 1_000_000


def use_fused(params: list[torch.nn.Parameter]) -> bool:
    """Fused AdamW for large models whose parameters are all float32 on a device it supports."""
    return (sum(p.numel() for p in params) >= FUSED_MIN_PARAMS
            and all(p.dtype == torch.float32 and p.device.type in ("cpu", "cuda") for p in params))


def _adamw(params, cfg: OptimConfig) -> torch.optim.Optimizer:
    params = list(params)
    return torch.optim.AdamW(params, lr=cfg.lr, betas=(0.9, 0.98), eps=1e-9, weight_decay=cfg.weight_decay,
                             fused=True if use_fused(params) else None)


def _adapsgd(params, cfg: OptimConfig) -> torch.optim.Optimizer:
    """No learning rate (lr and warmup are not used); weight decay as given (0 by default: the blog's
    0.1 stalls the id model, benchmarks/results/adapsgd.md), gradients clipped at `clip`."""
    from .adapsgd import AdapSGD

    return AdapSGD(params, weight_decay=cfg.weight_decay, max_grad_norm=cfg.clip or None)


OPTIMIZERS = {"adamw": _adamw, "adapsgd": _adapsgd}


def make_optimizer(cfg: OptimConfig, params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
    return OPTIMIZERS[cfg.name](params, cfg)
