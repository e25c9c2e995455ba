"""Load a trained model directory and rank ids for contexts (library API, CLI, HTTP service).

    from superbloom import load
    model = load("runs/wiki/model")
    model.predict(["Miles_Davis", "Jazz"], k=10)   # -> Prediction(items=[("John_Coltrane", -3.1), ...])
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from .rank import rank_contexts
from ..storage.checkpoint import load_weights, require_inference_checkpoint
from ..heads.beam import DecodeConfig
from ..model.device import resolve_device
from ..storage.files import load_json
from ..hashing.bloom import BloomHash
from ..data.mapped_vocab import MAPPED_MIN_IDS, vocab_size
from ..heads import head_config_from_dict
from ..model.encoder import ModelConfig, SetModel, build_model, count_parameters
from ..heads.ranking import Ranking
from ..data.vocab import Vocab


@dataclass
class Prediction:
    items: list[tuple[str, float]]  # (id, score), best first
    exact: bool  # certified exact top-k
    beam: int  # beam width that produced it
    context: list[str] = field(default_factory=list)  # known context ids, as stored
    unknown: list[str] = field(default_factory=list)  # context ids not in the vocabulary


class Predictor:
    def __init__(self, model: SetModel, hashing: BloomHash, vocab: Vocab, config: dict):
        self.model, self.hashing, self.vocab, self.config = model.eval(), hashing, vocab, config

    @classmethod
    def load(cls, model_dir: str | Path, threads: int = 0, device: str = "auto", mmap: bool = True) -> "Predictor":
        """The model directory's inference checkpoint (BEST, else LATEST) on `device` (device.py). On the
        CPU with mmap=True the weights are views of the memory-mapped checkpoint file, shared by every
        process that maps it (mapped.py); else they are read into memory."""
        model_dir = Path(model_dir)
        ckpt = require_inference_checkpoint(model_dir)
        if threads:
            torch.set_num_threads(threads)
        config = load_json(model_dir / "config.json")
        dev = resolve_device(device)
        # the hash maps, and a large vocabulary, are memory-mapped on the CPU: serve's workers share them
        hashing = BloomHash.load(model_dir / "hashing.safetensors", mmap=mmap and dev.type == "cpu")
        # a large vocabulary is memory-mapped (mapped_vocab.py): serve's worker processes share it
        vocab = Vocab.load(model_dir, mapped=mmap and vocab_size(model_dir) >= MAPPED_MIN_IDS)
        model = build_model(ModelConfig.from_dict(config["model"]), head_config_from_dict(config["head"]), hashing,
                            vocab.counts, vocab.strings).to(dev)
        if mmap and dev.type == "cpu":
            from ..storage.mapped import map_weights

            map_weights(model, ckpt)
        else:
            load_weights(model, ckpt)
        config["checkpoint"] = ckpt.name
        return cls(model, hashing, vocab, config)

    @property
    def n_parameters(self) -> int:
        return count_parameters(self.model)

    def rank(self, contexts: np.ndarray, k: int, decode: DecodeConfig = DecodeConfig(), batch_size: int = 256,
             progress: bool = False, exclude: np.ndarray | None = None) -> Ranking:
        """rank_contexts: top-k ids for contexts (Q, c), never an id of exclude (Q, X) (None: the contexts)."""
        return rank_contexts(self.model, self.hashing, contexts, k, decode, batch_size, progress, exclude)

    def predict(self, ids: Sequence[str], k: int = 10, decode: DecodeConfig = DecodeConfig()) -> Prediction:
        """Top-k ids for one context of string ids (stored or display form)."""
        return self.predict_many([ids], k, decode)[0]

    def predict_many(self, contexts: Sequence[Sequence[str]], k: int = 10,
                     decode: DecodeConfig = DecodeConfig()) -> list[Prediction]:
        """Top-k ids for each context. A context with no id in the vocabulary is a ValueError (the
        same answer as the HTTP API's 422): a prediction from an empty context would be a guess."""
        known, unknown = zip(*(self.vocab.lookup(c) for c in contexts)) if contexts else ((), ())
        for i, (kn, un) in enumerate(zip(known, unknown)):
            if len(kn) == 0:
                shown = ", ".join(un[:5]) + (", ..." if len(un) > 5 else "")
                raise ValueError(f"{'context' if len(contexts) == 1 else f'context {i}'}: none of the "
                                 f"{len(un)} ids is in the model's vocabulary (unknown: {shown or 'no ids given'})")
        width = max([len(x) for x in known] + [0])
        mat = np.full((len(known), width), -1, np.int64)
        for i, x in enumerate(known):
            mat[i, :len(x)] = x
        r = self.rank(mat, k, decode)
        out = []
        for i in range(len(known)):
            items = [(self.vocab.strings[j], float(s)) for j, s in zip(r.ids[i].tolist(), r.scores[i].tolist())
                     if j >= 0]
            out.append(Prediction(items, bool(r.exact[i]), int(r.beam[i]),
                                  self.vocab.decode(known[i].tolist()), list(unknown[i])))
        return out


    def prediction_json(self, pred: Prediction) -> dict:
        """A Prediction as JSON: the shape of the HTTP API's /v1/predict answer."""
        return {"predictions": [{"id": i, "display": self.vocab.display(self.vocab.get(i)),
                                 "score": s if math.isfinite(s) else None} for i, s in pred.items],
                "exact": pred.exact, "beam": pred.beam, "context": pred.context, "unknown": pred.unknown}


def load(model_dir: str | Path, threads: int = 0, device: str = "auto", mmap: bool = True) -> Predictor:
    return Predictor.load(model_dir, threads, device, mmap)
