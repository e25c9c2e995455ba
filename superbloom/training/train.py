"""Training: one loop for every objective, and the masked training of a Superbloom model
(sec. 2.4, 3.1-3.2) built on it: train(cfg) -> model directory.

    superbloom train data/wiki --out runs/wiki --alpha 4 --layers 4 --time-budget 600

`fit(objective, ...)` is the loop (loop.py, with LoopConfig); the objectives are registry entries
(objectives.py: Objective, ObjectiveInputs, OBJECTIVES, importable from here too), each with its
builder and what it requires and implies, which train() asks instead of testing names; the run
directory, its overwrite / resume policy and config.json's resume history are rundir.py's, shared
with the set-embedding and text-classifier trainers. An `Objective` is a module whose
forward(batch) returns a scalar loss, how the rows of each step are drawn (the same on every rank),
how a rank turns its share of rows into a batch on its device, and how to validate.

One code path for 1 process and N processes: under torchrun (device.init_distributed) the model is
wrapped in DistributedDataParallel (gloo on CPU, NCCL on GPU), every rank reads its own slice of
each global batch, every decision to stop is all-reduced, and rank 0 alone writes. The optimizer
comes from optim.make_optimizer (warm-up + inverse-sqrt schedule), gradients are clipped, metrics go
to metrics.jsonl, and checkpoints are atomic and resumable: `resume=True` continues a killed run
where its last checkpoint left it (weights, optimizer, schedule, data order and every rank's RNG).
"""
from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..hashing.coherent import CoherentStats
from ..data.dataset import Dataset, SetArray
from ..model.device import init_distributed
from ..storage.kinds import id_model_kind
from ..hashing.bloom import BloomHash, HashConfig
from ..heads import head_config_dict, head_config_from_dict
from .callbacks import Callback
from .loop import LoopConfig, Prepare  # noqa: F401 (LoopConfig re-exported: callers import it here)
from ..model.encoder import ModelConfig, build_model, count_parameters, rehash
from .objectives import (OBJECTIVES, SELECT, VAL_TARGETS_PER_SET, Objective, ObjectiveEntry, ObjectiveInputs, masked,
    masked_set_objective, objective_entry, training_rows)
from .optim import OptimConfig
from ..data.remap import align_dataset, format_alignment
from ..storage.guarded import one_writer
from .run import fit_run
from .rundir import (check_out, config_changes, continue_run, dataset_record, open_run, portable,
                     portable_summary, read_saved, refuse_changes, resume_point, start_run)
from ..data.vocab import Vocab
from ..storage.files import load_json, save_json
from ..model.warmstart import initialise, resolve_init
from .config import TrainConfig  # re-exported: callers import it here

log = logging.getLogger(__name__)


def split_validation(train: SetArray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of training sets used for training / validation (sets with >= 2 ids only)."""
    rows = np.flatnonzero(train.lengths >= 2)
    rng = np.random.default_rng([seed, 1])
    n_val = min(2000, int(round(fraction * len(rows))))
    perm = rng.permutation(rows)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


# settings a resumed run must keep: they define the model and its data (the rest may change)
ARCHITECTURE = ("hash", "model", "head", "mask", "val_fraction", "val_seed", "objective", "init")


def run_changes(saved: dict, cfg: TrainConfig) -> tuple[list[str], list[str]]:
    """(architecture changes, other changes) of `cfg` against the saved config.json, as
    'field old -> new' strings (rundir.config_changes)."""
    before = dict(saved.get("train", {}), hash=saved["hash"], model=saved["model"], head=saved["head"])
    before["head"] = head_config_dict(head_config_from_dict(before["head"]))  # older layouts read alike
    before["model"] = asdict(ModelConfig.from_dict(before["model"]))
    return config_changes(before, cfg.to_dict(), ARCHITECTURE)


PENDING = "network_setup_pending"  # config.json: the run served its term, the network's setup is still to do

FEW_VALIDATION_SETS = 20  # below this many validation sets, train says the choices on them are noisy


def few_validation_sets(n_val: int, n_rows: int, fraction: float) -> str:
    """The warning for a validation of few sets (a small dataset at the default --val-fraction): what
    is chosen on it, and the fraction that would hold out FEW_VALIDATION_SETS."""
    wanted = min(0.5, np.ceil(100 * FEW_VALIDATION_SETS / max(n_rows, 1)) / 100)
    chosen = ("no BEST checkpoint is chosen (the last is kept) and a hybrid's item-item weight stays 0" if not n_val
              else "the BEST checkpoint (and a hybrid's item-item weight) are chosen on few held-out ids")
    return (f"validation on {n_val} sets ({fraction:g} of {n_rows:,}): {chosen}; "
            f"--val-fraction {wanted:g} holds out about {round(wanted * n_rows)} (taken from the training sets)")


class Phases:
    """Wall seconds of train()'s steps around the loop, for its last line: where the time went (a
    30 s budget at 287,851 ids was 80 s in all, and nothing said why)."""

    def __init__(self):
        self.start, self.seconds = time.time(), {}

    @contextlib.contextmanager
    def __call__(self, name: str):
        t0 = time.time()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.time() - t0

    def line(self, trained: float) -> str:
        """`trained`: this run's seconds in the loop (its validations included)."""
        total = time.time() - self.start
        rest = total - trained - sum(self.seconds.values())
        parts = [f"training {trained:.0f} s"] + [f"{name} {s:.0f} s" for name, s in self.seconds.items() if s >= 1]
        return (f"{total:.0f} s in all: " + ", ".join(parts)
                + f", the rest {max(rest, 0):.0f} s (the last validation, checkpoints)")


# ------------------------------------------------------------------------------ the masked id model


@one_writer  # --out locked for the whole run (storage/guarded.py)
def train(cfg: TrainConfig, progress: bool = True, resume: bool = False, overwrite: bool = False,
          record: dict | None = None, callbacks: Sequence[Callback] = ()) -> Path:
    """Masked training of a Superbloom model on a prepared dataset -> the model directory.

    cfg.out may not hold a model unless resume=True (continue its newest complete checkpoint; the
    architecture must not change, other settings may and are recorded) or overwrite=True (a new
    run that replaces it once it has a complete checkpoint of its own). Every setting is checked
    before anything is written. A head that ranks before training (a hybrid's term) is fitted and
    written first, servable before its step-0 validation; in one process the network's coherent hash
    maps and start are built after that, before the first step (the term serves meanwhile).
    `record`: more top-level entries of a new run's config.json (the CLI's preset choice,
    training/presets.py). `callbacks`: where the metrics.jsonl records go too
    (callbacks.py: TensorBoard, MLflow, your own)."""
    from .._bounds import instance

    instance("cfg", cfg, TrainConfig, "a superbloom.TrainConfig")
    phases = Phases()
    d = init_distributed(cfg.loop.device)
    out = check_out(cfg.out)
    entry = objective_entry(cfg.objective)
    with phases("reading the data"):
        data = Dataset(cfg.data)
    if not (data.train.lengths >= 2).any():  # before the hash maps, the head's fit and the start use them
        raise ValueError(f"{cfg.data}: no training sets with at least 2 ids ({len(data.train)} sets of one id or "
                         "none): a set is learned by predicting one of its ids from the others")
    ckpt = resume_point(out, resume, overwrite, d.main)
    coherent_stats = None  # how a new run's coherent maps were built (for config.json)
    # one process serves its term before the network's setup (network_setup below): a new run, or a resumed
    # one whose first run stopped before it
    pending = ckpt is None and d.world == 1
    if ckpt is not None:
        saved = read_saved(out, ("hash", "model", "head"))  # one line naming config.json if it is broken
        arch, changed = run_changes(saved, cfg)
        refuse_changes(arch, "the model or its data", out)
        hcfg, mcfg = HashConfig(**saved["hash"]), ModelConfig.from_dict(saved["model"])
        head_cfg = head_config_from_dict(saved["head"])
        hashing = BloomHash.load(out / "hashing.safetensors")
        pending = saved.get(PENDING) is not None
        coherent_stats = CoherentStats() if pending and hcfg.coherent else None
        aligned = align_dataset(data, Vocab.load(out))  # data prepared with another vocabulary (remap.py)
        if aligned is not None and d.main:
            log.info("resume: " + format_alignment(aligned))
    else:
        hcfg, mcfg, head_cfg = cfg.hash.resolve(data.n_ids), cfg.model, cfg.head  # alpha 0: from the vocabulary
        coherent_stats = CoherentStats() if hcfg.coherent else None
        with phases("the hash maps"):  # coherent maps (from the training sets) wait for the network's setup
            hashing = (BloomHash.build(data.n_ids, replace(hcfg, coherent=0)) if pending and hcfg.coherent else
                       BloomHash.build(data.n_ids, hcfg, data.train if hcfg.coherent else None, coherent_stats))
    torch.manual_seed(cfg.loop.seed)
    model = build_model(mcfg, head_cfg, hashing, data.counts, data.vocab.strings if mcfg.dynamic else None)
    train_rows, val_rows = split_validation(data.train, cfg.val_fraction, cfg.validation_seed)
    if model.head.uses_context and not entry.gives_context:
        raise ValueError(f"the {head_cfg.name} head scores with the set's context: it trains with an objective "
                         f"whose validation passes the context "
                         f"({', '.join(n for n, e in OBJECTIVES.items() if e.gives_context)}), not {cfg.objective!r}")
    head_built = None
    if ckpt is None:  # a head with a structure from the training sets (heads/base.py: fit), validation
        # unseen: an ordered objective trains on (and builds it from) every training prefix of a
        # leave-one-out dataset, which holds no validation or test id (objectives.training_rows)
        with phases("fitting the head"):
            head_built = model.head.fit(data.train.subset(training_rows(data, train_rows, entry.ordered)),
                                        ordered=entry.ordered)
    n_params = count_parameters(model)
    if ckpt is not None and isinstance(saved.get("parameters"), int):
        n_params = saved["parameters"]  # as the first run counted them: a fitted term is loaded later, in fit
    init_name = resolve_init(cfg.init, data.n_ids, entry.auto_init)
    # served before any step: a head that ranks then (a hybrid's term) waits for neither the network's
    # coherent hash maps nor its start (the first answer at a million ids: minutes sooner)
    provisional = pending and bool(hcfg.coherent)  # the maps in hand are (a resume: may be) random ones
    if ckpt is None:  # (a resumed model's term is loaded with its weights, in fit)
        pending = pending and model.head.ranks_before_training()

    def network_setup() -> dict:
        """The network's coherent hash maps and its start (from the training rows only: validation
        unseen) -> what config.json records of them."""
        if provisional:
            with phases("the hash maps"):
                rehash(model, hashing, BloomHash.build(data.n_ids, hcfg, data.train, coherent_stats))
        done = {}
        if ckpt is None or provisional:
            done["hash_build_seconds"] = round(phases.seconds.get("the hash maps", 0.0), 2)
            if coherent_stats is not None:
                done["coherent_build"] = asdict(coherent_stats)
        if init_name != "normal" and (pending or ckpt is None):
            with phases("the start"):
                init = initialise(init_name, model, hashing, data.train.subset(train_rows), data.n_ids, cfg.loop.seed)
            if init is not None:
                done["init"] = dict(init, seconds=round(phases.seconds["the start"], 2))
        return done

    def log_init(init: dict | None) -> None:
        if init and d.main:
            log.info(f"init: {init['init']} factors (rank {init['rank']}) for {init['tokens_set']:,} of "
                     f"{init['tokens']:,} tokens in {init['seconds']} s")

    setup = {} if pending else network_setup()
    model.to(d.device)
    if len(train_rows) < cfg.loop.batch_size:
        raise ValueError(f"{cfg.data}: {len(train_rows)} training sets with two or more ids; "
                         f"need at least one batch ({cfg.loop.batch_size}); "
                         f"lower --batch-size (to {len(train_rows)} or less)")
    # the objective is built (and refuses data it cannot train on) before anything is written
    with phases("the objective's examples"):
        obj = entry.build(ObjectiveInputs(model, hashing, data, train_rows, val_rows, cfg, mcfg, d.device))
    run = open_run(out, ckpt, main=d.main)
    if d.main and ckpt is None:
        start_run(run, hashing, data.vocab, {
            "kind": id_model_kind(data.meta), "dataset": dataset_record(cfg.data),
            "hash": asdict(hcfg), "model": asdict(mcfg), "head": head_config_dict(head_cfg),
            "train": portable(cfg.to_dict()), "data": portable_summary(data.meta), "parameters": n_params,
            **setup, **({PENDING: "the network's hash maps and start"} if pending else {}),
            **({"head_built": head_built} if head_built else {}), **(record or {})})
    if ckpt is not None:
        continue_run(out, ckpt, saved, "train", cfg.to_dict(), changed, d.main)
    if d.main:
        log.info(f"model: {n_params:,} parameters ({mcfg.layers} layers, d={mcfg.d}, {mcfg.heads} heads, "
                 f"d_ff={mcfg.d_ff}); hashing: {data.n_ids:,} ids -> {hashing.n_tokens:,} tokens "
                 f"(alpha={hcfg.alpha}, m={hcfg.m}); "
                 f"{obj.data_line or f'{len(train_rows):,} training sets, {len(val_rows):,} validation'}; "
                 f"device {d.device}" + (f" x {d.world} processes" if d.world > 1 else ""))
        if not obj.data_line and cfg.val_fraction and len(val_rows) < FEW_VALIDATION_SETS:
            log.warning(few_validation_sets(len(val_rows), len(train_rows) + len(val_rows), cfg.val_fraction))
        log_init(setup.get("init"))
        if run.staged:
            log.info(f"{out} holds a model: this run writes to {run.path} and replaces it at its first checkpoint")
    before = float(load_json(ckpt / "state.json").get("seconds", 0.0)) if ckpt is not None else 0.0
    prepare = None
    if pending:  # before the first step; its record lands in config.json once a checkpoint holds it
        made: dict = {}

        def prepared():
            if d.main:
                config = {k: v for k, v in load_json(run.path / "config.json").items() if k != PENDING}
                save_json(run.path / "config.json", dict(config, **made))

        def prepare_network():
            made.update(network_setup())
            log_init(made.get("init"))
            if d.main and provisional:
                hashing.save(run.path / "hashing.safetensors")
        prepare = Prepare(prepare_network, prepared)
    # a head that ranks before any step (a hybrid's term alone) is saved at step 0, servable at once, then validated
    first = ckpt is None and model.head.ranks_before_training() and obj.validate is not None
    if first:
        model.head.before_training()
    state = fit_run(out, run, obj, cfg.loop, cfg.optim, d, ckpt, progress, callbacks, validate_first=first,
                    prepare=prepare)
    if d.main:
        log.info(phases.line(state.seconds - before))
    return out
