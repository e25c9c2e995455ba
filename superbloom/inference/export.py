"""The network of an id model for another runtime: its encoder and head scores as TorchScript; decoding
(Algorithm 1, exclusions, allow-lists, the hybrid's item-item term) stays in the library.

    path = model.export("model.ts")                     # export_network(model, "model.ts")
    net = torch.jit.load("model.ts")                    # in Python, or libtorch (C++), or any TorchScript host
    scores = net(*network_input(model, contexts))       # (Q, c) context ids, -1 padded -> the head's scores

Inputs, from `network_input` (the query batch of rank.py): tokens (B, T) int64 hashed tokens, pad
(B, T) bool (True: padding), positions (B, T) int64 (used by a model with learned positions), target
(B,) int64 the query element of each row. Output: the scores the head's decoding reads: the m per-map
log-probabilities (B, m, n_buckets) of the superbloom head (beam.decode_topk decodes them), or the
network's log p of every id (B, N) for a head that scores every id (full, hybrid: its network alone).

Why TorchScript and not ONNX: it needs nothing beyond torch (ONNX needs onnx, onnxscript and
onnxruntime: three packages, and an exporter that rewrites the attention kernel), it runs wherever
libtorch runs (C++, Java, mobile), and it keeps the fused attention, so the exported scores equal the
PyTorch ones (`check_export` measures the difference). torch 2.13 marks torch.jit deprecated in favour
of torch.export; a .pt2 or ONNX export is the successor, through this same Network module.
"""
from __future__ import annotations

import copy
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..model.sequence_batches import ordered_query_batch
from ..storage.guarded import claim


class Network(nn.Module):
    """An id model's encoder and head scores as one module of plain tensors (module docstring)."""

    def __init__(self, model, own: bool = False):
        super().__init__()
        if own:  # tensors of its own: a loaded model's weights are views of the memory-mapped checkpoint
            model = copy.deepcopy(model)
            for t in [*model.parameters(), *model.buffers()]:
                t.data = t.data.clone()
        self.model = model.eval()
        self.uses_positions = model.encoder.pos is not None

    def forward(self, tokens: torch.Tensor, pad: torch.Tensor, positions: torch.Tensor,
                target: torch.Tensor) -> torch.Tensor:
        h = self.model.encoder(tokens, pad, positions if self.uses_positions else None)  # (B, T, d)
        hidden = h.view(-1, self.model.encoder.m, h.shape[-1])[target]  # (B, m, d)
        return self.model.head.export_scores(hidden)


def network_input(predictor, contexts: np.ndarray) -> tuple[torch.Tensor, ...]:
    """(Q, c) context ids (-1 padded, oldest first) -> the exported network's inputs (tokens, pad,
    positions, target), as rank.py builds its query batch."""
    batch = ordered_query_batch(np.asarray(contexts, np.int64), predictor.hashing, predictor.model.encoder.cfg)
    positions = batch.positions if batch.positions is not None else torch.zeros_like(batch.tokens)
    return batch.tokens, batch.pad, positions, batch.target_elem


@torch.no_grad()
def export_network(predictor, out: str | Path, example: np.ndarray | None = None) -> Path:
    """The predictor's network traced to a TorchScript file at `out` (guarded writer: a new file or one
    of ours) and checked against PyTorch on `example` contexts (default: a few of its most frequent
    ids) -> the file. ValueError when the traced scores differ (check_export)."""
    target = claim(out, "exported-network")
    net = Network(predictor.model, own=True).eval()
    if example is None:
        n = len(predictor.vocab)
        example = np.asarray([[0, 1, 2], [3, -1, -1], [min(4, n - 1), min(5, n - 1), -1]], np.int64) % max(n, 1)
    inputs = network_input(predictor, example)
    with warnings.catch_warnings():  # the qkv split iterates over its fixed first axis of 3: a constant
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        traced = torch.jit.trace(net, inputs, check_trace=False)
    with target.writing() as tmp:
        traced.save(str(tmp))
    check_export(predictor, target.path, example)
    return target.path


@torch.no_grad()
def check_export(predictor, path: str | Path, contexts: np.ndarray, atol: float = 1e-5) -> float:
    """The largest absolute difference between the exported network's scores and the PyTorch model's on
    `contexts` (Q, c); ValueError above `atol`."""
    net = torch.jit.load(str(path))
    inputs = network_input(predictor, contexts)
    want = Network(predictor.model)(*inputs)
    got = net(*inputs)
    if got.shape != want.shape:
        raise ValueError(f"{path}: exported scores of shape {tuple(got.shape)}, expected {tuple(want.shape)}")
    finite = torch.isfinite(want)
    diff = float((got[finite] - want[finite]).abs().max()) if finite.any() else 0.0
    if diff > atol or not torch.equal(torch.isfinite(got), finite):
        raise ValueError(f"{path}: the exported scores differ from the model's by {diff:.3g} (> {atol:g})")
    return diff
