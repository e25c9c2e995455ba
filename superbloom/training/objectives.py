"""Training objectives as registry entries: what loop.fit trains (`Objective`), what train() hands
an objective's builder (`ObjectiveInputs`), and one `ObjectiveEntry` per `train --objective NAME`
that owns the objective's requirements and defaults, so that train(), warmstart and the CLI ask the
entry and never test a name.

    entry = objective_entry("next-item")
    entry.check(model_cfg, mask)          # fails before anything is written
    obj = entry.build(ObjectiveInputs(model, hashing, data, train_rows, val_rows, cfg, model_cfg, device))
    fit(obj, cfg.loop, cfg.optim, run, d)

An entry carries
  build          ObjectiveInputs -> Objective
  ordered        trains on sequence order: a head's structure from the training data (heads/base.py
                 fit; the hybrid's item-item term) is built ordered, and from every training prefix
                 of a leave-one-out dataset (which holds no validation or test id)
  gives_context  its validation ranks with the query's context ids (inference/rank.py: rank_contexts, rank_masked), so a
                 head that scores with the context (HeadBase.uses_context) may train with it
  causal         the model must be causal, and a causal model trains with such an objective only
  needs_window   its examples are ordered windows of <= mask.n ids: the model needs >= mask.n
                 learned positions
  mask_defaults  MaskConfig fields a new run of the CLI takes unless their flag is typed
  auto_init      what warmstart's init 'auto' means for it ('cooccurrence': up to
                 warmstart.COOC_INIT_MAX_IDS ids)

The entries (OBJECTIVES):
  masked           the paper's masked set completion (sec. 3.1); BEST by rec@10 on held-out sets
  next-item        causal, SASRec-style; masked-sequence: BERT4Rec-style (sequence.py: batches,
                   queries, leave-one-out validation examples); BEST by NDCG@10
  text-mlm         BERT's masked LM on prepared text (training/text_mlm.py, imported when it is built: the
                   core does not import the text package)
Another objective is one `register(ObjectiveEntry(...))`, and its name in config.OBJECTIVE_NAMES (what
`train --help` lists without importing torch; a test checks the two agree).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
import torch.nn as nn

from ..model.batches import MaskConfig, epoch_batches, training_batch
from ..data.dataset import Dataset, SetArray
from ..heads.beam import DecodeConfig
from ..heads.base import Validation
from ..hashing.bloom import BloomHash
from ..evaluation.metrics import sequence_summary, summarize, target_ranks
from ..inference.rank import rank_contexts
from ..evaluation.protocols import Examples, make_examples
from .sequence import DECAYS, SELECT as SEQUENCE_SELECT, validation_examples
from ..model.sequence_batches import masked_sequence_batch, next_item_batch

from ..model.encoder import ModelConfig

SELECT = "rec@10"  # validation metric that picks the BEST checkpoint of the masked id model (the default)
VAL_TARGETS_PER_SET = 16  # masked: held-out ids per validation set

# masking of objectives other than the set model's (whose defaults are MaskConfig's): BERT's 80/10/10
# and no element dropout for the BERT4Rec-style sequence objectives (dropping ids changes the order)
# and for text, which also takes BERT's 128 tokens and 15% (training/text_mlm.py's TEXT_MASK: the same values,
# tests/test_objectives.py checks it; the core does not import the text package)
BERT_MASKING = {"p_mask": 0.8, "p_random": 0.1, "element_dropout": 0.0}
TEXT_MASKING = {"n": 128, "mask_rate": 0.15, **BERT_MASKING}


@dataclass
class Objective:
    """What loop.fit trains. `model.forward(batch)` returns the scalar loss to minimise."""
    model: nn.Module
    n_examples: int  # training examples per epoch (for LoopConfig.epochs)
    epoch: Callable[[int], list[np.ndarray]]  # epoch e -> rows of every step (the same on every rank)
    batch: Callable[[np.ndarray, np.random.Generator], Any]  # this rank's rows -> a batch on the device
    validate: Callable[[], Validation] | None = None  # (called on rank 0); `select` of its scores picks BEST
    select: str = SELECT  # higher is better
    # the kept (BEST) validation -> a line on its parts for the end of training (HeadBase.parts_note), or None
    parts_note: Callable[[Validation, int | None], str | None] | None = None
    # what it trains on and validates with, for train's model line (None: the training and validation sets)
    data_line: str | None = None


@dataclass(frozen=True)
class ObjectiveInputs:
    """What train() hands an objective builder: the built model and everything it was built from."""
    model: nn.Module
    hashing: BloomHash
    data: Dataset
    train_rows: np.ndarray  # rows of data.train to train on
    val_rows: np.ndarray  # rows of data.train held out for validation
    cfg: Any  # the run's training.config.TrainConfig (config.py and train.py import this module, not the reverse)
    model_cfg: ModelConfig  # the model's settings (a resumed run's saved ones)
    device: torch.device


@dataclass(frozen=True)
class ObjectiveEntry:
    """One objective of `train --objective`: its builder and what it requires and implies (module
    docstring)."""
    name: str
    build: Callable[[ObjectiveInputs], Objective]
    ordered: bool = False
    gives_context: bool = False
    causal: bool = False
    needs_window: bool = False
    mask_defaults: dict = field(default_factory=dict)
    auto_init: str = "normal"

    def check(self, model, mask: MaskConfig) -> None:
        """Fail before anything is written when a model (a ModelConfig) cannot train with it."""
        causal = model.causal
        if causal and not self.causal:
            only = ", ".join(n for n, e in OBJECTIVES.items() if e.causal)
            raise ValueError(f"a causal model (causal=True, --causal) trains with the {only} objective only, "
                             f"not {self.name!r}")
        if self.causal and not causal:
            raise ValueError(f"the {self.name} objective needs a causal model (ModelConfig.causal=True, "
                             "train --causal)")
        if self.needs_window and model.positions < mask.n:
            raise ValueError(f"the {self.name} objective needs learned positions for its windows of --segment "
                             f"{mask.n} ids: pass --positions {mask.n} or more (got {model.positions})")


OBJECTIVES: dict[str, ObjectiveEntry] = {}


def register(entry: ObjectiveEntry) -> ObjectiveEntry:
    OBJECTIVES[entry.name] = entry
    return entry


def objective_entry(name: str) -> ObjectiveEntry:
    if name not in OBJECTIVES:
        raise ValueError(f"unknown objective {name!r}; choose one of {', '.join(sorted(OBJECTIVES))}")
    return OBJECTIVES[name]


def check_objective(objective: str, model, mask: MaskConfig) -> None:
    """objective_entry(objective).check(model, mask) (model: a ModelConfig)."""
    objective_entry(objective).check(model, mask)


# ------------------------------------------------------------------------------ masked (sec. 3.1)


def masked_set_objective(model: nn.Module, hashing: BloomHash, sets: SetArray, train_rows: np.ndarray,
                         val: Examples | None, mask: MaskConfig, batch_size: int, seed: int,
                         device: torch.device, merge: bool) -> Objective:
    """Masked training over sets (sec. 3.1): segments of <= mask.n ids, 80/10/10 masking; validation
    is rec@k of one held-out id per example (evaluate.py's protocol) on sets carved from training."""
    lengths = sets.lengths

    def epoch(e: int) -> list[np.ndarray]:  # a function of (seed, epoch) only
        return epoch_batches(train_rows, lengths, batch_size, mask.n, np.random.default_rng([seed, 2, e]))

    def batch(rows: np.ndarray, rng: np.random.Generator):
        return training_batch(sets, rows, hashing, mask, rng, merge=merge).to(device)

    def rank():
        return rank_contexts(model, hashing, val.contexts, 20, DecodeConfig())

    def metrics(ranking) -> dict:
        return summarize(target_ranks(ranking.ids.numpy(), val.targets))

    def validate() -> Validation:
        return model.head.choose(rank, metrics, SELECT)  # a head may choose settings here (heads/base.py)

    return Objective(model, len(train_rows), epoch, batch, validate if val is not None else None, SELECT,
                     lambda best, step: model.head.parts_note(best, SELECT, step))


def masked(x: ObjectiveInputs) -> Objective:
    """The default: masked training over sets (sec. 3.1), BEST by rec@10 on held-out training sets."""
    cfg = x.cfg
    # many held-out ids per validation set: a steadier score to pick the BEST checkpoint with
    val = (make_examples(x.data.train.subset(x.val_rows), cfg.mask.n, VAL_TARGETS_PER_SET, cfg.validation_seed)
           if len(x.val_rows) else None)
    return masked_set_objective(x.model, x.hashing, x.data.train, x.train_rows, val, cfg.mask, cfg.loop.batch_size,
                                cfg.loop.seed, x.device, merge=not x.model_cfg.positions)


# ------------------------------------------------------------------------------ sequences (sequence.py)


def sequence_validate(model, hashing: BloomHash, ex: Examples):
    """-> a validate() for fit: HR / NDCG / MRR of `ex` (full ranking, ex.exclude never ranked).
    A head with an item-item term (heads/hybrid.py) has its weight and its recency decay chosen here."""
    def rank():
        return rank_contexts(model, hashing, ex.contexts, 20, exclude=ex.excluded)

    def metrics(ranking) -> dict:
        return sequence_summary(target_ranks(ranking.ids.numpy(), ex.targets))

    def validate() -> Validation:
        return model.head.choose(rank, metrics, SEQUENCE_SELECT, DECAYS)  # heads/base.py
    return validate


def training_rows(data: Dataset, train_rows: np.ndarray, ordered: bool) -> np.ndarray:
    """The rows an objective trains on, hence those a head's structure is built from: every training
    prefix of a leave-one-out dataset for an ordered objective (its validation ids are not in them),
    else the training rows (validation sets unseen)."""
    return np.arange(len(data.train)) if ordered and data.split == "leave-one-out" else train_rows


def _sequence_objective(x: ObjectiveInputs, min_length: int, make_batch) -> Objective:
    """Sequences of >= min_length ids of the training rows, batches of make_batch(rows, rng),
    leave-one-out validation (sequence.validation_examples), BEST by NDCG@10."""
    cfg, lengths = x.cfg, x.data.train.lengths
    rows = training_rows(x.data, x.train_rows, ordered=True)
    rows = rows[lengths[rows] >= min_length]
    if len(rows) < cfg.loop.batch_size:
        raise ValueError(f"{cfg.data}: {len(rows)} training sequences; need at least one batch "
                         f"({cfg.loop.batch_size}); lower --batch-size (to {len(rows)} or less)")

    def epoch(e: int) -> list[np.ndarray]:  # a function of (seed, epoch) only
        rng = np.random.default_rng([cfg.loop.seed, 2, e])
        return epoch_batches(rows, lengths, cfg.loop.batch_size, cfg.mask.n, rng)

    def batch(r: np.ndarray, rng: np.random.Generator):
        return make_batch(r, rng).to(x.device)

    ex = validation_examples(x.data, x.val_rows, x.cfg.validation_seed, x.model_cfg.positions - 1)
    validate = sequence_validate(x.model, x.hashing, ex) if ex is not None and len(ex.targets) else None
    held = (f"the validation targets of {len(ex.targets):,} users" if x.data.split == "leave-one-out" else
            f"the last ids of {len(ex.targets):,} held-out sets") if validate else "none"
    return Objective(x.model, len(rows), epoch, batch, validate, SEQUENCE_SELECT,
                     lambda best, step: x.model.head.parts_note(best, SEQUENCE_SELECT, step),
                     data_line=f"{len(rows):,} training sequences, validation: {held}")


def next_item(x: ObjectiveInputs) -> Objective:
    """Causal next-item training (sequence.py), BEST by leave-one-out validation NDCG@10."""
    OBJECTIVES["next-item"].check(x.model_cfg, x.cfg.mask)
    sets, n = x.data.train, x.cfg.mask.n
    return _sequence_objective(x, 1, lambda r, rng: next_item_batch(sets, r, x.hashing, n, rng))


def masked_sequence(x: ObjectiveInputs) -> Objective:
    """BERT4Rec-style masked training with last-item examples, BEST by leave-one-out NDCG@10."""
    OBJECTIVES["masked-sequence"].check(x.model_cfg, x.cfg.mask)
    sets, mask = x.data.train, x.cfg.mask
    return _sequence_objective(x, 2, lambda r, rng: masked_sequence_batch(sets, r, x.hashing, mask, rng))


def text_mlm(x: ObjectiveInputs) -> Objective:
    """BERT's masked LM on prepared text (sec. 4): training/text_mlm.py, imported when it is built (it is
    handed the Objective type: the text package does not import the training core)."""
    from .text_mlm import text_mlm as build
    return build(x, Objective)


# ------------------------------------------------------------------------------ the registry

register(ObjectiveEntry("masked", masked, gives_context=True, auto_init="cooccurrence"))
# next-item starts from co-occurrence factors too: the hybrid's validation NDCG@10 rose with them on all
# four shared sequence datasets
register(ObjectiveEntry("next-item", next_item, ordered=True, gives_context=True, causal=True, needs_window=True,
                        mask_defaults=BERT_MASKING, auto_init="cooccurrence"))
register(ObjectiveEntry("masked-sequence", masked_sequence, ordered=True, gives_context=True, needs_window=True,
                        mask_defaults=BERT_MASKING))
# text-mlm's validation ranks through rank_masked, which hands the head each blank's context (the hashed hybrid
# with the bigram term reads its two neighbours there: heads/bigram.py)
register(ObjectiveEntry("text-mlm", text_mlm, gives_context=True, mask_defaults=TEXT_MASKING))
