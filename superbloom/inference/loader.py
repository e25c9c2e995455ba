"""The id model in a folder, whatever it holds: one model (Predictor) or an ensemble of them (Ensemble).

    from superbloom.inference.loader import load
    model = load("runs/toys")          # what predict, eval, serve and the demo rank with
    term = load("runs/toys", part="term")   # a hybrid's item-item term alone (predict / serve --part term)

`superbloom.load` picks a loader for every kind (set embeddings and text classifiers too); this is the
one for the id commands, which take a model folder or an ensemble folder (`train --members`,
training/members.py) alike.
"""
from __future__ import annotations

from pathlib import Path

from .ensemble import Ensemble
from .parts import rank_by
from .predictor import Predictor
from ..storage.guarded import kind_of


def load(model_dir: str | Path, threads: int = 0, device: str = "auto", mmap: bool = True,
         part: str = "whole") -> Predictor:
    """The id model in `model_dir` (Predictor.load), or the ensemble folder's members as one (Ensemble.load_dir),
    ranking by `part` (rank_by)."""
    if kind_of(Path(model_dir), "ensemble") == "ensemble":
        return rank_by(Ensemble.load_dir(model_dir, threads, device, mmap), part)
    return rank_by(Predictor.load(model_dir, threads, device, mmap), part)
