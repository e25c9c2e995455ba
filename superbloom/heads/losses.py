"""Label smoothing, written once: for the output heads (heads/superbloom.py, heads/full.py) and the
classifiers (textclass, setembed's softmax objective). Pure functions of tensors, tested against their
direct formula in tests/test_losses.py.

- `smoothed_cross_entropy`: cross-entropy with label smoothing (the blog's "Simple First: When 10K
  Parameters is All You Need", eps = 0.1) for a softmax classifier;
- `smoothed_nll`: the same smoothing from a target's -log p and the mean log-probability.

The set embeddings' own losses (alignment, uniformity, NCA) are setembed/losses.py.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


# ------------------------------------------------------------------------- label smoothing


def smoothed_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, eps: float = 0.1) -> torch.Tensor:
    """Mean cross-entropy against targets smoothed towards the uniform distribution:
    q = (1 - eps) * target + eps / C (torch's `label_smoothing` convention: the eps mass is spread
    over all C classes, the target's included; the blog spreads it over the other classes only,
    which is the same with eps' = eps * C / (C - 1)).

    logits (B, C); targets (B,) class ints, or (B, C) probabilities (a set with k labels: 1/k each)."""
    if not 0.0 <= eps < 1.0:
        raise ValueError(f"eps must be in [0, 1), got {eps}")
    logp = F.log_softmax(logits, dim=1)  # (B, C)
    if targets.dim() == 1:
        nll = -logp.gather(1, targets[:, None]).squeeze(1)  # (B,)
    else:
        nll = -(targets * logp).sum(1)  # (B,)
    return ((1.0 - eps) * nll - eps * logp.mean(1)).mean()


def smoothed_nll(nll: torch.Tensor, mean_logp: torch.Tensor, eps: float) -> torch.Tensor:
    """Label-smoothed cross-entropy from the target's -log p (nll) and the mean log-probability over
    the softmax's classes (mean_logp, same shape): (1 - eps) * nll - eps * mean_logp, i.e. the
    cross-entropy against (1 - eps) * one-hot + eps * uniform (torch's convention, as
    `smoothed_cross_entropy`). eps = 0: nll unchanged."""
    if not eps:
        return nll
    return (1 - eps) * nll - eps * mean_logp
