"""Padded batches of labelled documents for the text classifier: the words' inputs gathered by id."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .docs import LabelledDocs



@dataclass
class TextBatch:
    x: torch.Tensor  # (B, T) rows or (B, T, 64) trits
    pad: torch.Tensor  # (B, T) bool
    y: torch.Tensor  # (B,) int64

    def to(self, device) -> "TextBatch":
        return TextBatch(self.x.to(device), self.pad.to(device), self.y.to(device))


def text_batch(docs: LabelledDocs, rows: np.ndarray, inputs: torch.Tensor) -> TextBatch:
    """rows (B,) of docs -> a padded batch; `inputs` = model.inputs(docs.words)."""
    ids, pad = docs.padded(rows)
    return TextBatch(inputs[torch.from_numpy(ids)], torch.from_numpy(pad), torch.from_numpy(docs.labels[rows]))
