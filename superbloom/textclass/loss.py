"""The text classifier's training loss (label-smoothed cross-entropy, with the epoch's running figures)
and its held-out figures (accuracy, errors, mean loss)."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from ..heads.losses import smoothed_cross_entropy
from .batches import TextBatch, text_batch
from .docs import LabelledDocs
from .model import TextClassifier


class ClassifierLoss(nn.Module):
    """train_step's model: forward(batch) -> the smoothed loss; keeps the batch's errors and, in
    training mode, the running totals of the epoch (`tally`: loss x examples, errors, examples, steps)."""

    def __init__(self, net: TextClassifier):
        super().__init__()
        self.net = net
        self.errors = 0
        self.tally = {"loss": 0.0, "errors": 0, "examples": 0, "steps": 0}

    def forward(self, batch: TextBatch) -> torch.Tensor:
        logits = self.net(batch.x, batch.pad)  # (B, C)
        self.errors = int((logits.detach().argmax(1) != batch.y).sum())
        loss = smoothed_cross_entropy(logits, batch.y, self.net.cfg.smoothing)
        if self.training:  # the epoch's running figures (textclass_objective's record)
            t = self.tally
            t["loss"] += float(loss.detach()) * len(batch.y)
            t["errors"] += self.errors
            t["examples"] += len(batch.y)
            t["steps"] += 1
        return loss


@torch.no_grad()
def evaluate(model: TextClassifier, docs: LabelledDocs, rows: np.ndarray, inputs: torch.Tensor | None = None,
             batch_size: int = 128) -> dict:
    """Accuracy, errors and mean (smoothed) loss on `rows`, in eval mode."""
    inputs = model.inputs(docs.words) if inputs is None else inputs
    was = model.training
    model.eval()
    device = model.classifier.weight.device
    errors, loss = 0, 0.0
    for a in range(0, len(rows), batch_size):
        b = text_batch(docs, rows[a:a + batch_size], inputs).to(device)
        logits = model(b.x, b.pad)
        errors += int((logits.argmax(1) != b.y).sum())
        loss += float(smoothed_cross_entropy(logits, b.y, model.cfg.smoothing)) * len(b.y)
    model.train(was)
    n = max(1, len(rows))
    return {"accuracy": 1 - errors / n, "errors": errors, "examples": len(rows), "loss": loss / n}
