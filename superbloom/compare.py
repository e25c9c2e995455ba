"""Paired comparison of models on the very same evaluation examples (`superbloom eval A DATA --compare B`).

Two models evaluated separately each get an interval of their own, and two overlapping intervals
do not say that the models are level: the examples are shared, so most of each interval's width is
the examples' own difficulty, common to both. Here every model runs the same protocol with the same
seed (so the same examples: checked, not assumed), and each difference of the first model against
another model and against each baseline is given with the bootstrap interval of the DIFFERENCE
itself (metrics.paired_difference), resampling the protocol's groups as its own intervals do: whole
held-out sets (sets), whole test rows (text), users (leave-one-out).

Per-example values: hits at k (rec@k, or hr@k for leave-one-out) for k = 1, 10, 20, and the
reciprocal rank (MRR, truncated at the retrieved depth).
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from .evaluate import EvalConfig, evaluate
from .metrics import hits_at, paired_difference

KS = (1, 10, 20)


def example_key(result: dict) -> tuple[np.ndarray, np.ndarray | None]:
    """(targets (E,), groups (E,) or None) of an evaluate(..., return_ranks=True) result: which examples
    were ranked, and the groups its bootstrap resamples."""
    ex = result["_examples"]
    if hasattr(ex, "flat"):  # text: masked tokens in place, grouped by test row
        rows, _, targets = ex.flat()
        return targets, ex.rows[rows]
    if result["protocol"].get("protocol") == "leave-one-out":  # one example per user
        return ex.targets, None
    return ex.targets, ex.set_rows


def recall_name(result: dict) -> str:
    """"hr" (hit rate) for the leave-one-out protocol, "rec" (recall) for the others."""
    return "hr" if result["protocol"].get("protocol") == "leave-one-out" else "rec"


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
    from .checkpoint import require_inference_checkpoint

    require_inference_checkpoint(model_dir)
    try:
        ids = json.loads((Path(model_dir) / "config.json").read_text()).get("data", {}).get("ids")
    except (OSError, ValueError):
        return  # evaluate() will say what is wrong with it
    if ids is not None and ids != data.n_ids:
        raise ValueError(f"{model_dir}: trained on a dataset of {ids:,} ids, not {data.path}'s {data.n_ids:,}: "
                         "compare models trained on the same dataset")


def compare(predictor, others: dict, data, cfg: EvalConfig = EvalConfig(), progress: bool = True) -> dict:
    """evaluate() of `predictor` (baselines included) with result["compared"]: for each of `others`
    ({name: predictor, or a function that loads it}) its own metrics on the same examples (no baselines: they would be the same) and
    the paired differences predictor - other; and result["paired_vs_baselines"]: predictor - each baseline.
    A model whose protocol draws other examples (a text model trained on other segment lengths) is an
    error: the comparison would not be paired. (Leave-one-out pairs the users' targets; a sequence
    model with fewer positions sees a shorter history of the same users, as it would alone.)"""
    first = evaluate(predictor, data, cfg, progress, return_ranks=True)
    targets, groups = example_key(first)
    recall = recall_name(first)
    ranks = first.pop("_ranks")
    first.pop("_examples")
    mine = ranks["model"]
    first["paired_vs_baselines"] = {name: paired(mine, r, groups, recall) for name, r in ranks.items()
                                    if name != "model"}
    first["compared"] = {}
    for name, other in others.items():
        other = other() if callable(other) else other  # a loader: one model in memory at a time
        res = evaluate(other, data, replace(cfg, baselines=()), progress, return_ranks=True)
        t_other, _ = example_key(res)
        if len(t_other) != len(targets) or not np.array_equal(t_other, targets):
            raise ValueError(f"{name}: its evaluation examples are not the first model's ({len(t_other):,} vs "
                             f"{len(targets):,} targets): a paired comparison needs models evaluated on the same "
                             "examples (same dataset and protocol settings; text models trained on the same segment "
                             "length)")
        r = res.pop("_ranks")["model"]
        res.pop("_examples")
        res.pop("baselines", None)
        first["compared"][name] = {"metrics": res, "paired": paired(mine, r, groups, recall)}
    return first


def format_comparison(result: dict) -> str:
    """The paired part of a compare() result, one line per other method."""
    keys = [f"{recall_name(result)}@{k}" for k in KS] + ["mrr"]
    unit = {"sets": "held-out sets", "text": "test rows", "leave-one-out": "users"}.get(
        result["protocol"].get("protocol", "sets"), "held-out sets")
    lines = ["", f"compared models on the same {result['examples']:,} examples:"]
    width = max([len(n) for n in result["compared"]] + [14])
    for name, c in result["compared"].items():
        m = c["metrics"]
        lines.append(f"  {name:<{width}}  " + "  ".join(f"{k} {m[k]:.4f}" for k in keys if k in m))
    lines.append(f"paired differences, this model minus each (95% bootstrap interval of the difference, whole "
                 f"{unit} resampled):")
    rows = [(n, c["paired"]) for n, c in result["compared"].items()]
    rows += [("network only (mix 0)" if n == "network_only" else f"{n} baseline", p)
             for n, p in result["paired_vs_baselines"].items()]
    width = max([len(n) for n, _ in rows] + [14])
    for name, p in rows:
        lines.append(f"  vs {name:<{width}}  " + "  ".join(
            f"{k} {p[k]['diff']:+.4f} [{p[k]['lo']:+.4f}, {p[k]['hi']:+.4f}]" for k in keys))
    return "\n".join(lines)
