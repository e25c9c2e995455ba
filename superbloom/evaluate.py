"""The paper's evaluation protocol (sec. 3.1) on held-out sets, model and baselines side by side.

For each held-out set: one random contiguous segment of up to n = 32 ids, one random id of it
held out (or several, `targets_per_set`, each its own example), the rest of the segment is the
context. Context ids are excluded from every ranking. A held-out id never seen in training is
kept as an example and counts as a miss for every method (reported as `targets_unseen`); sets
with fewer than two ids cannot give an example (reported as `sets_skipped`). The examples are a
function of the test sets and the seed only, so the model and every baseline see the very same.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np

from .baselines import EASE_MAX_IDS, fit_baseline
from .batches import sample_segments
from .dataset import Dataset, SetArray
from .decode import DecodeConfig
from .metrics import summarize, target_ranks


@dataclass(frozen=True)
class EvalConfig:
    seed: int = 0
    n: int = 32  # segment length
    targets_per_set: int = 1  # held-out ids per set, each its own example
    depth: int = 20  # ids retrieved per example (MRR is truncated here)
    decode: DecodeConfig = DecodeConfig()
    baselines: tuple[str, ...] = ("popularity", "cooccurrence")
    batch_size: int = 256
    max_sets: int = 0  # evaluate on at most this many held-out sets (0: all)


@dataclass
class Examples:
    contexts: np.ndarray  # (E, n) ids, -1 = padding / unknown
    targets: np.ndarray  # (E,) ids, -1 = unseen in training
    set_rows: np.ndarray  # (E,) which held-out set
    sets_skipped: int


def make_examples(sets: SetArray, n: int = 32, targets_per_set: int = 1, seed: int = 0,
                  max_sets: int = 0) -> Examples:
    rng = np.random.default_rng(seed)
    rows = np.arange(len(sets))
    if max_sets and max_sets < len(rows):
        rows = np.sort(rng.choice(rows, max_sets, replace=False))
    seg_len = np.minimum(sets.lengths[rows], n)
    usable = seg_len >= 2
    rows, seg_len = rows[usable], seg_len[usable]
    # sample_segments marks padding and unseen ids alike with -1; seg_len tells them apart
    segs = sample_segments(sets, rows, n, rng)
    width = segs.shape[1]
    keys = np.where(np.arange(width)[None, :] < seg_len[:, None], rng.random(segs.shape), np.inf)
    order = np.argsort(keys, axis=1)
    per_set = np.minimum(targets_per_set, seg_len - 1)
    ex_row = np.repeat(np.arange(len(rows)), per_set)
    ex_pos = order[ex_row, np.arange(len(ex_row)) - np.repeat(np.cumsum(per_set) - per_set, per_set)]
    contexts = segs[ex_row].copy()
    targets = contexts[np.arange(len(ex_row)), ex_pos].copy()
    contexts[np.arange(len(ex_row)), ex_pos] = -1
    return Examples(contexts, targets, rows[ex_row], int((~usable).sum()))


def check_vocabulary(vocab, data: Dataset) -> None:
    """The model's ids must be the dataset's ids, in the same order (the int ids index both)."""
    if vocab.strings != data.vocab.strings:
        first = next((i for i, (a, b) in enumerate(zip(vocab.strings, data.vocab.strings)) if a != b),
                     min(len(vocab), len(data.vocab)))
        raise ValueError(f"{data.path}: the dataset's vocabulary ({len(data.vocab):,} ids) is not the model's "
                         f"({len(vocab):,} ids; they first differ at id {first}): evaluate a model on the dataset "
                         "it was trained on (or one prepared with the same vocabulary)")


def evaluate(predictor, data: Dataset, cfg: EvalConfig = EvalConfig(), progress: bool = True,
             return_ranks: bool = False) -> dict:
    """Metrics of the model and the baselines on the same examples (see module docstring)."""
    check_vocabulary(predictor.vocab, data)
    ex = make_examples(data.test, cfg.n, cfg.targets_per_set, cfg.seed, cfg.max_sets)
    if len(ex.targets) == 0:
        raise ValueError(f"{data.path}: no held-out set has two or more ids; nothing to evaluate")
    t0 = time.time()
    ranking = predictor.rank(ex.contexts, cfg.depth, cfg.decode, cfg.batch_size, progress)
    seconds = time.time() - t0
    ranks = target_ranks(ranking.ids.numpy(), ex.targets)
    result = summarize(ranks)
    result.update({
        "examples": int(len(ex.targets)),
        "targets_unseen": int((ex.targets < 0).sum()),
        "sets_skipped": ex.sets_skipped,
        "certified_exact": float(ranking.exact.float().mean()),
        "mean_beam": float(ranking.beam.float().mean()),
        "queries_per_second": round(len(ex.targets) / max(seconds, 1e-9), 1),
        "protocol": {"seed": cfg.seed, "n": cfg.n, "targets_per_set": cfg.targets_per_set,
                     "depth": cfg.depth, "decode": {k: v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)
                                for k, v in asdict(cfg.decode).items()}, "context_excluded": True},
        "baselines": {},
    })
    per_method = {"model": ranks}
    for name in cfg.baselines:
        if name == "ease" and data.n_ids > EASE_MAX_IDS:
            result["baselines"][name] = {"skipped": f"{data.n_ids:,} ids > {EASE_MAX_IDS:,} (dense EASE)"}
            continue
        t0 = time.time()
        base = fit_baseline(name, data.train, data.n_ids)
        branks = target_ranks(base.rank(ex.contexts, cfg.depth), ex.targets)
        result["baselines"][name] = summarize(branks) | {"seconds": round(time.time() - t0, 2)}
        per_method[name] = branks
    if return_ranks:
        result["_ranks"] = per_method
        result["_examples"] = ex
    return result


def format_report(result: dict) -> str:
    """A table a person can read: one row per method."""
    cols = ["rec@1", "rec@10", "rec@20", "mrr", "ndcg@10"]
    rows = [("superbloom model", result)] + [(k, v) for k, v in result["baselines"].items()]
    lines = [f"{'method':<18}" + "".join(f"{c:>9}" for c in cols)]
    for name, r in rows:
        if "skipped" in r:
            lines.append(f"{name:<18}  skipped: {r['skipped']}")
        else:
            lines.append(f"{name:<18}" + "".join(f"{r[c]:>9.4f}" for c in cols))
    p = result["protocol"]
    lines.append(f"{result['examples']:,} examples ({p['targets_per_set']} held-out id per set, segments of "
                 f"<= {p['n']}, seed {p['seed']}); context ids excluded from every ranking; "
                 f"{result['targets_unseen']} targets unseen in training count as misses; "
                 f"{result['sets_skipped']} sets with < 2 ids skipped.")
    lines.append(f"decoding: {result['certified_exact']:.1%} of top-{p['depth']} answers certified exact, "
                 f"mean beam {result['mean_beam']:.1f}, {result['queries_per_second']:,} queries/s")
    return "\n".join(lines)
