"""A loaded text classifier: texts -> their labels, best first (what `superbloom.load` returns for one).

    clf = superbloom.load("runs/tc")         # or Classifier.load
    clf.predict("the cat and the goat")      # -> Labelled(label="animal", scores=[("animal", 0.93), ...])
    clf.info()                               # kind, parameters, labels, ...

Texts are cut into words as at training (docs.first_words: the model's max_words first words);
load_classifier's (model, labels, config) tuple stays for the code that wants the module itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa

from .docs import first_words
from .folder import load_classifier
from .model import TextClassifier


@dataclass
class Labelled:
    label: str  # the most probable class
    scores: list[tuple[str, float]]  # (label, probability), best first


class Classifier:
    def __init__(self, model: TextClassifier, labels: list[str], config: dict):
        self.model, self.labels, self.config = model, labels, config
        self.path: Path | None = None  # the folder it was loaded from (save copies it)

    @classmethod
    def load(cls, model_dir: str | Path, device: str = "cpu") -> "Classifier":
        """A directory written by `superbloom textclass-train` (or save_classifier), on `device`."""
        out = cls(*load_classifier(model_dir, device))
        out.path = Path(model_dir)
        return out

    def save(self, out: str | Path) -> Path:
        """This classifier's folder copied to `out` (storage/share.py); `sb.load(out)` classifies the same."""
        from ..storage.share import copy_model

        if self.path is None:
            raise ValueError("save: this classifier was not loaded from a folder")
        return copy_model(self.path, out, "text-classifier")

    def info(self) -> dict:
        """What this model is (the same keys for every kind sb.load returns: kind, parameters, checkpoint)."""
        c = self.config
        return {"kind": "text-classifier", "parameters": self.model.n_parameters, "checkpoint": "model.safetensors",
                "labels": list(self.labels), "embedding": c["textclass"]["embedding"],
                "attention": c["textclass"]["attention"], "max_words": int(c.get("max_words", 256))}

    def words(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's first max_words words, as at training; a text without a word is a ValueError."""
        tokens, counts = first_words(pa.array(list(texts), pa.large_string()), int(self.config.get("max_words", 256)))
        flat, ends = tokens.to_pylist(), np.cumsum(counts)
        docs = [flat[e - n:e] for e, n in zip(ends, counts)]
        empty = [i for i, d in enumerate(docs) if not d]
        if empty:
            raise ValueError(f"text {empty[0] + 1} has no words")
        return docs

    def predict_many(self, texts: Sequence[str], k: int = 3) -> list[Labelled]:
        """The k most probable labels of each text."""
        probs = self.model.predict(self.words(texts))  # (Q, C)
        out = []
        for p in probs:
            order = np.argsort(-p, kind="stable")[:k]
            out.append(Labelled(self.labels[order[0]], [(self.labels[j], float(p[j])) for j in order]))
        return out

    def predict(self, text: str, k: int = 3) -> Labelled:
        return self.predict_many([text], k)[0]
