"""Evaluation: a protocol's examples (protocols.py), model and baselines side by side on the same.

`protocol="sets"`, the paper's protocol (sec. 3.1) on held-out sets: for each held-out set one random
contiguous segment of up to n = 32 ids, one random id of it held out (or several,
`targets_per_set`, each its own example), the rest of the segment is the context. Context ids are
excluded from every ranking. A held-out id never seen in training is kept as an example and counts
as a miss for every method (reported as `targets_unseen`); sets with fewer than two ids cannot give
an example (reported as `sets_skipped`).

`protocol="leave-one-out"` (sequence recommendation, issue 12) on a `prepare --split leave-one-out`
dataset: one example per user, the `split` ("valid" or "test") target ranked against every id (full
ranking, no sampled negatives) from the most recent `context_len` ids of the user's history, order
kept. `exclude_history` says whether the user's whole history is excluded from every ranking (the
report states which). Metrics: HR@1/5/10/20, NDCG@5/10/20, MRR (truncated at `depth`). Baselines
are fitted on the training prefixes; co-occurrence scores from the last `cooc_last` context ids,
EASE from the whole context. A model with learned positions for P elements gets contexts of at
most P - 1 ids (the query's [MASK] takes the last position); every method sees those same contexts.

The examples are a function of the dataset, the protocol settings and the seed only, so the model
and every baseline see the very same.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .baselines import EASE_MAX_IDS, _topk_excluding, fit_baseline
from .dataset import Dataset
from .decode import DecodeConfig
from .metrics import hits_at, mean_ci, sequence_summary, summarize, target_ranks
from .protocols import Examples, LeaveOneOut, SetHoldout, make_examples  # noqa: F401 (re-exported: train.py)
from .predictor import rank_contexts
from .ranking import Ranking

PROTOCOLS = ("auto", "sets", "leave-one-out", "text")  # text: masked tokens in place (text/evaluate.py)


@dataclass(frozen=True)
class EvalConfig:
    seed: int = 0
    n: int = 32  # segment length
    targets_per_set: int = 1  # held-out ids per set, each its own example
    depth: int = 20  # ids retrieved per example (MRR is truncated here)
    decode: DecodeConfig = DecodeConfig()
    baselines: tuple[str, ...] = ("popularity", "cooccurrence")
    batch_size: int = 256
    max_sets: int = 0  # evaluate on at most this many held-out sets / users (0: all)
    protocol: str = "auto"  # "sets", "leave-one-out", or "auto": the one the dataset was prepared for
    split: str = "test"  # leave-one-out: rank the "valid" or the "test" targets
    context_len: int = 50  # leave-one-out: the most recent ids of the history in the context
    exclude_history: bool = True  # leave-one-out: the user's whole history is never ranked
    cooc_last: int = 1  # leave-one-out: co-occurrence scores from the last this many context ids (0: all)

    def __post_init__(self):
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
        if self.split not in ("valid", "test"):
            raise ValueError(f"split must be 'valid' or 'test', got {self.split!r}")


def make_protocol(cfg: EvalConfig, data: Dataset, positions: int = 0):
    """The protocol of `cfg` for `data` (protocol "auto": the dataset's split); `positions` > 0: the
    model's learned positions, which bound a sequence context to positions - 1 ids."""
    name = data.split if cfg.protocol == "auto" else cfg.protocol
    if name == "sets":
        return SetHoldout(cfg.n, cfg.targets_per_set, cfg.seed, cfg.max_sets)
    n = min(cfg.context_len, positions - 1) if positions > 1 else cfg.context_len
    return LeaveOneOut(cfg.split, n, cfg.exclude_history, cfg.max_sets, cfg.seed)


def rank_excluding(predictor, contexts: np.ndarray, exclude: np.ndarray | None, k: int,
                   decode: DecodeConfig = DecodeConfig(), batch_size: int = 256, progress: bool = False) -> Ranking:
    """Top-k ids of the model for contexts (Q, c) (order kept: the query [MASK] follows the last
    known id), never returning the ids of `exclude` (Q, X) (-1 padded; None: nothing excluded).
    predictor.rank excludes the context itself; a sequence protocol needs another set."""
    none = np.zeros((len(contexts), 0), np.int64)
    return rank_contexts(predictor.model, predictor.hashing, contexts, k, decode, batch_size, progress,
                         exclude=none if exclude is None else exclude)


def rank_baseline(base, contexts: np.ndarray, exclude: np.ndarray, k: int, last: int = 0) -> np.ndarray:
    """A fitted baseline's top-k (E, k) for contexts (E, c) (right-aligned: newest last), scored from
    the last `last` context columns (0: all), never returning the ids of `exclude` (E, X)."""
    if hasattr(base, "top_excluding"):  # popularity: no dense scores (baselines.Popularity)
        return base.top_excluding(exclude, k)
    scored = contexts[:, -last:] if last and contexts.shape[1] > last else contexts
    out = [_topk_excluding(base.scores(scored[a:a + base.batch]) + base.tiebreak, exclude[a:a + base.batch], k)
           for a in range(0, len(contexts), base.batch)]
    return np.concatenate(out) if out else np.zeros((0, k), np.int64)


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
    if cfg.protocol == "text" or (cfg.protocol == "auto" and "text" in data.meta):  # paper sec. 4
        from .text.evaluate import evaluate_text
        return evaluate_text(predictor, data, cfg, progress, return_ranks)
    if (data.split if cfg.protocol == "auto" else cfg.protocol) == "leave-one-out":
        return evaluate_sequences(predictor, data, cfg, progress, return_ranks)
    ex = SetHoldout(cfg.n, cfg.targets_per_set, cfg.seed, cfg.max_sets).examples(data)
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
        **ranking.report(seconds),
        "protocol": {"seed": cfg.seed, "n": cfg.n, "targets_per_set": cfg.targets_per_set,
                     "depth": cfg.depth, "decode": cfg.decode.settings(), "context_excluded": True},
        "baselines": {},
    })
    per_method = {"model": ranks}
    network_alone(predictor, result, per_method, summarize, lambda: target_ranks(
        predictor.rank(ex.contexts, cfg.depth, cfg.decode, cfg.batch_size, progress).ids.numpy(), ex.targets))
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


def _with_ci(ranks: np.ndarray, k: int = 10) -> dict:
    """sequence_summary + a 95% bootstrap interval of HR@k (users resampled)."""
    _, lo, hi = mean_ci(hits_at(ranks, k))
    return sequence_summary(ranks) | {f"hr@{k}_lo": lo, f"hr@{k}_hi": hi}


def evaluate_sequences(predictor, data: Dataset, cfg: EvalConfig, progress: bool = True,
                       return_ranks: bool = False) -> dict:
    """The leave-one-out protocol (module docstring): full ranking, model and baselines on the same examples."""
    positions = int((getattr(predictor, "config", None) or {}).get("model", {}).get("positions", 0) or 0)
    protocol = make_protocol(cfg, data, positions)
    ex = protocol.examples(data)
    if len(ex.targets) == 0:
        raise ValueError(f"{data.path}: no sequence has a {cfg.split} target (all shorter than 3 ids?)")
    exclude = ex.exclude
    t0 = time.time()
    ranking = rank_excluding(predictor, ex.contexts, exclude if cfg.exclude_history else None, cfg.depth,
                             cfg.decode, cfg.batch_size, progress)
    seconds = time.time() - t0
    ranks = target_ranks(ranking.ids.numpy(), ex.targets)
    result = _with_ci(ranks)
    result.update({
        "examples": int(len(ex.targets)),
        "targets_unseen": int((ex.targets < 0).sum()),
        **ex.notes,
        **ranking.report(seconds),
        "protocol": protocol.describe() | {
            "depth": cfg.depth, "cooc_last": cfg.cooc_last, "context_len_asked": cfg.context_len,
            "model_positions": positions, "baselines_fitted_on": "training prefixes", "decode": cfg.decode.settings()},
        "baselines": {},
    })
    per_method = {"model": ranks}
    network_alone(predictor, result, per_method, _with_ci, lambda: target_ranks(rank_excluding(
        predictor, ex.contexts, exclude if cfg.exclude_history else None, cfg.depth, cfg.decode, cfg.batch_size,
        progress).ids.numpy(), ex.targets))
    for name in cfg.baselines:
        if name == "ease" and data.n_ids > EASE_MAX_IDS:
            result["baselines"][name] = {"skipped": f"{data.n_ids:,} ids > {EASE_MAX_IDS:,} (dense EASE)"}
            continue
        t0 = time.time()
        base = fit_baseline(name, data.train, data.n_ids)
        top = rank_baseline(base, ex.contexts, exclude, cfg.depth, cfg.cooc_last if name == "cooccurrence" else 0)
        branks = target_ranks(top, ex.targets)
        result["baselines"][name] = _with_ci(branks) | {"seconds": round(time.time() - t0, 2)}
        per_method[name] = branks
    if return_ranks:
        result["_ranks"] = per_method
        result["_examples"] = ex
    return result


def network_alone(predictor, result: dict, per_method: dict, summary, ranks) -> None:
    """The head's named variants (heads/base.py: the hybrid's network alone) ranked by `ranks()` on
    the same examples, into result["network_only"] (via `summary`) and per_method."""
    head = predictor.model.head
    variants = head.variants()
    if "network alone" not in variants:
        return
    result["head"] = head.describe()
    with variants["network alone"]:
        pure = ranks()
    result["network_only"] = summary(pure)
    per_method["network_only"] = pure


def _method_table(rows: list[tuple[str, dict]], cols: list[str], width: int) -> list[str]:
    """The report's table: a header, then one line per (method, metrics) with `cols`, or why it was skipped."""
    lines = [f"{'method':<{width}}" + "".join(f"{c:>9}" for c in cols)]
    for name, r in rows:
        if "skipped" in r:
            lines.append(f"{name:<{width}}  skipped: {r['skipped']}")
        else:
            lines.append(f"{name:<{width}}" + "".join(f"{r[c]:>9.4f}" for c in cols))
    return lines


def format_report(result: dict) -> str:
    """A table a person can read: one row per method."""
    if result["protocol"].get("protocol") == "text":
        from .text.evaluate import format_text_report
        return format_text_report(result)
    if result["protocol"].get("protocol") == "leave-one-out":
        return _format_sequence_report(result)
    cols = ["rec@1", "rec@10", "rec@20", "mrr", "ndcg@10"]
    if "network_only" in result:  # the hybrid head: the model with and without its item-item term
        rows = [(f"hybrid (mix {result['head']['item_mix']:g})", result), ("network only", result["network_only"])]
    else:
        rows = [("superbloom model", result)]
    rows += [(k, v) for k, v in result["baselines"].items()]
    lines = _method_table(rows, cols, 18)
    p = result["protocol"]
    if "network_only" in result:
        lines.append("hybrid head: the network's log-probabilities + mix x a sparse item-item term (EASE's or cosine "
                     "weights), mix chosen on the validation sets; 'network only' is the same model at mix 0.")
    lines.append(f"{result['examples']:,} examples ({p['targets_per_set']} held-out id per set, segments of "
                 f"<= {p['n']}, seed {p['seed']}); context ids excluded from every ranking; "
                 f"{result['targets_unseen']} targets unseen in training count as misses; "
                 f"{result['sets_skipped']} sets with < 2 ids skipped.")
    lines.append(f"decoding: {result['certified_exact']:.1%} of top-{p['depth']} answers certified exact, "
                 f"mean beam {result['mean_beam']:.1f}, {result['queries_per_second']:,} queries/s")
    return "\n".join(lines)


def _format_sequence_report(result: dict) -> str:
    cols = ["hr@1", "hr@5", "hr@10", "hr@20", "ndcg@5", "ndcg@10", "ndcg@20", "mrr"]
    if "network_only" in result:  # the hybrid head: the model with and without its item-item term
        h = result["head"]
        rows = [(f"hybrid ({h.get('item_term', 'term')} x {h['item_mix']:g}, decay {h.get('item_decay', 1.0):g})",
                 result),
                ("network only", result["network_only"])]
    else:
        rows = [("superbloom model", result)]
    rows += [(k, v) for k, v in result["baselines"].items()]
    lines = _method_table(rows, cols, max(18, *(len(name) + 1 for name, _ in rows)))
    p = result["protocol"]
    excl = ("the user's whole history EXCLUDED from every ranking" if p["exclude_history"]
            else "nothing excluded from the ranking (the user's history may be ranked)")
    lines.append("hr@10 95% bootstrap intervals (users resampled): " + "; ".join(
        f"{name} [{r['hr@10_lo']:.4f}, {r['hr@10_hi']:.4f}]" for name, r in rows if "skipped" not in r))
    lines.append(f"leave-one-out, {p['split']} targets: {result['examples']:,} users, full ranking over all ids, "
                 f"context = the {p['n']} most recent history ids in order; {excl}.")
    lines.append(f"{result['targets_unseen']} targets unseen in training count as misses; "
                 f"{result['targets_in_history']} targets also occur in their history"
                 f"{' (unrankable with exclusion)' if p['exclude_history'] else ''}; "
                 f"{result['empty_contexts']} empty contexts; MRR truncated at depth {p['depth']}; "
                 f"baselines fitted on the training prefixes, co-occurrence from the last "
                 f"{p['cooc_last'] or 'all'} context id(s).")
    lines.append(f"decoding: {result['certified_exact']:.1%} of top-{p['depth']} answers certified exact, "
                 f"mean beam {result['mean_beam']:.1f}, {result['queries_per_second']:,} queries/s")
    return "\n".join(lines)
