"""Training the text classifier: one Objective (textclass_objective) on loop.fit, in memory
(fit_classifier) or as a run like every trainer's (train_textclass: rundir.py's overwrite / resume
policy, config.json with its resume history, checkpoints, BEST, LATEST and metrics.jsonl).

    history = fit_classifier(model, docs, train_rows, TrainTextConfig(epochs=5), eval_rows=test_rows)
    out = train_textclass(TextClassRunConfig(out="runs/tc", wikispeedia="../shared/data/wikispeedia"))
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from ..model.device import init_distributed
from ..heads.base import Validation
from ..storage.files import load_json
from ..storage.guarded import one_writer
from ..training.callbacks import Callback
from ..training.loop import LoopConfig, fit
from ..training.objectives import Objective
from ..training.run import fit_run
from ..training.rundir import (check_out, config_changes, continue_run, open_run, portable, refuse_changes,
                               read_saved, resume_point, versions)
from .batches import TextBatch, text_batch
from .config import TextClassConfig, TextClassRunConfig, TrainTextConfig
from .docs import LabelledDocs, label_table, load_wikispeedia, read_labelled, split_rows
from .folder import save_classifier
from .loss import ClassifierLoss, evaluate
from .model import TextClassifier

log = logging.getLogger(__name__)


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

    def validate() -> Validation:
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
        return Validation(current["last"])  # fit's final validation after an epoch's: the same figures

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


@one_writer  # --out locked for the whole run (storage/guarded.py)
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

    def files(run) -> None:  # the final weights and the epochs' history beside the checkpoints
        config = load_json(run.path / "config.json")
        done = [h for h in config.get("history", []) if not history or h["epoch"] < history[0]["epoch"]]
        save_classifier(model, run.path, docs.label_names, dict(config, **extra, history=done + history))

    fit_run(out, run, obj, loop, cfg.train.optim, d, ckpt, progress, callbacks, files=files)
    if d.main and cfg.keep_best:
        log.info(f"{out / 'model.safetensors'} holds the last weights, which load_classifier and "
                 "`superbloom textclass` read; BEST names the checkpoint with the best held-out accuracy")
    return out
