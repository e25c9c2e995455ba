"""Load a trained model directory and rank ids for contexts (library API, CLI, HTTP service).

    from superbloom import load
    model = load("runs/wiki/model")
    model.predict(["Miles_Davis", "Jazz"], k=10)   # -> Prediction(items=[("John_Coltrane", -3.1), ...])
    model.predict(["Jazz"], allow=["Miles_Davis", "Paris"], deny=["Copenhagen"])   # candidate lists
    recs = model.recommend(contexts, k=10)          # every context at once -> arrays (recommend.py)
    sims = model.similar_items(["Jazz", "Paris"], k=5)   # cosine of item vectors, exact, batched
    for batch in model.predict_batches(contexts, k=10):  # any iterable of contexts, streamed in batches
        ...                                              # -> list[Prediction], in input order

Allow- and deny-lists are string ids, one list for every context of a call: a deny-list is added to
each context's excluded ids; an allow-list restricts the answer to its ids, exact among them when
the decoding certifies (heads/base.py: topk_allowed). Their ids not in the vocabulary are ignored
(`resolve` says which). A context's own ids are never returned unless exclude_seen=False (re-purchase).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch

from .rank import rank_contexts
from .recommend import Recommendations, recommend, resolved, similar_items
from .vectors import item_vectors, nearest, normalized
from ..storage.loading import LoadError, expect_kind, read_config, typed_section
from ..storage.checkpoint import load_weights, require_inference_checkpoint
from ..heads.beam import DecodeConfig
from ..model.device import resolve_device
from ..storage.kinds import infer_kind
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
    part = "whole"  # what ranks: the whole model, or a part of it (loader.rank_by)

    def __init__(self, model: SetModel, hashing: BloomHash, vocab: Vocab, config: dict):
        self.model, self.hashing, self.vocab, self.config = model.eval(), hashing, vocab, config
        self._vectors = self._unit = None  # item_vectors(), on first use
        self.path: Path | None = None  # the folder it was loaded from (save copies it)

    @classmethod
    def load(cls, model_dir: str | Path, threads: int = 0, device: str = "auto", mmap: bool = True) -> "Predictor":
        """The model directory's inference checkpoint (BEST, else LATEST) on `device` (device.py). On the
        CPU with mmap=True the weights are views of the memory-mapped checkpoint file, shared by every
        process that maps it (mapped.py); else they are read into memory."""
        # every file checked before it is trusted (storage/loading.py): one line naming the file otherwise
        model_dir = expect_kind(model_dir, "model")
        ckpt = require_inference_checkpoint(model_dir)
        config = read_config(model_dir, {"model": dict, "head": dict})
        mcfg = typed_section(model_dir / "config.json", config, "model", ModelConfig)
        try:
            hcfg = head_config_from_dict(config["head"])
        except (TypeError, ValueError, KeyError) as e:
            raise LoadError(f"{model_dir / 'config.json'}: field 'head': {e}") from None
        if threads:
            torch.set_num_threads(threads)
        dev = resolve_device(device)
        # the hash maps, and a large vocabulary, are memory-mapped on the CPU: serve's workers share them
        hashing = BloomHash.load(model_dir / "hashing.safetensors", mmap=mmap and dev.type == "cpu")
        # a large vocabulary is memory-mapped (mapped_vocab.py): serve's worker processes share it
        vocab = Vocab.load(model_dir, mapped=mmap and vocab_size(model_dir) >= MAPPED_MIN_IDS)
        model = build_model(mcfg, hcfg, hashing, vocab.counts, vocab.strings).to(dev)
        if mmap and dev.type == "cpu":
            from ..storage.mapped import map_weights

            map_weights(model, ckpt)
        else:
            load_weights(model, ckpt)
        config["checkpoint"] = ckpt.name
        out = cls(model, hashing, vocab, config)
        out.path = model_dir
        return out

    def save(self, out: str | Path) -> Path:
        """This model's folder copied to `out` for sharing (storage/share.py: the inference checkpoint, no
        optimizer state); `sb.load(out)` ranks exactly as this model."""
        from ..storage.share import copy_model

        if self.path is None:
            raise ValueError("save: this model was not loaded from a folder (sb.load or sb.fit make one)")
        return copy_model(self.path, out, "model")

    @property
    def n_parameters(self) -> int:
        return count_parameters(self.model)

    def info(self) -> dict:
        """What this model is (the same keys for every kind sb.load returns: kind, parameters, checkpoint)."""
        c = self.config
        return {"kind": infer_kind(c), "parameters": self.n_parameters, "checkpoint": c.get("checkpoint"),
                "ids": len(self.vocab), "head": c["head"]["name"], "tokens": self.hashing.n_tokens,
                "dataset": (c.get("dataset") or {}).get("name"), "device": str(next(self.model.parameters()).device)}

    def rank(self, contexts: np.ndarray, k: int, decode: DecodeConfig = DecodeConfig(), batch_size: int = 256,
             progress: bool = False, exclude: np.ndarray | None = None, allow: np.ndarray | None = None) -> Ranking:
        """rank_contexts: top-k ids for contexts (Q, c), never an id of exclude (Q, X) (None: the
        contexts), only ids of allow (A,) when given."""
        return rank_contexts(self.model, self.hashing, contexts, k, decode, batch_size, progress, exclude, allow)

    def variants(self) -> dict:
        """Named variants ranked beside the model on the same examples (evaluate): its head's
        (heads/base.py; the hybrid's "network alone" and "term alone"), as context managers."""
        return self.model.head.variants()

    def ranked_alongside(self):
        """A block whose rank passes also rank some variants from the same scores (heads/base.py);
        its dict then holds name -> Ranking for those."""
        return self.model.head.ranked_alongside()

    def describe_head(self) -> dict:
        """The head's settings reported beside its variants (the hybrid's mix, decay and term)."""
        return self.model.head.describe()

    def resolve(self, ids: Iterable[str], name: str = "allow") -> tuple[np.ndarray, list[str]]:
        """An allow- or deny-list of string ids -> (its known ids, sorted unique int64; the unknown
        strings). An allow-list with no known id is a ValueError naming `name`: nothing could be returned."""
        known, unknown = self.vocab.lookup(list(ids))
        known = np.unique(np.asarray(known, np.int64))
        if name == "allow" and len(known) == 0:
            shown = ", ".join(unknown[:5]) + (", ..." if len(unknown) > 5 else "")
            raise ValueError(f"allow: none of the {len(unknown)} ids is in the model's vocabulary "
                             f"(unknown: {shown or 'no ids given'})")
        return known, list(unknown)

    def predict(self, ids: Sequence[str], k: int = 10, decode: DecodeConfig = DecodeConfig(),
                allow: Iterable[str] | None = None, deny: Iterable[str] | None = None,
                exclude_seen: bool = True) -> Prediction:
        """Top-k ids for one context of string ids (stored or display form)."""
        return self.predict_many([ids], k, decode, allow, deny, exclude_seen)[0]

    def predict_many(self, contexts: Sequence[Sequence[str]], k: int = 10, decode: DecodeConfig = DecodeConfig(),
                     allow: Iterable[str] | None = None, deny: Iterable[str] | None = None,
                     exclude_seen: bool = True) -> list[Prediction]:
        """Top-k ids for each context. A context with no id in the vocabulary is a ValueError (the
        same answer as the HTTP API's 422): a prediction from an empty context would be a guess.
        allow / deny: lists of ids, or a pathlib.Path to a file of them (recommend.py)."""
        allow_ids, deny_ids = self._lists(allow, deny)
        return self._predict(contexts, k, decode, allow_ids, deny_ids, exclude_seen=exclude_seen)

    def recommend(self, contexts: Iterable[Sequence[str]], k: int = 10, allow=None, deny=None,
                  exclude_seen: bool = True, decode: DecodeConfig = DecodeConfig(), batch_size: int = 256,
                  skip_empty: bool = False, progress: bool = False) -> Recommendations:
        """Top-k ids for every context at once -> Recommendations: ids, scores, exact flags as NumPy
        arrays, .to_arrow() / .to_pandas() (recommend.py); ranked `batch_size` contexts at a time."""
        return recommend(self, contexts, k, allow, deny, exclude_seen, decode, batch_size, skip_empty, progress)

    def similar_items(self, ids: Sequence[str], k: int = 10, allow=None, deny=None, exclude_seen: bool = True,
                      skip_empty: bool = False) -> Recommendations:
        """For each id, the k ids whose item vectors have the largest cosine with its own, among the
        allowed ids less the denied (recommend.py): exact, every id a row of the answer."""
        return similar_items(self, ids, k, allow, deny, exclude_seen, skip_empty)

    def predict_batches(self, contexts: Iterable[Sequence[str]], k: int = 10, decode: DecodeConfig = DecodeConfig(),
                        allow: Iterable[str] | None = None, deny: Iterable[str] | None = None, batch_size: int = 256,
                        skip_empty: bool = False, exclude_seen: bool = True) -> Iterator[list[Prediction]]:
        """Bulk predict_many over any iterable of contexts (a file's rows, a generator), `batch_size`
        at a time: yields one list of Predictions per batch, in input order; the allow- and deny-lists
        are resolved once. skip_empty=True: a context with no known id gets an empty, non-exact
        Prediction (its unknown ids listed) instead of a ValueError naming its row."""
        allow_ids, deny_ids = self._lists(allow, deny)
        batch: list[Sequence[str]] = []
        start = 0
        for ctx in contexts:
            batch.append(ctx)
            if len(batch) == batch_size:
                yield self._predict(batch, k, decode, allow_ids, deny_ids, skip_empty, start, exclude_seen)
                start, batch = start + len(batch), []
        if batch:
            yield self._predict(batch, k, decode, allow_ids, deny_ids, skip_empty, start, exclude_seen)

    def _lists(self, allow, deny) -> tuple[np.ndarray | None, np.ndarray | None]:
        return resolved(self, allow, "allow"), resolved(self, deny, "deny")

    def _predict(self, contexts: Sequence[Sequence[str]], k: int, decode: DecodeConfig, allow: np.ndarray | None,
                 deny: np.ndarray | None, skip_empty: bool = False, start: int = 0,
                 exclude_seen: bool = True) -> list[Prediction]:
        """predict_many on resolved allow / deny ids; `start` numbers the rows in error messages."""
        known, unknown = zip(*(self.vocab.lookup(c) for c in contexts)) if contexts else ((), ())
        for i, (kn, un) in enumerate(zip(known, unknown)):
            if len(kn) == 0 and not skip_empty:
                shown = ", ".join(un[:5]) + (", ..." if len(un) > 5 else "")
                where = "context" if len(contexts) == 1 and not start else f"context {start + i}"
                raise ValueError(f"{where}: none of the {len(un)} ids is in the model's vocabulary "
                                 f"(unknown: {shown or 'no ids given'})")
        rows = [i for i, kn in enumerate(known) if len(kn)]
        width = max([len(known[i]) for i in rows] + [0])
        mat = np.full((len(rows), width), -1, np.int64)  # (Q, c) the known contexts, -1 padded
        for r, i in enumerate(rows):
            mat[r, :len(known[i])] = known[i]
        exclude = None if exclude_seen else np.zeros((len(rows), 0), np.int64)  # None: the contexts
        if deny is not None and len(deny):  # (Q, c + D): the context (unless seen ids may come back) and the deny-list
            exclude = np.concatenate([mat if exclude_seen else exclude, np.broadcast_to(deny, (len(rows), len(deny)))], 1)
        r = self.rank(mat, k, decode, exclude=exclude, allow=allow)
        out = [Prediction([], False, 0, [], list(un)) for un in unknown]
        for q, i in enumerate(rows):
            items = [(self.vocab.strings[j], float(s)) for j, s in zip(r.ids[q].tolist(), r.scores[q].tolist())
                     if j >= 0]
            out[i] = Prediction(items, bool(r.exact[q]), int(r.beam[q]), self.vocab.decode(known[i].tolist()),
                                list(unknown[i]))
        return out

    def item_vectors(self) -> np.ndarray:
        """(N, d) float32, row i = vocabulary id i: the mean of each id's m input token embeddings
        (vectors.py; for the superbloom head these are tied to its output embedding). Computed once."""
        if self._vectors is None:
            self._vectors = item_vectors(self.model, self.hashing)
            self._unit = normalized(self._vectors)
        return self._vectors

    def similar(self, id: str, k: int = 10) -> list[tuple[str, float]]:
        """The k ids whose item vectors (item_vectors: mean input token embeddings) have the largest
        cosine with `id`'s, best first, `id` itself excluded. An unknown id is a ValueError."""
        i = self.vocab.get(id)
        if i is None:
            raise ValueError(f"id {id!r} is not in the model's vocabulary")
        self.item_vectors()
        rows, cos = nearest(self._unit, [i], k)
        return [(self.vocab.strings[r], float(c)) for r, c in zip(rows[0].tolist(), cos[0].tolist()) if r >= 0]

    def prediction_json(self, pred: Prediction) -> dict:
        """A Prediction as JSON: the shape of the HTTP API's /v1/predict answer."""
        return {"predictions": [{"id": i, "display": self.vocab.display(self.vocab.get(i)),
                                 "score": s if math.isfinite(s) else None} for i, s in pred.items],
                "exact": pred.exact, "beam": pred.beam, "context": pred.context, "unknown": pred.unknown}

