"""A small text classifier: words -> embedding -> one attention layer -> mean pool -> linear classes.

The model of the blog post "It is Important to Use Your Heads" (its heads study; issue 15): "the
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

Reused, not rewritten: model.Attention (both attentions, padding masked exactly),
losses.smoothed_cross_entropy, dynamic.DynamicEmbedding, and train.train_step (one optimizer
step for every optimizer: AdamW with its warm-up schedule and clipping, or AdapSGD with its
Hessian steps, clipping at 1 inside the optimizer).

    model = TextClassifier(TextClassConfig(d=100, heads=10), n_classes=15)
    history = train_classifier(model, docs, train_rows, TrainTextConfig(epochs=5), eval_rows=test_rows)
    model.predict([["the", "jazz", "musician"]])   # -> (1, 15) probabilities; any word embeds
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn as nn
from safetensors.torch import load_file, save_file

from .dynamic import DynamicEmbedding, trits
from .files import load_json, read_lines, save_json, write_lines
from .kernel_attention import ATTENTIONS
from .losses import smoothed_cross_entropy
from .model import Attention, count_parameters
from .optim import OptimConfig, make_optimizer
from .text.labelled import LabelledDocs
from .loop import train_step

EMBEDDINGS = ("dynamic", "table")


@dataclass(frozen=True)
class TextClassConfig:
    d: int = 100  # embedding size (the blog's 100)
    heads: int = 10  # attention heads; must divide d (no parameters depend on it)
    attention: str = "kernel-auto"  # the blog's kernel (kernel_attention.py; -auto: its cheaper form) | softmax
    embedding: str = "dynamic"  # dynamic (64 * d parameters) | table ((V + 1) * d)
    smoothing: float = 0.1  # label smoothing of the loss
    dropout: float = 0.0  # on the input embeddings (the blog: none)

    def __post_init__(self):
        if self.d < 1 or self.heads < 1:
            raise ValueError(f"d and heads must be >= 1, got d={self.d}, heads={self.heads}")
        if self.d % self.heads:
            divisors = [h for h in range(1, self.d + 1) if self.d % h == 0]
            raise ValueError(f"heads={self.heads} must divide d={self.d} (heads split d into equal subspaces; "
                             f"choose one of {divisors})")
        if self.attention not in ATTENTIONS:
            raise ValueError(f"attention must be one of {sorted(ATTENTIONS)}, got {self.attention!r}")
        if self.embedding not in EMBEDDINGS:
            raise ValueError(f"embedding must be one of {EMBEDDINGS}, got {self.embedding!r}")
        if not 0.0 <= self.smoothing < 1.0 or not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"smoothing and dropout must be in [0, 1), got {self.smoothing}, {self.dropout}")


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


class ClassifierLoss(nn.Module):
    """train_step's model: forward(batch) -> the smoothed loss; keeps the batch's errors."""

    def __init__(self, net: TextClassifier):
        super().__init__()
        self.net = net
        self.errors = 0

    def forward(self, batch: TextBatch) -> torch.Tensor:
        logits = self.net(batch.x, batch.pad)  # (B, C)
        self.errors = int((logits.detach().argmax(1) != batch.y).sum())
        return smoothed_cross_entropy(logits, batch.y, self.net.cfg.smoothing)


@dataclass(frozen=True)
class TrainTextConfig:
    epochs: int = 5
    batch_size: int = 32
    seed: int = 0
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(name="adapsgd"))  # clip 1, no lr
    threads: int = 0  # torch CPU threads (0: leave as is)

    def __post_init__(self):
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(f"epochs and batch_size must be >= 1, got {self.epochs}, {self.batch_size}")


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


def train_classifier(model: TextClassifier, docs: LabelledDocs, train_rows: np.ndarray, cfg: TrainTextConfig,
                     eval_rows: np.ndarray | None = None,
                     on_epoch: Callable[[dict], None] | None = None) -> list[dict]:
    """Train for cfg.epochs passes over train_rows (seeded shuffles). -> one record per epoch: the
    mean training loss and the training errors *during* the epoch (the blog's "errors=868 of 1024"),
    steps, seconds, seconds per step, and the accuracy on eval_rows after the epoch if given."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    train_rows = np.asarray(train_rows, np.int64)
    device = model.classifier.weight.device
    inputs = model.inputs(docs.words)  # (V,) or (V, 64)
    loss_mod = ClassifierLoss(model)
    opt = make_optimizer(cfg.optim, model.parameters())
    model.train()
    step, history = 0, []
    for epoch in range(1, cfg.epochs + 1):
        order = np.random.default_rng([cfg.seed, 15, epoch]).permutation(train_rows)
        t0, total, errors = time.perf_counter(), 0.0, 0
        n_steps = 0
        for a in range(0, len(order), cfg.batch_size):
            rows = order[a:a + cfg.batch_size]
            step += 1
            n_steps += 1
            loss, _, _ = train_step(loss_mod, loss_mod, opt, text_batch(docs, rows, inputs).to(device), cfg.optim,
                                    step)
            total += loss * len(rows)
            errors += loss_mod.errors
        seconds = time.perf_counter() - t0
        rec = {"epoch": epoch, "loss": total / len(order), "errors": errors, "examples": len(order),
               "steps": n_steps, "seconds": round(seconds, 2), "seconds_per_step": seconds / n_steps}
        if eval_rows is not None and len(eval_rows):
            rec["eval"] = evaluate(model, docs, np.asarray(eval_rows, np.int64), inputs)
        history.append(rec)
        if on_epoch is not None:
            on_epoch(rec)
    return history


# ------------------------------------------------------------------------------ model directories
#
#   DIR/config.json        "textclass" (TextClassConfig), "labels" (class names), plus what the trainer adds
#   DIR/model.safetensors  the weights
#   DIR/vocab.txt          the table embedding's words, row 1 first (absent for the dynamic embedding)


def save_classifier(model: TextClassifier, out: str | Path, label_names: Sequence[str], extra: dict | None = None) -> Path:
    """Write a model directory that `load_classifier` rebuilds the model from."""
    if len(label_names) != model.n_classes:
        raise ValueError(f"{len(label_names)} label names for a model of {model.n_classes} classes")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}, str(out / "model.safetensors"))
    if model.cfg.embedding == "table":
        write_lines(out / "vocab.txt", model.vocab)
    save_json(out / "config.json", {"textclass": asdict(model.cfg), "labels": list(label_names),
                                    "parameters": model.n_parameters, **(extra or {})})
    return out


def load_classifier(model_dir: str | Path) -> tuple[TextClassifier, list[str], dict]:
    """A directory of `save_classifier` -> (model in eval mode, class names, its config.json)."""
    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file() or not (model_dir / "model.safetensors").is_file():
        raise FileNotFoundError(f"{model_dir}: not a text classifier directory (needs config.json and "
                                "model.safetensors, written by `superbloom textclass-train`)")
    config = load_json(model_dir / "config.json")
    if "textclass" not in config:
        raise ValueError(f"{model_dir}/config.json has no 'textclass' section: not a text classifier")
    cfg = TextClassConfig(**config["textclass"])
    vocab = read_lines(model_dir / "vocab.txt") if cfg.embedding == "table" else ()
    model = TextClassifier(cfg, len(config["labels"]), vocab=vocab)
    model.load_state_dict(load_file(str(model_dir / "model.safetensors")))
    return model.eval(), list(config["labels"]), config
