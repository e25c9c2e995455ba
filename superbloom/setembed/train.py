"""Training a set embedding: `embed_train(cfg) -> model directory`, on the one training loop
(loop.fit: checkpoints, resume, devices, metrics.jsonl, BEST by validation) with its own Objective,
in the run skeleton every trainer shares (rundir.py: the overwrite / resume policy, config.json's
resume history).

    superbloom embed-train data/pages --out runs/pages_nca --objective nca --labels labels.tsv --steps 1000

Objectives (registry entries in objectives.py; the losses are pure functions in losses.py):
  uniformity  no labels: alignment + uniformity (Wang & Isola 2020) of the blog's two views of a set
              (a random segment of <= `segment` ids, shuffled, split in halves); BEST by kNN
              precision@10 of category agreement on validation sets if labels are given, else by
              the negated validation loss
  nca         NCA with leave-one-out over the batch and a momentum memory bank of every training
              set's vector (Wu et al. 2018); BEST by kNN accuracy on validation sets
  softmax     a linear classifier on the set vector, label-smoothed cross-entropy (the blog's 0.1);
              a set with k labels has target 1/k on each; BEST by the head's validation accuracy

Why not an entry of objectives.OBJECTIVES: train() builds an id model (SetModel: encoder + an output head
over the vocabulary) and a TrainConfig without labels; a set embedding has no output head over ids,
has a pool, a classifier and a bank whose sizes come from the labels file, and its directory holds
what retrieval needs (the labels and an index of every training set's vector). So it writes its
own model directory and hands its Objective to the same `fit`:

    OUT/config.json                  "embed", "hash", "model", "train" (this config), "labels", "data"
    OUT/hashing.safetensors, vocab.txt, counts.npy      as a train() directory
    OUT/checkpoints/, LATEST, BEST, metrics.jsonl       written by loop.fit
    OUT/index.safetensors            vectors (S, d) of every training set (the inference checkpoint's),
                                     labels (S, L) uint8; OUT/index.sets.txt their set keys

Validation sets are training sets held out from the loss (`val_fraction`, at most 2000); the index
covers every training set. Under torchrun every rank's batch rows update the NCA bank on all ranks.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from safetensors.torch import save_file

from ..model.batches import epoch_batches, sample_segments
from ..heads.base import Validation
from ..storage.checkpoint import inference_checkpoint, load_weights
from ..data.dataset import Dataset, SetArray
from ..model.device import init_distributed
from ..storage.files import atomic_path, load_json, save_json, write_lines
from ..hashing.bloom import BloomHash, HashConfig
from .losses import split_views, uniformity
from ..model.encoder import count_parameters
from ..training.callbacks import Callback
from ..training.objectives import Objective
from ..storage.guarded import one_writer
from ..training.run import fit_run
from ..training.rundir import (check_out, config_changes, continue_run, dataset_record, open_run,
                               portable, portable_summary, read_saved, refuse_changes, resume_point, start_run)
from ..training.train import split_validation
from .knn import classify, knn_votes, label_agreement, multilabel_scores, topk_cosine
from ..data.labels import load_labels
from .model import SetEmbedder, embed_sets, set_tokens
from .objectives import objective
from .config import EmbedTrainConfig  # noqa: F401 (re-exported: callers import it here)

log = logging.getLogger(__name__)

K = 10  # neighbours of the validation kNN scores
VAL_REFERENCE = 2000  # training sets validation sets are compared with (a fixed sample)


# settings a resumed run must keep (they define the model, its bank and its data split; the seed
# too: it draws the validation split, hence the bank's rows): rundir.config_changes
ARCHITECTURE = ("embed", "hash", "model", "labels", "val_fraction", "loop.seed")


# ------------------------------------------------------------------------------ batches


@dataclass
class ViewsBatch:
    """Two views of each set (uniformity): tokens and padding (B, T) of the left and right halves."""
    left: torch.Tensor
    left_pad: torch.Tensor
    right: torch.Tensor
    right_pad: torch.Tensor

    def to(self, device) -> "ViewsBatch":
        return ViewsBatch(*(t.to(device) for t in (self.left, self.left_pad, self.right, self.right_pad)))


@dataclass
class LabelledBatch:
    """Segments of labelled sets (nca, softmax): tokens, pad (B, T), labels (B, L) bool, bank rows (B,)."""
    tokens: torch.Tensor
    pad: torch.Tensor
    labels: torch.Tensor
    index: torch.Tensor

    def to(self, device) -> "LabelledBatch":
        return LabelledBatch(*(t.to(device) for t in (self.tokens, self.pad, self.labels, self.index)))


def views_batch(sets: SetArray, rows: np.ndarray, hashing: BloomHash, segment: int,
                rng: np.random.Generator) -> ViewsBatch:
    """A random segment of <= segment ids per set, shuffled and split in halves (losses.split_views)."""
    segs = sample_segments(sets, rows, segment, rng)  # (B, w), every row >= 2 ids
    g = torch.Generator().manual_seed(int(rng.integers(2 ** 62)))
    v = split_views(torch.from_numpy(segs), g)
    (lt, lp), (rt, rp) = set_tokens(v.left[v.valid].numpy(), hashing), set_tokens(v.right[v.valid].numpy(), hashing)
    return ViewsBatch(lt, lp, rt, rp)


def labelled_batch(sets: SetArray, rows: np.ndarray, labels: np.ndarray, bank_row: np.ndarray, hashing: BloomHash,
                   segment: int, rng: np.random.Generator) -> LabelledBatch:
    segs = sample_segments(sets, rows, segment, rng)  # (B, w)
    tokens, pad = set_tokens(segs, hashing)
    return LabelledBatch(tokens, pad, torch.from_numpy(labels[rows]), torch.from_numpy(bank_row[rows]))


# ------------------------------------------------------------------------------ the loss


def embed_loss(model: SetEmbedder, batch) -> torch.Tensor:
    """The objective's scalar loss on one batch (and, for a bank, its queued update): objectives.py."""
    return objective(model.cfg.objective).loss(model, batch)


class EmbedLoss(torch.nn.Module):
    """fit()'s model: forward(batch) -> loss. A thin shell so the checkpoints hold SetEmbedder's own
    parameter names under `net.` (Embedder.load reads them back the same way)."""

    def __init__(self, net: SetEmbedder):
        super().__init__()
        self.net = net

    def forward(self, batch) -> torch.Tensor:
        return embed_loss(self.net, batch)


# ------------------------------------------------------------------------------ the objective


def validation_scores(model: SetEmbedder, hashing: BloomHash, sets: SetArray, val_rows: np.ndarray,
                      ref_rows: np.ndarray, labels: np.ndarray | None) -> dict:
    """kNN scores of validation sets against reference training sets (labels given), the head's
    accuracy (softmax), and uniformity of the validation vectors (lower: more spread out)."""
    zv = embed_sets(model, hashing, sets, val_rows)  # (V, d)
    out = {"uniformity": float(uniformity(torch.from_numpy(zv), model.cfg.uniformity_t))} if len(zv) >= 2 else {}
    if labels is None:
        return out
    lab = np.flatnonzero(labels[val_rows].any(1))  # labelled validation sets
    if not len(lab):
        return out
    zr = embed_sets(model, hashing, sets, ref_rows)
    scores, index = topk_cosine(torch.from_numpy(zv[lab]), torch.from_numpy(zr), K)
    yv, yr = labels[val_rows[lab]], labels[ref_rows]
    out[f"precision@{K}"] = float(label_agreement(index.numpy(), yv, yr).mean())
    pred, _ = classify(knn_votes(scores, index, torch.from_numpy(yr)))
    out["knn_accuracy"] = multilabel_scores(pred.numpy(), yv)["accuracy"]
    if model.classifier is not None:
        with torch.no_grad():
            device = next(model.parameters()).device
            head = model.logits(torch.from_numpy(zv[lab]).to(device)).argmax(1).cpu().numpy()
        out["accuracy"] = multilabel_scores(head, yv)["accuracy"]
    return out


def embed_objective(net: SetEmbedder, hashing: BloomHash, sets: SetArray, train_rows: np.ndarray,
                    val_rows: np.ndarray, labels: np.ndarray | None, batch_size: int, seed: int,
                    device: torch.device) -> Objective:
    """The Objective fit() trains: segments of training sets, the objective's loss, validation."""
    cfg = net.cfg
    lengths = sets.lengths
    bank_row = np.full(len(sets), -1, np.int64)
    bank_row[train_rows] = np.arange(len(train_rows))  # NCA: the bank holds the training rows, in order

    def epoch(e: int) -> list[np.ndarray]:
        return epoch_batches(train_rows, lengths, batch_size, cfg.segment, np.random.default_rng([seed, 2, e]))

    def batch(rows: np.ndarray, rng: np.random.Generator):
        if objective(cfg.objective).views:
            return views_batch(sets, rows, hashing, cfg.segment, rng).to(device)
        return labelled_batch(sets, rows, labels, bank_row, hashing, cfg.segment, rng).to(device)

    ref_rows = np.sort(np.random.default_rng([seed, 3]).permutation(train_rows)[:VAL_REFERENCE])
    # unsupervised without labels: BEST by the negated validation loss on fixed views
    fixed = (views_batch(sets, val_rows, hashing, cfg.segment, np.random.default_rng([seed, 4]))
             if labels is None and len(val_rows) >= 2 else None)

    def validate() -> Validation:
        net.eval()
        try:
            out = validation_scores(net, hashing, sets, val_rows, ref_rows, labels)
            if fixed is not None:
                with torch.no_grad():
                    out["neg_loss"] = -float(embed_loss(net, fixed.to(device)))
        finally:
            net.train()
        return Validation(out)

    select = objective(cfg.objective).select or (f"precision@{K}" if labels is not None else "neg_loss")
    can_validate = len(val_rows) >= 2 and (labels is None or labels[val_rows].any())
    return Objective(EmbedLoss(net), len(train_rows), epoch, batch, validate if can_validate else None, select)


# ------------------------------------------------------------------------------ embed_train


@one_writer  # --out locked for the whole run (storage/guarded.py)
def embed_train(cfg: EmbedTrainConfig, progress: bool = True, resume: bool = False, overwrite: bool = False,
                callbacks: Sequence[Callback] = ()) -> Path:
    """Train a set embedding on a prepared dataset -> the model directory (with its index).

    As train.train: cfg.out may hold a model only with resume=True (continue its newest checkpoint;
    the model, labels and split may not change) or overwrite=True (replaced once the new run has a
    complete checkpoint). Every setting is checked before anything is written. `callbacks`: where the
    metrics.jsonl records go too (training/callbacks.py)."""
    d = init_distributed(cfg.loop.device)
    out = check_out(cfg.out, "set-embedding")
    data = Dataset(cfg.data)
    ckpt = resume_point(out, resume, overwrite, d.main)
    table = load_labels(cfg.labels, data, ("train",)) if cfg.labels else None
    labels = table["train"] if table is not None else None  # (S, L) bool
    if table is not None and not labels.any():
        raise ValueError(f"{cfg.labels}: none of its set keys is a training set of {cfg.data} "
                         f"(e.g. {', '.join(table.unknown_examples[:3])})")
    if ckpt is not None:
        saved = read_saved(out, ("train", "hash"))  # one line naming config.json if it is broken
        arch, changed = config_changes(saved["train"], cfg.to_dict(), ARCHITECTURE)
        refuse_changes(arch, "the model, its labels or its split", out)
        hcfg = HashConfig(**saved["hash"])
        hashing = BloomHash.load(out / "hashing.safetensors")
    else:
        hcfg = cfg.hash.resolve(data.n_ids)
        hashing = BloomHash.build(data.n_ids, hcfg, data.train if hcfg.coherent else None)
    train_rows, val_rows = split_validation(data.train, cfg.val_fraction, cfg.loop.seed)
    if labels is not None:  # supervised objectives learn from labelled sets only
        if cfg.embed.supervised:
            train_rows = train_rows[labels[train_rows].any(1)]
    if len(train_rows) < cfg.loop.batch_size:
        raise ValueError(f"{cfg.data}: {len(train_rows)} training sets with two or more ids"
                         f"{' and a label' if cfg.embed.supervised else ''}; need at least one batch "
                         f"({cfg.loop.batch_size}); lower --batch-size (to {len(train_rows)} or less)")
    torch.manual_seed(cfg.loop.seed)
    net = SetEmbedder(cfg.model, cfg.embed, hashing, n_labels=len(table.names) if table else 0,
                      bank_labels=torch.from_numpy(labels[train_rows]) if objective(cfg.embed.objective).bank else None,
                      vocab=data.vocab.strings if cfg.model.dynamic else None)
    if net.bank is not None:  # the paper's start: random unit vectors
        g = torch.Generator().manual_seed(cfg.loop.seed)
        net.bank.vectors.copy_(torch.nn.functional.normalize(torch.randn(net.bank.vectors.shape, generator=g), dim=1))
    n_params = count_parameters(net) - (count_parameters(net.classifier) if net.classifier is not None else 0)
    net.to(d.device)
    run = open_run(out, ckpt, "set-embedding", at_end=True, main=d.main)  # replaces OUT with its index
    if d.main and ckpt is None:
        start_run(run, hashing, data.vocab, {
            "kind": "set-embedding", "dataset": dataset_record(cfg.data),
            "embed": asdict(cfg.embed), "hash": asdict(hcfg), "model": asdict(cfg.model),
            "train": portable(cfg.to_dict()),
            "labels": table.names if table else [], "label_summary": table.summary() if table else None,
            "data": portable_summary(data.meta), "parameters": n_params,
            "classifier_parameters": count_parameters(net.classifier) if net.classifier is not None else 0})
    if ckpt is not None:
        continue_run(out, ckpt, saved, "train", cfg.to_dict(), changed, d.main)
    if d.main:
        log.info(f"set embedding ({cfg.embed.objective}): {n_params:,} parameters (d={cfg.model.d}, "
                 f"{cfg.model.layers} layers); {data.n_ids:,} ids -> {hashing.n_tokens:,} tokens; "
                 f"{len(train_rows):,} training sets, {len(val_rows):,} validation; device {d.device}"
                 + (f"; {len(table.names)} labels" if table else ""))
    obj = embed_objective(net, hashing, data.train, train_rows, val_rows, labels, cfg.loop.batch_size, cfg.loop.seed,
                          d.device)
    fit_run(out, run, obj, cfg.loop, cfg.optim, d, ckpt, progress, callbacks,
            files=lambda run: build_index(run.path, net, hashing, data, labels))
    return out


def build_index(out: Path, net: SetEmbedder, hashing: BloomHash, data: Dataset, labels: np.ndarray | None) -> None:
    """index.safetensors + index.sets.txt: every training set's vector with the inference checkpoint's
    weights (BEST if kept, else LATEST), and its labels."""
    ckpt = inference_checkpoint(out)
    shell = EmbedLoss(net)
    load_weights(shell, ckpt)
    t0 = time.time()
    vectors = embed_sets(net, hashing, data.train)  # (S, d)
    lab = labels if labels is not None else np.zeros((len(vectors), 0), bool)
    with atomic_path(out / "index.safetensors") as tmp:
        save_file({"vectors": torch.from_numpy(vectors), "labels": torch.from_numpy(lab.astype(np.uint8))}, str(tmp))
    write_lines(out / "index.sets.txt", data.set_names("train"))
    config = load_json(out / "config.json")
    save_json(out / "config.json", dict(config, index={"checkpoint": ckpt.name, "sets": len(vectors),
                                                       "seconds": round(time.time() - t0, 1)}))
    log.info(f"index: {len(vectors):,} training set vectors ({ckpt.name}) in {out / 'index.safetensors'}")

