"""Losses as pure functions of tensors, shared by the heads and the objectives that use them.

    smoothed_nll   label smoothing (Szegedy et al. 2016; the blog's 0.1): cross-entropy against
                   (1 - eps) * one-hot + eps * uniform over the classes of a softmax
"""
from __future__ import annotations

import torch


def smoothed_nll(nll: torch.Tensor, mean_logp: torch.Tensor, eps: float) -> torch.Tensor:
    """Label-smoothed cross-entropy from the target's -log p (nll) and the mean log-probability over
    the softmax's classes (mean_logp, same shape): (1 - eps) * nll - eps * mean_logp. eps = 0: nll."""
    if not eps:
        return nll
    return (1 - eps) * nll - eps * mean_logp
