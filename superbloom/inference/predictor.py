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

A bad argument (k < 1, a string where a list of ids is expected, decode not a DecodeConfig, an int
id outside the vocabulary) is an ArgumentError naming it (superbloom.ArgumentError, a ValueError).
k beyond the vocabulary returns every id that can be ranked. A set model's context is a set: an id
given twice counts once (`Prediction.repeated` counts them); a sequence model keeps repeats
(inference/rank.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch

from .. import _bounds as check
from .rank import bounded_k, rank_contexts, reads_sets
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
    context: list[str] = field(default_factory=list)  # known context ids, as stored (a set model's: distinct)
    unknown: list[str] = field(default_factory=list)  # context ids not in the vocabulary
    repeated: int = 0  # known context ids given again, counted once (a set model's; a history keeps them)


# answers (contexts x k) of one batch of predict_batches(): its Predictions are Python objects (~100 bytes each)
BATCH_ANSWERS = 1 << 20
ANSWER_BYTES = 16  # per ranked id of a Ranking: int64 id, float32 score, and its share of the work


def check_decode(decode) -> DecodeConfig:
    return check.instance("decode", decode, DecodeConfig, "a superbloom.DecodeConfig")


class Predictor:
    part = "whole"  # what ranks: the whole model, or a part of it (loader.rank_by)

    def __init__(self, model: SetModel, hashing: BloomHash, vocab: Vocab, config: dict):
        self.model, self.hashing, self.vocab, self.config = model.eval(), hashing, vocab, config
        self._vectors = self._unit = None  # item_vectors(), on first use
        self.path: Path | None = None  # the folder it was loaded from (save copies it)

    @classmethod
    def load(cls, model_dir: str | Path, device: str = "auto", mmap: bool = True) -> "Predictor":
        """The model directory's inference checkpoint (BEST, else LATEST) on `device` (device.py). On the
        CPU with mmap=True the weights are views of the memory-mapped checkpoint file, shared by every
        process that maps it (mapped.py); else they are read into memory."""
        # every file checked before it is trusted (storage/loading.py): one line naming the file otherwise
        model_dir = expect_kind(check.path("model_dir", model_dir), "model")
        ckpt = require_inference_checkpoint(model_dir)
        config = read_config(model_dir, {"model": dict, "head": dict})
        mcfg = typed_section(model_dir / "config.json", config, "model", ModelConfig)
        try:
            hcfg = head_config_from_dict(config["head"])
        except (TypeError, ValueError, KeyError) as e:
            raise LoadError(f"{model_dir / 'config.json'}: field 'head': {e}") from None
        dev = resolve_device(check.device("device", device))
        # the hash maps, and a large vocabulary, are memory-mapped on the CPU: serve's workers share them
        hashing = BloomHash.load(model_dir / "hashing.safetensors", mmap=mmap and dev.type == "cpu")
        # a large vocabulary is memory-mapped (mapped_vocab.py): serve's worker processes share it
        vocab = Vocab.load(model_dir, mapped=mmap and vocab_size(model_dir) >= MAPPED_MIN_IDS)
        if hashing.n_ids != len(vocab):  # the maps of another vocabulary: every id would get another's tokens
            raise LoadError(f"{model_dir / 'hashing.safetensors'}: maps {hashing.n_ids:,} ids, but vocab.txt holds "
                            f"{len(vocab):,}; expected the files superbloom wrote together (edited or copied?)")
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

    def export(self, out: str | Path) -> Path:
        """This model's encoder and head scores as a TorchScript file (export.py), checked against PyTorch;
        decoding stays in the library."""
        from .export import export_network

        return export_network(self, check.path("out", out))

    def save(self, out: str | Path) -> Path:
        """This model's folder copied to `out` for sharing (storage/share.py: the inference checkpoint, no
        optimizer state); `sb.load(out)` ranks exactly as this model."""
        from ..storage.share import copy_model

        check.path("out", out)
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
        """rank_contexts: top-k ids for contexts (Q, c) of int ids (-1 pads), never an id of exclude (Q, X)
        (None: the contexts), only ids of allow (A,) when given -> Ranking (Q, min(k, ids))."""
        contexts, k, exclude, allow = self.check_rank(contexts, k, decode, batch_size, exclude, allow)
        return rank_contexts(self.model, self.hashing, contexts, k, decode, batch_size, progress, exclude, allow)

    def check_rank(self, contexts, k, decode, batch_size, exclude, allow):
        """rank's arguments checked (ArgumentError naming the first bad one) -> (contexts, k clamped to
        the vocabulary, exclude, allow) as int64 arrays; the answer must fit the memory available."""
        n = len(self.vocab)
        contexts = self._id_matrix("contexts", contexts, n)
        k = bounded_k(check.integer("k", k, 1), n)
        check_decode(decode)
        check.integer("batch_size", batch_size, 1)
        if exclude is not None:
            exclude = self._id_matrix("exclude", exclude, n)
            if len(exclude) != len(contexts):
                raise check.ArgumentError("exclude", f"expected one row per context ({len(contexts):,}), got "
                                                     f"{len(exclude):,}")
        if allow is not None:
            allow = np.asarray(allow)
            if allow.ndim != 1 or (allow.size and (allow.dtype.kind not in "iu" or allow.min() < 0
                                                   or allow.max() >= n)):
                raise check.ArgumentError("allow", f"expected a 1-D array of ids in [0, {n:,})")
        check.fits_memory("k", len(contexts) * k * ANSWER_BYTES, f"ranking {len(contexts):,} contexts x {k:,} ids",
                          "ask for fewer ids, or rank fewer contexts at a time (predict_batches() streams them)")
        return contexts, k, exclude, allow

    @staticmethod
    def _id_matrix(name: str, value, n: int) -> np.ndarray:
        """(Q, c) int ids in [0, n), -1 padding -> int64 array; ArgumentError naming `name` otherwise."""
        try:
            a = np.asarray(value)
        except (TypeError, ValueError) as e:
            raise check.ArgumentError(name, f"expected a (queries, ids) array of int ids, got {e}") from None
        if a.ndim != 2 or (a.size and a.dtype.kind not in "iu"):
            raise check.ArgumentError(name, f"expected a (queries, ids) array of int ids (-1 pads), got shape "
                                            f"{a.shape} of {a.dtype}")
        if a.size and (a.min() < -1 or a.max() >= n):
            bad = int(a.max()) if a.max() >= n else int(a.min())
            raise check.ArgumentError(name, f"id {bad:,} is outside the model's ids [0, {n:,}) (-1 pads)")
        return a.astype(np.int64, copy=False)

    def variants(self) -> dict:
        """Named variants ranked beside the model on the same examples (evaluate): its head's
        (heads/base.py Variant: the hybrid's "network alone" and "term alone")."""
        return self.model.head.variants()

    def label(self) -> str:
        """The model's row in an evaluation report (its head's)."""
        return self.model.head.label()

    def _rank_as(self, part: str, variant=None) -> None:
        """Rank from now on as `part` (inference/parts.py rank_by): inside `variant` (a heads/base.py
        Variant, entered for the model's life: the reference kept keeps it from being closed and
        undone), or as the model is (None: at weight 0 the whole model is its network alone)."""
        if variant is not None:
            variant.__enter__()
        self.part, self._part_context = part, variant

    def ranked_alongside(self):
        """A block whose rank passes also rank some variants from the same scores (heads/base.py);
        its dict then holds name -> Ranking for those."""
        return self.model.head.ranked_alongside()

    def describe_head(self) -> dict:
        """The head's settings reported beside its variants (the hybrid's mix, decay and term)."""
        return self.model.head.describe()

    def resolve(self, ids: Iterable[str], name: str = "allow") -> tuple[np.ndarray, list[str]]:
        """An allow- or deny-list of string ids -> (its known ids, sorted unique int64; the unknown
        strings). An allow-list with no known id is an ArgumentError naming `name`: nothing could be returned."""
        known, unknown = self.vocab.lookup(check.id_list(name, ids))
        known = np.unique(np.asarray(known, np.int64))
        if name == "allow" and len(known) == 0:
            shown = ", ".join(unknown[:5]) + (", ..." if len(unknown) > 5 else "")
            raise check.ArgumentError("allow", f"none of the {len(unknown)} ids is in the model's vocabulary "
                                               f"(unknown: {shown or 'no ids given'})")
        return known, list(unknown)

    def read_context(self, ids: Iterable[str], name: str = "ids") -> tuple[np.ndarray, list[str], int]:
        """A context of string ids -> (its known int ids, in order; the unknown strings; the known ids
        given again). A set model's known ids are distinct (a repeat counts once, the first kept, as
        prepare keeps a set); a history keeps its repeats (0 counted). ArgumentError naming `name` for
        what is not a list of strings."""
        known, unknown = self.vocab.lookup(check.id_list(name, ids))
        if not reads_sets(self.model.encoder.cfg) or len(known) < 2:
            return known, unknown, 0
        # first occurrences in order; plain Python (a context is short): a NumPy sort would release the
        # GIL and wait for it behind the server's batcher thread (measured: ~1 ms per request under load)
        distinct = list(dict.fromkeys(known.tolist()))
        return np.asarray(distinct, np.int64), unknown, len(known) - len(distinct)

    def predict(self, ids: Sequence[str], k: int = 10, decode: DecodeConfig = DecodeConfig(),
                allow: Iterable[str] | None = None, deny: Iterable[str] | None = None,
                exclude_seen: bool = True) -> Prediction:
        """Top-k ids for one context of string ids (stored or display form)."""
        return self.predict_many([check.id_list("ids", ids)], k, decode, allow, deny, exclude_seen)[0]

    def predict_many(self, contexts: Sequence[Sequence[str]], k: int = 10, decode: DecodeConfig = DecodeConfig(),
                     allow: Iterable[str] | None = None, deny: Iterable[str] | None = None,
                     exclude_seen: bool = True) -> list[Prediction]:
        """Top-k ids for each context. A context with no id in the vocabulary is a ValueError (the
        same answer as the HTTP API's 422): a prediction from an empty context would be a guess.
        allow / deny: lists of ids, or a pathlib.Path to a file of them (recommend.py)."""
        contexts = [check.id_list(f"contexts[{i}]", c) for i, c in enumerate(check.contexts(contexts))]
        k = self._check_k(k, decode, exclude_seen)
        check.fits_memory("k", len(contexts) * k * 100, f"{len(contexts):,} Predictions of {k:,} ids",
                          "ask for fewer ids, or use recommend(), which answers in arrays")
        allow_ids, deny_ids = self._lists(allow, deny)
        return self._predict(contexts, k, decode, allow_ids, deny_ids, exclude_seen=exclude_seen)

    def _check_k(self, k, decode, exclude_seen: bool = True) -> int:
        """k (>= 1; clamped to the vocabulary), decode and exclude_seen checked -> k."""
        check_decode(decode)
        check.flag("exclude_seen", exclude_seen)
        return bounded_k(check.integer("k", k, 1), len(self.vocab))

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
        Prediction (its unknown ids listed) instead of a ValueError naming its row. A batch holds at
        most BATCH_ANSWERS ids (fewer contexts than batch_size when k is large)."""
        contexts = check.contexts(contexts)
        k = self._check_k(k, decode, exclude_seen)
        batch_size = min(check.integer("batch_size", batch_size, 1), max(1, BATCH_ANSWERS // k))
        check.flag("skip_empty", skip_empty)
        allow_ids, deny_ids = self._lists(allow, deny)
        return self._predict_batches(contexts, k, decode, allow_ids, deny_ids, batch_size, skip_empty, exclude_seen)

    def _predict_batches(self, contexts, k, decode, allow_ids, deny_ids, batch_size, skip_empty, exclude_seen):
        batch: list[Sequence[str]] = []
        start = 0
        for ctx in contexts:
            batch.append(check.id_list(f"contexts[{start + len(batch)}]", ctx))
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
        known, unknown, repeated = zip(*(self.read_context(c) for c in contexts)) if contexts else ((), (), ())
        for i, (kn, un) in enumerate(zip(known, unknown)):
            if len(kn) == 0 and not skip_empty:
                shown = ", ".join(un[:5]) + (", ..." if len(un) > 5 else "")
                one = len(contexts) == 1 and not start
                raise check.ArgumentError("ids" if one else "contexts", f"none of the {len(un)} ids is in the "
                                          f"model's vocabulary (unknown: {shown or 'no ids given'})",
                                          "context" if one else f"context {start + i}")
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
                                list(unknown[i]), repeated[i])
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
        cosine with `id`'s, best first, `id` itself excluded (k beyond the vocabulary: every other id).
        An unknown id is an ArgumentError naming `id`."""
        i = self.vocab.get(check.instance("id", id, str, "a string id"))
        if i is None:
            raise check.ArgumentError("id", f"{id!r} is not in the model's vocabulary")
        k = bounded_k(check.integer("k", k, 1), len(self.vocab))
        self.item_vectors()
        rows, cos = nearest(self._unit, [i], k)
        return [(self.vocab.strings[r], float(c)) for r, c in zip(rows[0].tolist(), cos[0].tolist()) if r >= 0]

    def prediction_json(self, pred: Prediction) -> dict:
        """A Prediction as JSON: the shape of the HTTP API's /v1/predict answer."""
        check.instance("pred", pred, Prediction, "a Prediction")
        return {"predictions": [{"id": i, "display": self.vocab.display(self.vocab.get(i)),
                                 "score": s if math.isfinite(s) else None} for i, s in pred.items],
                "exact": pred.exact, "beam": pred.beam, "context": pred.context, "unknown": pred.unknown,
                "repeated": pred.repeated}

