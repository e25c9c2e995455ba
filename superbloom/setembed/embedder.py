"""Use a trained set embedding (library API, CLI, HTTP service): the vector of a set, the nearest
training sets, and its label with confidence rejection.

    from superbloom.setembed import load_embedder
    emb = load_embedder("runs/pages_nca")
    emb.similar(["Jazz", "Miles_Davis"], k=10)        # -> Similar(items=[("John_Coltrane", 0.93), ...])
    emb.classify(["Jazz", "Miles_Davis"], reject=0.8) # -> Classified(label="Music", confidence=0.9, ...)
    emb.embed_many([["Jazz"], ["Paris", "France"]])   # -> (2, d) float32 unit vectors

`similar` ranks the training sets of the model's index by cosine (exact: setembed.knn.topk_cosine).
`classify` uses the classifier head for a model trained with the softmax objective and the
similarity-weighted votes of the k nearest labelled training sets otherwise (`method` chooses);
a prediction whose confidence is under `reject` is rejected (label None), the blog's "Simple First"
rule. Ids not in the vocabulary are ignored and reported; a set with no known id is a ValueError
(the HTTP API's 422).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence
from urllib.parse import unquote

import numpy as np
import torch
from safetensors.torch import load_file

from ..storage.loading import check_safetensors, expect_kind, read_config, typed_section
from ..storage.checkpoint import inference_checkpoint, load_weights
from ..data.dataset import SetArray
from ..model.device import resolve_device
from ..storage.files import read_lines
from ..hashing.bloom import BloomHash
from ..model.encoder import ModelConfig, count_parameters
from ..data.vocab import Vocab
from .knn import knn_votes, topk_cosine
from .model import EmbedConfig, SetEmbedder, embed_sets
from .objectives import REGISTRY, objective
from .train import EmbedLoss
from .config import METHODS  # noqa: F401 (re-exported: callers import it here)


@dataclass
class Similar:
    items: list[tuple[str, float]]  # (training set key, cosine), best first
    context: list[str] = field(default_factory=list)  # known ids, as stored
    unknown: list[str] = field(default_factory=list)  # ids not in the vocabulary


@dataclass
class Classified:
    label: str | None  # None: rejected (confidence under the threshold)
    confidence: float  # top share of the votes / top softmax probability
    scores: list[tuple[str, float]]  # (label, share or probability), best first
    method: str  # knn | head
    context: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


class Embedder:
    def __init__(self, net: SetEmbedder, hashing: BloomHash, vocab: Vocab, config: dict, vectors: np.ndarray,
                 labels: np.ndarray, set_keys: list[str]):
        self.net, self.hashing, self.vocab, self.config = net.eval(), hashing, vocab, config
        self.vectors = torch.from_numpy(vectors)  # (S, d) index of the training sets
        self.labels = torch.from_numpy(labels.astype(bool))  # (S, L)
        self.set_keys = set_keys
        self.label_names: list[str] = list(config.get("labels", []))
        self.path: Path | None = None  # the folder it was loaded from (save copies it)

    @classmethod
    def load(cls, model_dir: str | Path, device: str = "auto") -> "Embedder":
        """A directory written by `superbloom embed-train` (its index and inference checkpoint)."""
        model_dir = expect_kind(model_dir, "set-embedding")  # an id model or a dataset here: one line naming it
        if not (model_dir / "config.json").is_file() or "embed" not in read_config(model_dir, {}):
            raise FileNotFoundError(f"{model_dir}: not a set-embedding model directory (no config.json with an "
                                    "'embed' section; write one with `superbloom embed-train`)")
        ckpt = inference_checkpoint(model_dir)
        if ckpt is None or not (model_dir / "index.safetensors").is_file():
            raise FileNotFoundError(f"{model_dir}: no complete checkpoint and index (was `superbloom embed-train` "
                                    "interrupted? run it again with --resume)")
        config = read_config(model_dir, {"embed": dict, "model": dict})
        hashing = BloomHash.load(model_dir / "hashing.safetensors")
        check_safetensors(model_dir / "index.safetensors", "the set index (index.safetensors)")
        index = load_file(str(model_dir / "index.safetensors"))
        labels = index["labels"].numpy().astype(bool)  # (S, L)
        cfg = typed_section(model_dir / "config.json", config, "embed", EmbedConfig)
        vocab = Vocab.load(model_dir)
        model_cfg = typed_section(model_dir / "config.json", config, "model", ModelConfig)
        net = SetEmbedder(model_cfg, cfg, hashing, n_labels=len(config.get("labels", [])),
                          bank_labels=torch.zeros(_bank_size(ckpt), labels.shape[1], dtype=torch.bool)
                          if objective(cfg.objective).bank else None, vocab=vocab.strings if model_cfg.dynamic else None)
        load_weights(EmbedLoss(net), ckpt)  # the bank's labels come back with the weights
        net.to(resolve_device(device))
        config["checkpoint"] = ckpt.name
        out = cls(net, hashing, vocab, config, index["vectors"].numpy(), labels, read_lines(model_dir / "index.sets.txt"))
        out.path = model_dir
        return out

    def save(self, out: str | Path) -> Path:
        """This embedding's folder copied to `out` (storage/share.py: its index and inference checkpoint, no
        optimizer state); `sb.load(out)` answers the same."""
        from ..storage.share import copy_model

        if self.path is None:
            raise ValueError("save: this set embedding was not loaded from a folder")
        return copy_model(self.path, out, "set-embedding")

    @property
    def n_parameters(self) -> int:
        return count_parameters(self.net)

    def info(self) -> dict:
        """What this model is (the same keys for every kind sb.load returns: kind, parameters, checkpoint)."""
        c = self.config
        return {"kind": "set-embedding", "parameters": self.n_parameters, "checkpoint": c.get("checkpoint"),
                "ids": len(self.vocab), "objective": self.net.cfg.objective, "sets": len(self.set_keys),
                "labels": list(self.label_names), "dataset": (c.get("dataset") or {}).get("name"),
                "device": str(self.device)}

    @property
    def device(self) -> torch.device:
        return next(self.net.parameters()).device

    # ------------------------------------------------------------------ vectors

    def lookup(self, contexts: Sequence[Sequence[str]]) -> tuple[list[np.ndarray], list[list[str]]]:
        """String ids -> known int ids per context; a context with none known is a ValueError."""
        known, unknown = zip(*(self.vocab.lookup(c) for c in contexts)) if contexts else ((), ())
        for i, (kn, un) in enumerate(zip(known, unknown)):
            if len(kn) == 0:
                shown = ", ".join(un[:5]) + (", ..." if len(un) > 5 else "")
                raise ValueError(f"{'set' if len(contexts) == 1 else f'set {i}'}: none of the {len(un)} ids is in "
                                 f"the model's vocabulary (unknown: {shown or 'no ids given'})")
        return list(known), [list(u) for u in unknown]

    def embed_ids(self, known: Sequence[np.ndarray]) -> np.ndarray:
        """Known int ids per set -> (Q, d) float32 unit vectors."""
        return self.embed_sets(SetArray.from_lists([np.asarray(k) for k in known]))

    def embed_sets(self, sets: SetArray) -> np.ndarray:
        """Sets of the model's int ids (-1: unknown, skipped) -> (S, d) float32 unit vectors (zero for
        a set with no known id)."""
        return embed_sets(self.net, self.hashing, sets)

    def embed_many(self, contexts: Sequence[Sequence[str]]) -> np.ndarray:
        """String ids per set -> (Q, d) float32 unit vectors."""
        return self.embed_ids(self.lookup(contexts)[0])

    # ------------------------------------------------------------------ retrieval and classification

    def similar_many(self, contexts: Sequence[Sequence[str]], k: int = 10) -> list[Similar]:
        known, unknown = self.lookup(contexts)
        scores, index = topk_cosine(torch.from_numpy(self.embed_ids(known)), self.vectors, k)
        return [Similar([(self.set_keys[j], float(s)) for j, s in zip(index[i].tolist(), scores[i].tolist()) if j >= 0],
                        self.vocab.decode(known[i].tolist()), unknown[i]) for i in range(len(known))]

    def similar(self, ids: Sequence[str] | str, k: int = 10) -> Similar:
        """The k training sets nearest (cosine) to the set of `ids` (one id: a string)."""
        return self.similar_many([[ids] if isinstance(ids, str) else ids], k)[0]

    def resolve_method(self, method: str = "auto") -> str:
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
        if not self.label_names:
            raise ValueError("this set embedding was trained without labels (embed-train --labels FILE): "
                             "it can find similar sets but not classify")
        if method == "head" and self.net.classifier is None:
            with_head = ", ".join(n for n, o in REGISTRY.items() if o.classifier)
            raise ValueError(f"method 'head' needs a model trained with a classifier head (--objective {with_head}); "
                             f"this one was trained with {self.net.cfg.objective}: use method 'knn'")
        return method if method != "auto" else ("head" if self.net.classifier is not None else "knn")

    def shares(self, vectors: np.ndarray, method: str = "auto", k: int = 10) -> tuple[np.ndarray, str]:
        """(Q, d) vectors -> ((Q, L) class shares / probabilities, the method used)."""
        method = self.resolve_method(method)
        z = torch.from_numpy(vectors)
        if method == "head":
            with torch.no_grad():
                return torch.softmax(self.net.logits(z.to(self.device)), dim=1).cpu().numpy(), method
        scores, index = topk_cosine(z, self.vectors, k)
        return knn_votes(scores, index, self.labels).numpy(), method

    def classify_many(self, contexts: Sequence[Sequence[str]], reject: float = 0.0, method: str = "auto",
                      k: int = 10, top: int = 5) -> list[Classified]:
        known, unknown = self.lookup(contexts)
        shares, method = self.shares(self.embed_ids(known), method, k)
        out = []
        for i in range(len(known)):
            order = np.argsort(-shares[i], kind="stable")[:top]
            conf = float(shares[i, order[0]])
            label = self.label_names[order[0]] if conf >= reject and conf > 0 else None
            out.append(Classified(label, conf, [(self.label_names[j], float(shares[i, j])) for j in order], method,
                                  self.vocab.decode(known[i].tolist()), unknown[i]))
        return out

    def classify(self, ids: Sequence[str], reject: float = 0.0, method: str = "auto", k: int = 10) -> Classified:
        """The label of the set of `ids`, or None if its confidence is under `reject`."""
        return self.classify_many([ids], reject, method, k)[0]


def _bank_size(ckpt: Path) -> int:
    """Rows of the NCA memory bank stored in a checkpoint (read from the safetensors header)."""
    from safetensors import safe_open

    with safe_open(str(ckpt / "model.safetensors"), "pt") as f:
        return int(f.get_slice("net.bank.vectors").get_shape()[0])


def similar_json(s: Similar) -> dict:
    """A Similar as JSON: the shape of POST /v1/similar's answer."""
    return {"similar": [{"set": k, "display": display(k), "score": round(x, 6)} for k, x in s.items],
            "context": s.context, "unknown": s.unknown}


def classify_json(c: Classified) -> dict:
    """A Classified as JSON: the shape of POST /v1/classify's answer."""
    return {"label": c.label, "rejected": c.label is None, "confidence": round(c.confidence, 6), "method": c.method,
            "scores": [{"label": n, "score": round(x, 6)} for n, x in c.scores], "context": c.context,
            "unknown": c.unknown}


def display(key: str) -> str:
    """A set key for people: URL-decoded, spaces for underscores."""
    return unquote(key).replace("_", " ")


def load_embedder(model_dir: str | Path, device: str = "auto") -> Embedder:
    return Embedder.load(model_dir, device)
