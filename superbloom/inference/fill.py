"""Fill in the blank with a text model (Superbloom appendix E): top-k tokens for each [MASK] of a sentence.

    from superbloom.inference.fill import Filler
    f = Filler.load("runs/text")
    r = f.fill("Miles Davis is a jazz musician, he is similar to [MASK] .", k=10)
    r.blanks[0].fillers -> [("john_coltrane", -2.1), ("charlie_parker", -2.7), ...]

The sentence is tokenised exactly as the training data (text/encode.py: NFKC, lower-case, words,
greedy bigrams, so `miles davis` is the one token `miles_davis`), the blanks stay in place with
their neighbours on either side and positions 0..n-1, and the model's head ranks the vocabulary at
every blank at once (several blanks are predicted jointly from the rest, as in BERT; one blank does
not see another's answer). Nothing is excluded from the ranking but [UNK], which is never a
training target. A hashed model's answers come from Algorithm 1 with its exactness flag.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..model.batches import to_batch
from .rank import rank_batch
from ..heads.beam import DecodeConfig
from ..hashing.bloom import MASK_ELEM, PAD_ELEM
from .predictor import Predictor
from ..text.encode import EncodedText, TextEncoder
from ..model.text_batches import is_text_dataset
from ..text.ngrams import UNK_ID
from ..text.tokenize import TextConfig


@dataclass
class BlankFill:
    position: int  # index of the blank in the tokens
    fillers: list[tuple[str, float]]  # (token, score: the sum over the m hashes of log p), best first
    exact: bool  # the top-k is certified exact (always for the unhashed heads)
    beam: int


@dataclass
class FillResult:
    text: str
    tokens: list[str]  # the tokens the model read, "[MASK]" at every blank
    blanks: list[BlankFill]
    unknown: list[str] = field(default_factory=list)  # words that became [UNK]

    def to_json(self) -> dict:
        return {"text": self.text, "tokens": self.tokens, "unknown": self.unknown,
                "blanks": [{"position": b.position, "exact": b.exact, "beam": b.beam,
                            "fillers": [{"token": t, "display": t.replace("_", " "),
                                         "score": s if math.isfinite(s) else None} for t, s in b.fillers]}
                           for b in self.blanks]}


def is_text_model(config: dict) -> bool:
    """config.json of a model trained on a prepare-text dataset."""
    return is_text_dataset(config.get("data", {}))


class Filler:
    """A loaded text model and its tokeniser. Thread-safe: one fill runs the model at a time."""

    def __init__(self, predictor: Predictor, encoder: TextEncoder):
        self.predictor, self.encoder = predictor, encoder
        self.positions = int(predictor.config.get("model", {}).get("positions", 0) or 0)
        self.lock = threading.Lock()

    @classmethod
    def from_predictor(cls, predictor: Predictor, model_dir: str | Path) -> "Filler":
        if not is_text_model(predictor.config):
            raise ValueError(f"{model_dir}: not a text model (trained on a dataset without prepare-text's 'text' "
                             "settings); fill needs a model trained with --objective text-mlm on prepare-text data")
        t = predictor.config["data"]["text"]  # the text settings prepare-text used (config.json's data summary)
        cfg = TextConfig(**{k: t[k] for k in ("lowercase", "nfkc", "sentences") if k in t})
        return cls(predictor, TextEncoder(predictor.vocab, cfg))

    @classmethod
    def load(cls, model_dir: str | Path, device: str = "auto") -> "Filler":
        return cls.from_predictor(Predictor.load(model_dir, device), model_dir)

    def encode(self, text: str) -> EncodedText:
        q = self.encoder.encode(text)
        if self.positions and len(q.elements) > self.positions:
            raise ValueError(f"text too long: {len(q.elements)} tokens, this model reads at most {self.positions} "
                             "(its --positions)")
        return q

    def fill(self, text: str, k: int = 10, decode: DecodeConfig = DecodeConfig()) -> FillResult:
        return self.fill_many([text], k, decode)[0]

    @torch.no_grad()
    def fill_many(self, texts: list[str], k: int = 10, decode: DecodeConfig = DecodeConfig()) -> list[FillResult]:
        """Every blank of every text ranked in one model call."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        qs = [self.encode(t) for t in texts]
        w = max(len(q.elements) for q in qs)
        elems = np.full((len(qs), w), PAD_ELEM, np.int64)  # (Q, w)
        for i, q in enumerate(qs):
            elems[i, :len(q.elements)] = q.elements
        targets = np.where(elems == MASK_ELEM, 0, -1)  # (Q, w): the blanks, row-major (0: any id, unused)
        model, hashing = self.predictor.model, self.predictor.hashing
        device = next(model.parameters()).device
        with self.lock:
            model.eval()
            batch = to_batch(elems, targets, hashing, merge=False).to(device)
            unk = torch.full((batch.n_targets, 1), UNK_ID, dtype=torch.int64, device=device)
            r = rank_batch(model, batch, min(k, hashing.n_ids - 1), unk, decode)  # inference/rank.py
        strings = self.predictor.vocab.strings
        out, at = [], 0
        for text, q in zip(texts, qs):
            blanks = []
            for pos in q.blanks:
                fillers = [(strings[j], float(s)) for j, s in zip(r.ids[at].tolist(), r.scores[at].tolist()) if j >= 0]
                blanks.append(BlankFill(pos, fillers, bool(r.exact[at]), int(r.beam[at])))
                at += 1
            out.append(FillResult(text, q.words, blanks, q.unknown))
        return out


def format_fill(r: FillResult, show_scores: bool = True) -> str:
    lines = [r.text, "  read as: " + " ".join(r.tokens)]
    if r.unknown:
        lines.append("  not in the vocabulary ([UNK]): " + ", ".join(r.unknown))
    for i, b in enumerate(r.blanks, 1):
        items = [f"{t} ({s:.2f})" if show_scores else t for t, s in b.fillers]
        lines.append(f"  [MASK{i if len(r.blanks) > 1 else ''}]{'' if b.exact else ' (approximate)'}: " + " ".join(items))
    return "\n".join(lines)
