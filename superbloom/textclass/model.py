"""A small text classifier: words -> embedding -> one attention layer -> mean pool -> linear classes.

The model of the blog post "It is Important to Use Your Heads" (its heads study): "the
network consists of the embedding layer and a single attention layer, plus a linear output layer
to predict the classes", trained with label smoothing and gradient clipping and AdapSGD, "no other
tuning or regularization". Here:

    words (B, T) --input embedding--> (B, T, d) --Attention (model.py: softmax or the blog's
    kernelized attention, H heads)--> (B, T, d) --mean over the real words--> (B, d)
    --Linear--> (B, C) logits;  loss = label-smoothed cross-entropy (losses.py)

Input embeddings (`TextClassConfig.embedding`):
  dynamic  the blog's dynamic word embedding (dynamic.py): word -> MD5 -> 64 trits -> a learned
           64 x d projection. Nothing is out of vocabulary; 64 * d parameters whatever the vocabulary.
  table    one learned row per word of a vocabulary (the training words), row 0 for every unknown
           word: (V + 1) * d parameters.

Heads cost no parameters: the attention's projections are (d, 3d) and (d, d) whatever H; heads
only reshape q, k, v into H subspaces of d / H dims (the blog: "multiple heads are implemented by
reshaping tensors, a higher number does not introduce additional parameters"; d = 100 and
H in {1, 5, 10, 20, 50} gives subspaces of 100, 20, 10, 5 and 2 dims). The pool is the blog's
unstated part: a parameter-free mean over the non-padded positions (padding cannot change it:
its keys are masked in attention and its rows are left out of the mean). There is no residual
path around the attention and no feed-forward block, as in the blog's "single attention layer".

Kernelized attention is "kernel-auto" by default: the same quadratic kernel as "kernel", in its
O(T^2 dh) explicit form when that is cheaper (kernel_attention.py). With one head of d = 100 the
linear form has F = 10,101 features per position and took 11 s per step at T = 256 (batch 32).

The files: model.py (this network), batches.py (padded batches), loss.py (the training loss and the
held-out figures), train.py (fit_classifier in memory, train_textclass as a run), folder.py (the
model directory: save_classifier, load_classifier).

Reused, not rewritten: model.Attention (both attentions, padding masked exactly),
losses.smoothed_cross_entropy, dynamic.DynamicEmbedding, and loop.fit (one loop for every
trainer: AdamW with its warm-up schedule and clipping, or AdapSGD with its Hessian steps).

    model = TextClassifier(TextClassConfig(d=100, heads=10), n_classes=15)
    history = fit_classifier(model, docs, train_rows, TrainTextConfig(epochs=5), eval_rows=test_rows)
    model.predict([["the", "jazz", "musician"]])   # -> (1, 15) probabilities; any word embeds

    out = train_textclass(TextClassRunConfig(out="runs/tc", wikispeedia="../shared/data/wikispeedia"))
    model, labels, config = load_classifier(out)

Both train the same Objective (textclass_objective) with loop.fit: fit_classifier in memory
(benchmarks/heads_study.py), train_textclass (what `superbloom textclass-train` calls) as a run
like every trainer's (rundir.py: overwrite / resume policy, config.json with its resume history,
checkpoints, BEST, LATEST and metrics.jsonl).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn as nn

from ..model.dynamic import DynamicEmbedding, trits
from ..model.encoder import Attention, count_parameters
from .config import TextClassConfig


class TextClassifier(nn.Module):
    """Words -> class logits. `vocab`: the table embedding's words (ignored by the dynamic one)."""

    def __init__(self, cfg: TextClassConfig, n_classes: int, vocab: Sequence[str] = ()):
        super().__init__()
        if n_classes < 2:
            raise ValueError(f"a classifier needs >= 2 classes, got {n_classes}")
        self.cfg, self.n_classes = cfg, n_classes
        self.vocab: dict[str, int] = {}
        if cfg.embedding == "table":
            if not len(vocab):
                raise ValueError("the table embedding needs its vocabulary (the training words)")
            self.vocab = {w: i + 1 for i, w in enumerate(dict.fromkeys(vocab))}  # row 0: unknown words
            self.embed = nn.Embedding(len(self.vocab) + 1, cfg.d)  # N(0, 1) rows, the dynamic one's scale
        else:
            self.embed = DynamicEmbedding(cfg.d)
        self.drop = nn.Dropout(cfg.dropout)
        self.attn = Attention(cfg.d, cfg.heads, 0.0, cfg.attention)
        self.classifier = nn.Linear(cfg.d, n_classes)

    @property
    def n_parameters(self) -> int:
        return count_parameters(self)

    def inputs(self, words: Sequence[str]) -> torch.Tensor:
        """Word strings (N,) -> the model's input for each: table rows (N,) int64 (0: not in the
        vocabulary) or trits (N, 64) float. Index it with word ids to build a batch."""
        if self.cfg.embedding == "table":
            return torch.tensor([self.vocab.get(w, 0) for w in words], dtype=torch.int64)
        return torch.from_numpy(trits(list(words))).float()

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        """x (B, T) table rows or (B, T, 64) trits, pad (B, T) bool (True = padding) -> (B, C) logits."""
        e = self.drop(self.embed(x))  # (B, T, d)
        h = self.attn(e, ~pad[:, None, None, :])  # (B, T, d); padded keys get no weight
        real = (~pad)[..., None].to(h.dtype)  # (B, T, 1)
        pooled = (h * real).sum(1) / real.sum(1).clamp_min(1.0)  # (B, d)
        return self.classifier(pooled)

    @torch.no_grad()
    def predict(self, docs: Sequence[Sequence[str]]) -> np.ndarray:
        """Documents as lists of words (any words) -> (B, C) class probabilities, in eval mode."""
        if any(len(d) == 0 for d in docs):
            raise ValueError("every document needs at least one word")
        words = list(dict.fromkeys(w for d in docs for w in d))
        index = {w: i for i, w in enumerate(words)}
        table = self.inputs(words)
        t = max(len(d) for d in docs)
        ids = torch.tensor([[index[w] for w in d] + [0] * (t - len(d)) for d in docs])  # (B, T)
        pad = torch.tensor([[False] * len(d) + [True] * (t - len(d)) for d in docs])
        was = self.training
        self.eval()
        device = self.classifier.weight.device
        p = torch.softmax(self(table[ids].to(device), pad.to(device)), dim=1).cpu().numpy()
        self.train(was)
        return p
