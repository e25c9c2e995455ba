"""Evaluation: a protocol's examples (protocols.py), model and baselines side by side on the same.

`protocol="sets"`, the paper's protocol (sec. 3.1) on held-out sets: for each held-out set one random
contiguous segment of up to n = 32 ids, one random id of it held out (or several,
`targets_per_set`, each its own example), the rest of the segment is the context. Context ids are
excluded from every ranking. A held-out id never seen in training is kept as an example and counts
as a miss for every method (reported as `targets_unseen`); sets with fewer than two ids cannot give
an example (reported as `sets_skipped`).

`protocol="leave-one-out"` (sequence recommendation) on a `prepare --split leave-one-out`
dataset: one example per user, the `split` ("valid" or "test") target ranked against every id (full
ranking, no sampled negatives) from the most recent `context_len` ids of the user's history, order
kept. `exclude_history` says whether the user's whole history is excluded from every ranking (the
report states which). Metrics: HR@1/5/10/20, NDCG@5/10/20, MRR (truncated at `depth`). Baselines
are fitted on the training prefixes; co-occurrence scores from the last `cooc_last` context ids,
EASE from the whole context. A model with learned positions for P elements gets contexts of at
most P - 1 ids (the query's [MASK] takes the last position); every method sees those same contexts.

The examples are a function of the dataset, the protocol settings and the seed only, so the model
and every baseline see the very same.

`evaluate(predictor, data, cfg) -> EvalResult` runs one protocol of the registry (protocols.py; "auto":
the one that claims the dataset) through its hooks: the model, each named variant of its head
(heads/base.py `variants()`: the hybrid's network alone) and each baseline rank the same examples.
The result is typed: named fields, the per-method target ranks and the examples' targets and
bootstrap groups (what compare.py pairs on), `to_dict()` (the JSON of `eval --json` and the demo's
eval.json), `report()` (the table a person reads), `save(dir)` / `load(dir)` (JSON + .npz, no pickle).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import _bounds as check
from .._log import progress_bar
from ..data.dataset import Dataset
from .metrics import target_ranks
from .protocols import Examples, LeaveOneOut, SetHoldout, make_examples  # noqa: F401 (train.py, benchmarks)
from .protocols import EvalProtocol, protocol, resolve
from .config import PROTOCOLS, EvalConfig, require_baselines  # noqa: F401 (re-exported: callers import them here)


@dataclass
class EvalResult:
    """One evaluation: the metrics of every method on the same examples, and the ranks behind them."""
    protocol: str  # the registry name: "sets", "leave-one-out", "text"
    model: dict  # the model's metrics (the protocol's summary, with its intervals)
    counts: dict  # examples and the protocol's counts (targets_unseen, sets_skipped, ...)
    decoding: dict  # certified_exact, mean_beam, queries_per_second
    settings: dict  # the protocol settings ("protocol" in to_dict())
    baselines: dict[str, dict] = field(default_factory=dict)  # name -> metrics + "seconds", or {"skipped": why}
    head: dict | None = None  # head.describe(), where the head has variants
    variants: dict[str, dict] = field(default_factory=dict)  # a variant's key -> metrics ("network_only")
    ranks: dict[str, np.ndarray] = field(default_factory=dict)  # method -> (E,) 1-based target ranks, 0: missed
    # ("model", the variants' keys, the baselines ranked)
    targets: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # (E,) the examples' targets
    groups: np.ndarray | None = None  # (E,) the bootstrap's groups; None: each example its own
    labels: dict[str, str] = field(default_factory=dict)  # the report's rows: "model" and each variant's key -> label
    about: str = ""  # what the variants are, for the report (heads/base.py Variant.about)

    @property
    def entry(self) -> EvalProtocol:
        return protocol(self.protocol)

    def to_dict(self) -> dict:
        """The JSON of `eval --json` and eval.json: the model's metrics at the top level."""
        out = {**self.model, **self.counts, **self.decoding, "protocol": self.settings, "baselines": self.baselines}
        if self.head is not None:
            out["head"] = self.head
        return out | self.variants

    def report(self) -> str:
        """The table a person reads: one row per method, then the protocol's notes."""
        return self.entry.report(self)

    def save(self, path) -> Path:
        """result.json (every field but the arrays) and ranks.npz (the ranks, targets, groups) in `path`."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        meta = {"protocol": self.protocol, "model": self.model, "counts": self.counts, "decoding": self.decoding,
                "settings": self.settings, "baselines": self.baselines, "head": self.head,
                "variants": self.variants, "methods": list(self.ranks), "grouped": self.groups is not None,
                "labels": self.labels, "about": self.about}
        (path / "result.json").write_text(json.dumps(meta, indent=1) + "\n")
        arrays = {"targets": self.targets, **{f"ranks.{m}": r for m, r in self.ranks.items()}}
        if self.groups is not None:
            arrays["groups"] = self.groups
        np.savez(path / "ranks.npz", **arrays)
        return path

    @classmethod
    def load(cls, path) -> "EvalResult":
        path = Path(path)
        meta = json.loads((path / "result.json").read_text())
        with np.load(path / "ranks.npz", allow_pickle=False) as z:
            ranks = {m: z[f"ranks.{m}"] for m in meta["methods"]}
            targets, groups = z["targets"], (z["groups"] if meta["grouped"] else None)
        return cls(meta["protocol"], meta["model"], meta["counts"], meta["decoding"], meta["settings"],
                   meta["baselines"], meta["head"], meta["variants"], ranks, targets, groups,
                   meta.get("labels", {}), meta.get("about", ""))


log = logging.getLogger(__name__)
# examples x ids above which a full evaluation names --max-sets (113,304 users x 957,363 ids took
# about 17 minutes for a hybrid and its two parts on 2 cores)
SAMPLE_HINT_SCORES = 2e10


RANKED_BYTES = 16  # per ranked id of one method's ranking (int64 id, float32 score, the work beside them)


def check_arguments(predictor, data, cfg) -> None:
    """evaluate's and compare's arguments: a loaded id model, a Dataset, an EvalConfig (ArgumentError)."""
    if not (hasattr(predictor, "rank") and hasattr(predictor, "vocab")):
        raise check.ArgumentError("predictor", f"expected a loaded id model (superbloom.load), got "
                                               f"{check.shown(predictor)}")
    check.instance("data", data, Dataset, "a superbloom.Dataset")
    check.instance("cfg", cfg, EvalConfig, "a superbloom.EvalConfig")


def check_vocabulary(vocab, data: Dataset) -> None:
    """The model's ids must be the dataset's ids, in the same order (the int ids index both)."""
    if vocab.strings != data.vocab.strings:
        first = next((i for i, (a, b) in enumerate(zip(vocab.strings, data.vocab.strings)) if a != b),
                     min(len(vocab), len(data.vocab)))
        raise ValueError(f"{data.path}: the dataset's vocabulary ({len(data.vocab):,} ids) is not the model's "
                         f"({len(vocab):,} ids; they first differ at id {first}): evaluate a model on the dataset "
                         "it was trained on (or one prepared with the same vocabulary)")


def evaluate(predictor, data: Dataset, cfg: EvalConfig = EvalConfig(), progress: bool = True) -> EvalResult:
    """Metrics of the model, its head's variants and the baselines on the same examples (module docstring).
    A depth beyond the dataset's ids is clamped to them (every id retrieved: the same metrics); the
    rankings of every example at that depth must fit the memory available (ArgumentError naming depth)."""
    check_arguments(predictor, data, cfg)
    check.flag("progress", progress)
    cfg = dataclasses.replace(cfg, depth=min(cfg.depth, data.n_ids))
    check_vocabulary(predictor.vocab, data)
    entry = resolve(cfg.protocol, data)
    model_config = getattr(predictor, "config", None) or {}
    # every baseline named is checked before any ranking (an unknown name is refused here, one line; a
    # missing optional package is one line naming its extra)
    skipped = {name: entry.baseline_skipped(name, data) for name in entry.baselines(cfg)}
    require_baselines([name for name, why in skipped.items() if not why])
    ex = entry.examples(data, cfg, model_config)
    targets = entry.targets(ex)
    check.fits_memory("depth", 2 * len(targets) * cfg.depth * RANKED_BYTES,
                      f"ranking {len(targets):,} examples to depth {cfg.depth:,}",
                      "lower depth, or evaluate fewer sets (max_sets)")
    if progress and not cfg.max_sets and len(targets) * data.n_ids > SAMPLE_HINT_SCORES:
        log.info(f"ranking {len(targets):,} examples over all {data.n_ids:,} ids, for the model and each part "
                 "and baseline: `eval --max-sets N` (EvalConfig.max_sets) evaluates N of them")
    t0 = time.time()
    with predictor.ranked_alongside() as alongside:  # variants ranked in the model's own pass (the network alone)
        ranking = entry.rank_model(predictor, ex, cfg, progress)
    seconds = time.time() - t0
    ranks = {"model": target_ranks(ranking.ids.numpy(), targets)}
    result = EvalResult(entry.name, entry.summarize(ranks["model"], ex), entry.counts(ex), ranking.report(seconds),
                        entry.settings(cfg, model_config), ranks=ranks, targets=targets, groups=entry.groups(ex))
    variants = predictor.variants()  # its head's (Predictor) or its own (an Ensemble)
    if variants:
        result.head = predictor.describe_head()
        result.about = "; ".join(f"'{v.label}' is {v.about}" for v in variants.values())
    result.labels["model"] = predictor.label()
    for name, variant in variants.items():  # the head as each named variant, on the same examples
        if name in alongside:
            r = target_ranks(alongside[name].ids.numpy(), targets)
        else:
            with variant:
                r = target_ranks(entry.rank_model(predictor, ex, cfg, progress).ids.numpy(), targets)
        ranks[variant.key] = r
        result.variants[variant.key] = entry.summarize(r, ex)
        result.labels[variant.key] = variant.label
    bar = progress_bar(skipped.items(), desc="baselines", progress=progress and any(not w for w in skipped.values()),
                       leave=False)
    for name, why in bar:
        if why:
            result.baselines[name] = {"skipped": why}
            continue
        bar.set_postfix_str(name)  # one may take minutes (a fit over every pair of ids, ALS, item2vec)
        t0 = time.time()
        chosen: dict = {}  # a setting the baseline chose on validation examples (BaselineEntry.choose)
        r = target_ranks(entry.rank_baseline(name, data, ex, cfg, chosen), targets)
        result.baselines[name] = entry.summarize(r, ex) | chosen | {"seconds": round(time.time() - t0, 2)}
        ranks[name] = r
    return result
