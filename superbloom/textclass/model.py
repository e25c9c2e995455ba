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

import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn as nn
from safetensors.torch import load_file, save_file

from ..model.device import init_distributed, resolve_device
from ..model.dynamic import DynamicEmbedding, trits
from ..storage.files import atomic_path, load_json, read_lines, save_json, write_lines
from ..storage.loading import check_safetensors, expect_kind, read_config, typed_section
from ..training.callbacks import Callback
from ..training.card import write_card
from ..training.loop import LoopConfig, fit
from ..heads.losses import smoothed_cross_entropy
from ..model.encoder import Attention, count_parameters
from ..training.objectives import Objective
from ..training.rundir import (attempt, check_out, config_changes, continue_run, open_run, portable, refuse_changes,
                               read_saved, resume_point, versions)
from .docs import LabelledDocs, label_table, load_wikispeedia, read_labelled, split_rows
from .config import EMBEDDINGS, TextClassConfig, TextClassRunConfig, TrainTextConfig  # noqa: F401 (re-exported)

log = logging.getLogger(__name__)


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


def fit_classifier(model: TextClassifier, docs: LabelledDocs, train_rows: np.ndarray, cfg: TrainTextConfig,
                   eval_rows: np.ndarray | None = None, on_epoch: Callable[[dict], None] | None = None,
                   device=None) -> list[dict]:
    """Train in memory for cfg.epochs passes over train_rows: the steps of train_textclass (loop.fit on
    textclass_objective, its checkpoints in a temporary folder that is removed) -> one record per epoch
    (textclass_objective's)."""
    import tempfile

    from ..model.device import Dist

    steps_per_epoch = -(-len(train_rows) // cfg.batch_size)
    steps = cfg.epochs * steps_per_epoch
    loop = LoopConfig(batch_size=cfg.batch_size, steps=min(steps, cfg.steps or steps), eval_every=steps_per_epoch,
                      keep_best=False, checkpoint_every=1e9, seed=cfg.seed, ema=0.0)
    history: list[dict] = []
    obj = textclass_objective(model, docs, train_rows, eval_rows, cfg, history, on_epoch)
    with tempfile.TemporaryDirectory(prefix="sb-textclass-") as tmp:
        fit(obj, loop, cfg.optim, Path(tmp), Dist(0, 1, model.classifier.weight.device if device is None else device),
            progress=False)
    return history


# ------------------------------------------------------------------------------ a training run


# settings a resumed run must keep: the model, its documents and their split, the epochs' batches
ARCHITECTURE = ("corpus", "labels", "wikispeedia", "model", "max_words", "test_fraction", "train.seed",
                "train.batch_size")


def load_docs(cfg: TextClassRunConfig) -> LabelledDocs:
    """The run's labelled documents (text/labelled.py), >= 2 labels."""
    docs = (load_wikispeedia(cfg.wikispeedia, cfg.max_words) if cfg.wikispeedia
            else read_labelled(list(cfg.corpus), label_table(cfg.labels), cfg.max_words))
    if len(docs.label_names) < 2:
        raise ValueError(f"the documents have {len(docs.label_names)} label(s); a classifier needs >= 2")
    return docs


def textclass_objective(model: TextClassifier, docs: LabelledDocs, train_rows: np.ndarray,
                        eval_rows: np.ndarray | None, cfg: TrainTextConfig, history: list[dict],
                        on_epoch: Callable[[dict], None] | None = None) -> Objective:
    """The Objective loop.fit trains: epoch e (from 0) is a shuffle seeded by (cfg.seed, e + 1), in
    batches of cfg.batch_size; validated at the end of every epoch (fit's eval_every = the epoch's
    steps), which appends the epoch's record (mean training loss and errors *during* the epoch, the
    blog's "errors=868 of 1024", steps, seconds, and the held-out `eval`) to `history` and scores the
    held-out accuracy that picks BEST (the
    training accuracy during the epoch without held-out documents). After a resume in the middle of
    an epoch that epoch's record covers the steps since the resume."""
    train_rows = np.asarray(train_rows, np.int64)
    device = model.classifier.weight.device
    inputs = model.inputs(docs.words)  # (V,) or (V, 64)
    loss_mod = ClassifierLoss(model)
    current = {"epoch": 0, "t0": time.perf_counter(), "last": None}

    def epoch(e: int) -> list[np.ndarray]:  # a function of (seed, epoch) only
        current.update(epoch=e + 1, t0=time.perf_counter())
        loss_mod.tally.update(loss=0.0, errors=0, examples=0, steps=0)
        order = np.random.default_rng([cfg.seed, 15, e + 1]).permutation(train_rows)
        return [order[a:a + cfg.batch_size] for a in range(0, len(order), cfg.batch_size)]

    def batch(rows: np.ndarray, rng: np.random.Generator) -> TextBatch:
        return text_batch(docs, rows, inputs).to(device)

    def validate() -> dict:
        t = loss_mod.tally
        held = eval_rows is not None and len(eval_rows)
        if t["steps"]:  # the end of an epoch: its record
            seconds = time.perf_counter() - current["t0"]
            rec = {"epoch": current["epoch"], "loss": t["loss"] / t["examples"], "errors": t["errors"],
                   "examples": t["examples"], "steps": t["steps"], "seconds": round(seconds, 2),
                   "seconds_per_step": seconds / t["steps"]}
            if held:
                rec["eval"] = evaluate(model, docs, np.asarray(eval_rows, np.int64), inputs)
            t.update(steps=0)
            history.append(rec)
            if on_epoch is not None:
                on_epoch(rec)
            current["last"] = ({"accuracy": rec["eval"]["accuracy"], "loss": rec["eval"]["loss"]} if held else
                               {"train_accuracy": 1 - rec["errors"] / rec["examples"], "train_loss": rec["loss"]})
        elif current["last"] is None:  # no step in this process (a resume of a finished run)
            ev = evaluate(model, docs, np.asarray(eval_rows, np.int64), inputs) if held else None
            # without held-out documents nothing was measured: 0 never replaces the BEST kept
            current["last"] = ({"accuracy": ev["accuracy"], "loss": ev["loss"]} if held else
                               {"train_accuracy": 0.0, "train_loss": 0.0})
        return current["last"]  # fit's final validation after an epoch's: the same figures

    select = "accuracy" if eval_rows is not None and len(eval_rows) else "train_accuracy"
    return Objective(loss_mod, len(train_rows), epoch, batch, validate, select)


def show_epoch(r: dict) -> None:
    """The figures printed after each epoch."""
    acc = f", test accuracy {100 * r['eval']['accuracy']:.1f}%" if "eval" in r else ""
    log.info(f"epoch {r['epoch']}: loss {r['loss']:.4f}, training errors {r['errors']} of {r['examples']}{acc} "
             f"({r['seconds']} s)")


def memory_parts(cfg: TextClassConfig, n_classes: int, n_vocab: int, n_words: int, lengths: np.ndarray,
                 batch_size: int) -> dict[str, int]:
    """Bytes a textclass-train run allocates at least, by the flag that drives each part (float32):

    - parameters and their gradients: the embedding (table: (n_vocab + 1) x d rows; dynamic: 64 x d) and
      the classifier (d x n_classes), twice (the optimizer's state on top is not counted);
    - a batch's activations kept for the backward pass: the embedded words and the attention's output,
      (B, T, d) each, B = min(batch_size, training documents) and T at least the B-th shortest training
      document (a batch pads to its longest), plus the dynamic embedding's (B, T, 64) trits;
    - the word inputs: the dynamic embedding's (n_words, 64) trits of every word read.
    `lengths` (training documents,) words each. A lower bound: a refusal is never wrong about a run that fits."""
    d = cfg.d
    table = (n_vocab + 1) * d if cfg.embedding == "table" else 64 * d
    params = 4 * 2 * (table + d * n_classes + n_classes)
    b = min(batch_size, len(lengths))
    t = int(np.partition(lengths, b - 1)[b - 1]) if b else 0
    acts = 4 * b * t * (2 * d + (64 if cfg.embedding == "dynamic" else 0))
    words = 4 * 64 * n_words if cfg.embedding == "dynamic" else 8 * n_words
    return {"--d": params, "--batch-size": acts, "word inputs (--max-words)": words}


def train_textclass(cfg: TextClassRunConfig, progress: bool = False, resume: bool = False,
                    overwrite: bool = False, callbacks: Sequence[Callback] = (),
                    memory_check: Callable[[dict[str, int]], None] | None = None) -> Path:
    """Train a text classifier -> its model directory, in the run skeleton every trainer shares
    (rundir.py: cfg.out may hold a model only with resume or overwrite; resume continues the newest
    complete checkpoint, bit for bit, and records the settings it changes) on loop.fit: the same
    steps, and the same weights, as fit_classifier with these settings. The directory:

        OUT/config.json         "textclass", "labels", "parameters", "train" (this config), "history"
                                (one record per epoch), "data", "max_words", "seed", "test_fraction", "optim"
        OUT/model.safetensors   the final weights, which load_classifier reads; vocab.txt (table embedding)
        OUT/checkpoints/, LATEST, BEST (the best held-out accuracy), metrics.jsonl     written by loop.fit

    `callbacks`: where the metrics.jsonl records go too (training/callbacks.py). `memory_check`: called with
    memory_parts(...) once the documents are read, before the model is built or anything is written (the
    CLI refuses a run larger than the machine there: cli/checks.refuse_over_memory).
    """
    d = init_distributed(cfg.train.device)
    out = check_out(cfg.out, "text-classifier")
    if not overwrite and (out / "model.safetensors").exists() and not (out / "LATEST").exists():
        raise ValueError(f"{out} already holds a model (without checkpoints to resume); pass --overwrite to "
                         "replace it")  # save_classifier's directory, or an older textclass-train's
    ckpt = resume_point(out, resume, overwrite, d.main)
    saved, changed = None, []
    if ckpt is not None:
        saved = read_saved(out, ("train",))  # one line naming config.json if it is broken
        arch, changed = config_changes(saved["train"], cfg.to_dict(), ARCHITECTURE)
        refuse_changes(arch, "the model or its documents", out)
    docs = load_docs(cfg)
    seed = cfg.train.seed
    train, _, test = split_rows(len(docs), (1 - cfg.test_fraction, 0.0, cfg.test_fraction), seed)
    if len(train) == 0:  # before any work: no batch, no vocabulary, no step
        raise ValueError(f"--test-fraction {cfg.test_fraction}: no training document is left of {len(docs):,} "
                         f"(at most {1 - 1 / max(len(docs), 1):.3g} for this corpus)")
    vocab = np.unique(docs.ids[np.repeat(np.isin(np.arange(len(docs)), train), docs.lengths)])
    if memory_check is not None:  # before any allocation the flags drive
        memory_check(memory_parts(cfg.model, len(docs.label_names), len(vocab), len(docs.words),
                                  docs.lengths[train], cfg.train.batch_size))
    if d.main:
        log.info(f"{len(docs):,} documents ({len(train):,} train, {len(test):,} test), {len(docs.label_names)} labels, "
                 f"{docs.stats['multi_label']} with several labels (the first is used)")
    torch.manual_seed(seed)
    model = TextClassifier(cfg.model, len(docs.label_names), vocab=list(docs.words[vocab])).to(d.device)
    steps_per_epoch = -(-len(train) // cfg.train.batch_size)
    steps = cfg.train.epochs * steps_per_epoch
    loop = LoopConfig(batch_size=cfg.train.batch_size, steps=min(steps, cfg.train.steps or steps),
                      eval_every=steps_per_epoch, keep_best=cfg.keep_best, checkpoint_every=cfg.checkpoint_every,
                      seed=seed, device=cfg.train.device, ema=0.0)  # no average: the weights as trained
    extra = {"kind": "text-classifier", "versions": versions(), "max_words": cfg.max_words, "data": docs.stats, "seed": seed,
             "test_fraction": cfg.test_fraction,
             "optim": asdict(cfg.train.optim), "train": portable(cfg.to_dict())}
    run = open_run(out, ckpt, "text-classifier", at_end=True)  # replaces OUT with its final weights
    if ckpt is None:
        save_classifier(model, run.path, docs.label_names, dict(extra, history=[]), weights=False)
    else:
        continue_run(out, ckpt, saved, "train", cfg.to_dict(), changed, d.main)
    history: list[dict] = []
    obj = textclass_objective(model, docs, train, test if len(test) else None, cfg.train, history, show_epoch)
    with attempt(run, d.main):
        fit(obj, loop, cfg.train.optim, run, d, ckpt, progress, callbacks)
        config = load_json(run.path / "config.json")
        done = [h for h in config.get("history", []) if not history or h["epoch"] < history[0]["epoch"]]
        save_classifier(model, run.path, docs.label_names, dict(config, **extra, history=done + history))
        run.finish()
    write_card(out)  # README.md: the model card (training/card.py)
    if d.main and cfg.keep_best:
        log.info(f"{out / 'model.safetensors'} holds the last weights, which load_classifier and "
                 "`superbloom textclass` read; BEST names the checkpoint with the best held-out accuracy")
    return out


# ------------------------------------------------------------------------------ model directories
#
#   DIR/config.json        "textclass" (TextClassConfig), "labels" (class names), plus what the trainer adds
#   DIR/model.safetensors  the weights
#   DIR/vocab.txt          the table embedding's words, row 1 first (absent for the dynamic embedding)


def save_classifier(model: TextClassifier, out: str | Path, label_names: Sequence[str], extra: dict | None = None,
                    weights: bool = True) -> Path:
    """Write a model directory that `load_classifier` rebuilds the model from (weights=False: its
    config files only, as a run starts)."""
    if len(label_names) != model.n_classes:
        raise ValueError(f"{len(label_names)} label names for a model of {model.n_classes} classes")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if weights:
        with atomic_path(out / "model.safetensors") as tmp:  # a kill never leaves half the weights
            save_file({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}, str(tmp))
    if model.cfg.embedding == "table":
        write_lines(out / "vocab.txt", model.vocab)
    own = {"textclass": asdict(model.cfg), "labels": list(label_names), "parameters": model.n_parameters}
    save_json(out / "config.json", {**own, **{k: v for k, v in (extra or {}).items() if k not in own}})
    return out


def load_classifier(model_dir: str | Path, device: str = "cpu") -> tuple[TextClassifier, list[str], dict]:
    """A directory of `save_classifier` -> (model in eval mode on `device`, class names, its config.json)."""
    model_dir = expect_kind(model_dir, "text-classifier")  # the complete one a kill during its swap left, if need be
    if not (model_dir / "config.json").is_file() or not (model_dir / "model.safetensors").is_file():
        raise FileNotFoundError(f"{model_dir}: not a text classifier directory (needs config.json and "
                                "model.safetensors, written by `superbloom textclass-train`)")
    config = read_config(model_dir, {})
    if "textclass" not in config:
        raise ValueError(f"{model_dir}/config.json has no 'textclass' section: not a text classifier")
    config = read_config(model_dir, {"textclass": dict, "labels": list})
    check_safetensors(model_dir / "model.safetensors", "the classifier's weights")
    cfg = typed_section(model_dir / "config.json", config, "textclass", TextClassConfig)
    vocab = read_lines(model_dir / "vocab.txt") if cfg.embedding == "table" else ()
    model = TextClassifier(cfg, len(config["labels"]), vocab=vocab)
    model.load_state_dict(load_file(str(model_dir / "model.safetensors")))
    return model.eval().to(resolve_device(device)), list(config["labels"]), config
