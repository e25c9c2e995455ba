"""Paired comparison of models on the very same evaluation examples (`superbloom eval A DATA --compare B`).

Two models evaluated separately each get an interval of their own, and two overlapping intervals
do not say that the models are level: the examples are shared, so most of each interval's width is
the examples' own difficulty, common to both. Here every model runs the same protocol with the same
seed (so the same examples: checked, not assumed), and each difference of the first model against
another model and against each baseline is given with the bootstrap interval of the DIFFERENCE
itself (metrics.paired_difference), resampling the protocol's groups as its own intervals do: whole
held-out sets (sets), whole test rows (text), users (leave-one-out).

Everything comes from the typed evaluate.EvalResult: the ranks of every method, the examples'
targets (compared, so a comparison is paired) and the bootstrap groups of the protocol's entry.

Per-example values: hits at k (rec@k, or hr@k for leave-one-out) for k = 1, 10, 20, and the
reciprocal rank (MRR, truncated at the retrieved depth).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .._bounds import ArgumentError
from .evaluate import EvalConfig, EvalResult, check_arguments, evaluate
from .metrics import hits_at, paired_difference

KS = (1, 10, 20)


def per_example(ranks: np.ndarray) -> dict[int | str, np.ndarray]:
    """{k: hits at k, "mrr": reciprocal rank} of (E,) 1-based ranks (0: not retrieved)."""
    ranks = np.asarray(ranks)
    out: dict = {k: hits_at(ranks, k) for k in KS}
    out["mrr"] = np.where(ranks > 0, 1.0 / np.maximum(ranks, 1), 0.0)
    return out


def paired(a: np.ndarray, b: np.ndarray, groups: np.ndarray | None, recall: str = "rec", n_boot: int = 1000,
           seed: int = 0) -> dict:
    """{metric: {"diff", "lo", "hi"}} of ranks a minus ranks b on the same examples."""
    va, vb = per_example(a), per_example(b)
    return {(f"{recall}@{k}" if k != "mrr" else "mrr"): paired_difference(va[k], vb[k], groups, n_boot, seed=seed)
            for k in va}


def check_comparable(model_dir, data) -> None:
    """Before any evaluation (which can take minutes): a model directory with a complete checkpoint,
    trained on a dataset with as many ids as `data` (evaluate() then checks the ids themselves)."""
    from ..storage.checkpoint import require_inference_checkpoint

    require_inference_checkpoint(model_dir)
    try:
        ids = json.loads((Path(model_dir) / "config.json").read_text()).get("data", {}).get("ids")
    except (OSError, ValueError):
        return  # evaluate() will say what is wrong with it
    if ids is not None and ids != data.n_ids:
        raise ValueError(f"{model_dir}: trained on a dataset of {ids:,} ids, not {data.path}'s {data.n_ids:,}: "
                         "compare models trained on the same dataset")


@dataclass
class Comparison:
    """The first model's evaluation, the other models' on the same examples, and the paired differences."""
    result: EvalResult  # the first model, its variants and the baselines
    compared: dict[str, EvalResult] = field(default_factory=dict)  # each other model (no baselines)
    paired: dict[str, dict] = field(default_factory=dict)  # other model -> paired(first - it)
    paired_vs_baselines: dict[str, dict] = field(default_factory=dict)  # variant or baseline -> paired(first - it)

    def to_dict(self) -> dict:
        """The JSON of `eval --compare --json`: the first model's, then the paired differences."""
        compared = {name: {"metrics": {k: v for k, v in res.to_dict().items() if k != "baselines"},
                           "paired": self.paired[name]} for name, res in self.compared.items()}
        return self.result.to_dict() | {"paired_vs_baselines": self.paired_vs_baselines, "compared": compared}

    def report(self) -> str:
        return self.result.report() + format_comparison(self)


def compare(predictor, others: dict, data, cfg: EvalConfig = EvalConfig(), progress: bool = True) -> Comparison:
    """evaluate() of `predictor` (baselines included) and, for each of `others` ({name: predictor, or
    a function that loads it}), its own evaluation on the same examples (no baselines: they would be
    the same) with the paired differences predictor - other; and predictor - each variant of its head
    and each baseline. A model whose protocol draws other examples (a text model trained on other
    segment lengths) is an error: the comparison would not be paired. (Leave-one-out pairs the users'
    targets; a sequence model with fewer positions sees a shorter history of the same users, as it
    would alone.) A bad argument is an ArgumentError naming it, before any evaluation."""
    check_arguments(predictor, data, cfg)
    if not isinstance(others, dict):
        raise ArgumentError("others", f"expected a dict {{name: model, or a function that loads it}}, got "
                                      f"{type(others).__name__}")
    first = evaluate(predictor, data, cfg, progress)
    recall, mine = first.entry.recall, first.ranks["model"]
    out = Comparison(first, paired_vs_baselines={name: paired(mine, r, first.groups, recall)
                                                 for name, r in first.ranks.items() if name != "model"})
    for name, other in others.items():
        other = other() if callable(other) else other  # a loader: one model in memory at a time
        res = evaluate(other, data, replace(cfg, baselines=()), progress)
        if len(res.targets) != len(first.targets) or not np.array_equal(res.targets, first.targets):
            raise ValueError(f"{name}: its evaluation examples are not the first model's ({len(res.targets):,} vs "
                             f"{len(first.targets):,} targets): a paired comparison needs models evaluated on the "
                             "same examples (same dataset and protocol settings; text models trained on the same "
                             "segment length)")
        out.compared[name] = res
        out.paired[name] = paired(mine, res.ranks["model"], first.groups, recall)
    return out


def format_comparison(comparison: Comparison) -> str:
    """The paired part of a comparison, one line per other method."""
    first = comparison.result
    keys = [f"{first.entry.recall}@{k}" for k in KS] + ["mrr"]
    lines = [""]
    if comparison.compared:  # without other models: the differences from the head's parts and the baselines
        lines.append(f"compared models on the same {first.counts['examples']:,} examples:")
    width = max([len(n) for n in comparison.compared] + [14])
    for name, res in comparison.compared.items():
        m = res.to_dict()
        lines.append(f"  {name:<{width}}  " + "  ".join(f"{k} {m[k]:.4f}" for k in keys if k in m))
    lines.append(f"paired differences, this model minus each (95% bootstrap interval of the difference, whole "
                 f"{first.entry.unit} resampled):")
    rows = [(n, comparison.paired[n]) for n in comparison.compared]
    rows += [(first.labels.get(n, n) if n in first.variants else f"{n} baseline", p)
             for n, p in comparison.paired_vs_baselines.items()]
    width = max([len(n) for n, _ in rows] + [14])
    for name, p in rows:
        lines.append(f"  vs {name:<{width}}  " + "  ".join(
            f"{k} {p[k]['diff']:+.4f} [{p[k]['lo']:+.4f}, {p[k]['hi']:+.4f}]" for k in keys))
    return "\n".join(lines)

