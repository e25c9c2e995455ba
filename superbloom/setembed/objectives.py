"""The set embedding's objectives, one registry entry each: the loss, batches and model parts.

An entry says everything generic code asks of an objective, so that model.py, train.py and
embedder.py never test an objective's name:

  supervised  it learns from labelled sets only (a labels file is required; config.SUPERVISED)
  views       its batches are two views of each set (train.views_batch), else segments of labelled
              sets (train.labelled_batch)
  classifier  the model carries a linear classifier on the set vector (SetEmbedder.classifier)
  bank        the model carries a memory bank of every training set's vector (SetEmbedder.bank),
              which the loss updates
  select      the validation score that picks BEST (None: kNN precision@10 where labels are given,
              else the negated validation loss)
  loss        (SetEmbedder, batch) -> scalar; the losses themselves are pure functions in
              losses.py (label smoothing: heads/losses.py)

The names, without torch, are config.OBJECTIVES (what `embed-train --help` shows); a test checks that
they are this registry's keys, in order, and that config.SUPERVISED are the entries with labels.
A new objective is one `register(EmbedObjective(...))` here and its name in config.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist

from ..heads.losses import smoothed_cross_entropy
from .losses import alignment, nca_loss, uniformity


@dataclass(frozen=True)
class EmbedObjective:
    name: str
    loss: Callable  # (SetEmbedder, batch) -> scalar tensor
    supervised: bool = False  # learns from labelled sets only (a labels file is required)
    views: bool = False
    classifier: bool = False
    bank: bool = False
    select: str | None = None


REGISTRY: dict[str, EmbedObjective] = {}


def register(entry: EmbedObjective) -> EmbedObjective:
    if entry.name in REGISTRY:
        raise ValueError(f"set-embedding objective {entry.name!r} is already registered")
    REGISTRY[entry.name] = entry
    return entry


def objective(name: str) -> EmbedObjective:
    """The registry's entry for `name`; ValueError naming the objectives there are."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown set-embedding objective {name!r}; expected one of {', '.join(REGISTRY)}") from None


def _uniformity(model, batch) -> torch.Tensor:
    """Alignment of the two views + weight x the mean of their uniformity (Wang & Isola 2020)."""
    cfg = model.cfg
    zl, zr = model.embed(batch.left, batch.left_pad), model.embed(batch.right, batch.right_pad)  # (B, d) each
    u = 0.5 * (uniformity(zl, cfg.uniformity_t) + uniformity(zr, cfg.uniformity_t))
    return alignment(zl, zr) + cfg.uniformity_weight * u


def _nca(model, batch) -> torch.Tensor:
    """NCA against the memory bank (Wu et al. 2018), then the bank's queued update with this batch's
    vectors (every rank's rows under torchrun)."""
    z = model.embed(batch.tokens, batch.pad)  # (B, d)
    loss = nca_loss(z, batch.labels, model.bank, batch.index, model.cfg.temperature)
    index, new = batch.index, z.detach()
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        idx_all = [torch.empty_like(index) for _ in range(dist.get_world_size())]
        z_all = [torch.empty_like(new) for _ in range(dist.get_world_size())]
        dist.all_gather(idx_all, index)
        dist.all_gather(z_all, new)
        index, new = torch.cat(idx_all), torch.cat(z_all)
    model.bank.update(index, new)  # applied before the next read (losses.MemoryBank)
    return loss


def _softmax(model, batch) -> torch.Tensor:
    """Label-smoothed cross-entropy of the classifier; a set with k labels has target 1/k on each."""
    y = batch.labels.float()  # (B, L)
    z = model.embed(batch.tokens, batch.pad)
    return smoothed_cross_entropy(model.logits(z), y / y.sum(1, keepdim=True).clamp_min(1.0), model.cfg.smoothing)


register(EmbedObjective("uniformity", _uniformity, views=True))
register(EmbedObjective("nca", _nca, supervised=True, bank=True, select="knn_accuracy"))
register(EmbedObjective("softmax", _softmax, supervised=True, classifier=True, select="accuracy"))
