"""The id model in a folder, whatever it holds: one model (Predictor) or an ensemble of them (Ensemble).

    from superbloom.inference.loader import load
    model = load("runs/toys")          # what predict, eval, serve and the demo rank with
    term = load("runs/toys", part="term")   # a hybrid's item-item term alone (predict / serve --part term)

`superbloom.load` picks a loader for every kind (set embeddings and text classifiers too); this is the
one for the id commands, which take a model folder or an ensemble folder (`train --members`,
training/members.py) alike.

A folder whose training is still running is read as it stands: its BEST checkpoint (a hybrid's is
written before the first training step, its term validated), else its LATEST. The trainer never
changes a checkpoint in place (it writes a new one, moves the pointer, then removes the old one), so
a load that lost the race (the checkpoint it was reading removed under it, or a staged run swapped in
mid-read) reads the folder again, from the checkpoint the pointer names now.
"""
from __future__ import annotations

import logging
from pathlib import Path

from .ensemble import Ensemble
from .parts import rank_by
from .predictor import Predictor
from ..storage.checkpoint import inference_checkpoint
from ..storage.guarded import kind_of, resolve
from ..storage.loading import LoadError, read_whole

log = logging.getLogger(__name__)

ATTEMPTS = 5  # reads of a folder whose checkpoint moved while it was read


def load(model_dir: str | Path, device: str = "auto", mmap: bool = True,
         part: str = "whole") -> Predictor:
    """The id model in `model_dir` (Predictor.load), or the ensemble folder's members as one (Ensemble.load_dir),
    ranking by `part` (rank_by); read again when a running training moved its checkpoint mid-read, or
    another run swapped a new version of the folder in (storage/loading.read_whole)."""
    def read():
        if kind_of(Path(model_dir), "ensemble") == "ensemble":
            return Ensemble.load_dir(model_dir, device, mmap)
        return load_model(model_dir, device, mmap)
    return rank_by(read_whole(model_dir, read), part)


def load_model(model_dir: str | Path, device: str = "auto", mmap: bool = True) -> Predictor:
    """Predictor.load, again (up to ATTEMPTS reads) when it failed because the folder's inference
    checkpoint changed while it was read (a training run writing beside the reader); any other
    failure is raised as it came."""
    for attempt in range(1, ATTEMPTS + 1):
        before = _serving(model_dir)
        try:
            return Predictor.load(model_dir, device, mmap)
        except (OSError, LoadError):
            now = _serving(model_dir)
            if attempt == ATTEMPTS or now is None or now == before:
                raise
            log.info(f"{model_dir}: its checkpoint moved while it was read ({before} -> {now}, a training run "
                     "writing there); reading it again")
    raise AssertionError("unreachable")


def _serving(model_dir: str | Path) -> Path | None:
    """The checkpoint a load of `model_dir` reads now (the folder as guarded.resolve finds it), or None."""
    try:
        return inference_checkpoint(resolve(model_dir, "model"))
    except (OSError, LoadError, ValueError):
        return None
