"""Evaluation protocols: how (context, target) examples are drawn from a prepared dataset, and the
registry of protocols that evaluate.py and compare.py run.

Two example drawers, `drawer.examples(data) -> Examples` (plus the text protocol's, evaluation/text_protocol.py):

  SetHoldout   the paper's protocol (Superbloom sec. 3.1) on held-out sets: from each test set one
               random contiguous segment of up to n ids, one random id of it held out (or
               `targets_per_set`, each its own example); the rest of the segment is the context and
               is excluded from the ranking.
  LeaveOneOut  sequence recommendation (SASRec / S3-Rec / BERT4Rec full ranking): one
               example per user of a `prepare --split leave-one-out` dataset, the target is the
               user's validation or test id, the context the user's history up to it (ids unseen
               in training dropped), the most recent n ids, ORDER KEPT (oldest first, newest
               last, so a query's [MASK] follows the newest id). The whole history (not only the
               n-window) is excluded from the ranking when `exclude_history` (the S3-Rec code's
               convention), nothing is excluded otherwise. With repeats kept in the sequences a
               target may occur in its own history: with exclusion it cannot be ranked; such
               targets are counted (`targets_in_history`).

Examples are a function of the dataset and the protocol's settings (and seed) only, so the model
and every baseline see the very same. Everything is vectorised over the examples.

The registry (`REGISTRY`, `protocol(name)`, `resolve(name, data)`): each protocol is one entry object
with the hooks of `EvalProtocol`: its examples from a dataset, an EvalConfig and the model's
config.json; the model's and a baseline's top-k on them; the metrics of one method's ranks (with
their intervals); the examples' targets and bootstrap groups (what a paired comparison checks and
resamples); its report section; its name for hits at k ("rec" / "hr") and for its bootstrap unit;
which baselines it ranks. Protocol "auto" is the last registered entry that claims the dataset. The text
entry lives in evaluation/text_protocol.py and is imported when first asked for.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol as _Interface

import numpy as np

from .baselines import baseline_entry, fit_baseline
from .examples import Examples, make_examples  # noqa: F401 (re-exported: callers import them here)
from ..data.dataset import history_matrix, last_known
from ..data.dataset import Dataset
from .metrics import hits_at, mean_ci, sequence_summary, summarize, target_ranks


class ExampleDrawer(_Interface):
    name: str

    def examples(self, data: Dataset) -> Examples:
        ...

    def describe(self) -> dict:
        ...


@dataclass(frozen=True)
class SetHoldout:
    n: int = 32
    targets_per_set: int = 1
    seed: int = 0
    max_sets: int = 0
    name: str = "sets"

    def examples(self, data: Dataset) -> Examples:
        if data.split != "sets":
            raise ValueError(f"{data.path}: a {data.split!r} dataset; evaluate it with --protocol {data.split}")
        return make_examples(data.test, self.n, self.targets_per_set, self.seed, self.max_sets)

    def describe(self) -> dict:
        return {"protocol": self.name, "seed": self.seed, "n": self.n, "targets_per_set": self.targets_per_set,
                "context_excluded": True}


@dataclass(frozen=True)
class LeaveOneOut:
    split: str = "test"  # "valid" or "test": which target of each user
    n: int = 50  # context: the most recent n ids of the history
    exclude_history: bool = True  # the user's whole history is never ranked
    max_sets: int = 0  # at most this many users (seeded choice), 0: all
    seed: int = 0
    name: str = "leave-one-out"

    def __post_init__(self):
        if self.split not in ("valid", "test"):
            raise ValueError(f"split must be 'valid' or 'test', got {self.split!r}")
        if self.n < 1:
            raise ValueError(f"n (context length) must be >= 1, got {self.n}")

    def examples(self, data: Dataset) -> Examples:
        if data.split != "leave-one-out":
            raise ValueError(f"{data.path}: a {data.split!r} dataset has no sequence targets; prepare it with "
                             "`superbloom prepare --split leave-one-out` (or evaluate with --protocol sets)")
        history, targets = data.history(self.split), np.asarray(data.targets(self.split), np.int64)
        rows = np.arange(len(history))
        if self.max_sets and self.max_sets < len(rows):
            rows = np.sort(np.random.default_rng(self.seed).choice(rows, self.max_sets, replace=False))
            history = history.subset(rows)
            targets = targets[rows]
        contexts = last_known(history, self.n)  # (U, <=n)
        full = history_matrix(history)  # (U, L)
        in_history = ((full == targets[:, None]) & (targets[:, None] >= 0)).any(1)
        empty = (contexts >= 0).sum(1) == 0
        exclude = full if self.exclude_history else np.full((len(rows), 0), -1, np.int64)
        notes = {"targets_in_history": int(in_history.sum()), "empty_contexts": int(empty.sum()),
                 "history_ids_unseen": int((np.asarray(history.ids) < 0).sum())}
        return Examples(contexts, targets, rows, 0, exclude, notes)

    def describe(self) -> dict:
        return {"protocol": self.name, "split": self.split, "n": self.n, "exclude_history": self.exclude_history,
                "max_sets": self.max_sets, "seed": self.seed}


# ---------------------------------------------------------------- the registry of protocols


class EvalProtocol(_Interface):
    """The hooks evaluate() and compare() call; `ex` is whatever the entry's `examples` returned."""
    name: str
    recall: str  # "rec" / "hr": hits at k in its metrics
    unit: str  # what its bootstrap resamples ("held-out sets")

    def examples(self, data: Dataset, cfg, model_config: dict): ...  # the examples (an error if none)
    def targets(self, ex) -> np.ndarray: ...  # (E,) ids, -1 unseen, in ranking order
    def groups(self, ex) -> np.ndarray | None: ...  # (E,) bootstrap groups; None: each example its own
    def rank_model(self, predictor, ex, cfg, progress: bool): ...  # -> Ranking (E, cfg.depth)
    def baselines(self, cfg) -> tuple[str, ...]: ...  # the baselines it ranks for cfg
    def baseline_skipped(self, name: str, data: Dataset) -> str | None: ...
    def rank_baseline(self, name: str, data: Dataset, ex, cfg, chosen: dict | None = None) -> np.ndarray: ...
    # (E, cfg.depth) ids; a setting the baseline chose on validation examples goes into `chosen`
    def summarize(self, ranks: np.ndarray, ex) -> dict: ...  # one method's metrics
    def counts(self, ex) -> dict: ...  # the examples' counts for the report
    def settings(self, cfg, model_config: dict) -> dict: ...  # the protocol settings ("protocol" in the JSON)
    def report(self, result) -> str: ...  # evaluate.EvalResult -> the report text


def model_positions(model_config: dict) -> int:
    """The model's learned positions (config.json), 0 if it has none."""
    return int((model_config or {}).get("model", {}).get("positions", 0) or 0)


class _ContextRanking:
    """The hooks shared by the protocols whose examples are `Examples` (contexts of ids): the model
    and each baseline rank the contexts, never returning `ex.excluded`."""
    recall = "rec"

    def targets(self, ex: Examples) -> np.ndarray:
        return ex.targets

    def rank_model(self, predictor, ex: Examples, cfg, progress: bool):
        return predictor.rank(ex.contexts, cfg.depth, cfg.decode, cfg.batch_size, progress, exclude=ex.excluded)

    def baselines(self, cfg) -> tuple[str, ...]:
        return tuple(cfg.baselines)

    def baseline_skipped(self, name: str, data: Dataset) -> str | None:
        return baseline_entry(name).skipped(data.n_ids)

    def scored(self, name: str, ex: Examples, cfg) -> np.ndarray:
        """The context columns a baseline scores from (default: all)."""
        return ex.contexts

    select = "ndcg@10"  # what a baseline's setting is chosen by on the validation examples

    def validation(self, data: Dataset, cfg, ex: Examples) -> Examples | None:
        """The examples a baseline's setting is chosen on (BaselineEntry.choose); None: it keeps its default."""
        return None

    def selection_score(self, ranks: np.ndarray, ex: Examples) -> float:
        """`select` of one ranking of `ex`: what a baseline's setting is chosen by."""
        return self.summarize(ranks, ex)[self.select]

    def rank_baseline(self, name: str, data: Dataset, ex: Examples, cfg, chosen: dict | None = None) -> np.ndarray:
        """(E, cfg.depth) ids of baseline `name` fitted on the training sets; a setting it chooses
        (BaselineEntry.choose) is chosen on `validation` first, and recorded in `chosen`."""
        entry = baseline_entry(name)
        base = fit_baseline(name, data.train, data.n_ids)
        if getattr(base, "chosen", None) is not None and chosen is not None:  # tuned in its fit (tuning.py)
            chosen["chosen"] = base.chosen
        if entry.choose:
            setting, values = entry.choose
            val = self.validation(data, cfg, ex)
            if val is not None:
                tried = {}
                for value in values:  # the fitted baseline is reused: a setting only weights its ranking
                    setattr(base, setting, value)
                    ranks = target_ranks(base.rank(self.scored(name, val, cfg), val.excluded, cfg.depth), val.targets)
                    tried[value] = round(self.selection_score(ranks, val), 4)
                setattr(base, setting, max(tried, key=tried.get))  # the first best on a tie
                how = f"chosen on {len(val.targets):,} validation targets by {self.select}"
            else:
                tried, how = {}, "its default (no validation examples)"
            if chosen is not None:
                chosen["chosen"] = {setting: getattr(base, setting), "how": how} | ({"tried": tried} if tried else {})
        return base.rank(self.scored(name, ex, cfg), ex.excluded, cfg.depth)


FEW_EXAMPLES = 1000  # below this, a sets report suggests more held-out ids per set


class SetsProtocol(_ContextRanking):
    """The paper's protocol on held-out sets (SetHoldout; evaluate.py's module docstring)."""
    name = "sets"
    unit = "held-out sets"

    def claims(self, data: Dataset) -> bool:
        return data.split == "sets"

    def drawer(self, cfg, model_config: dict) -> SetHoldout:
        return SetHoldout(cfg.n, cfg.targets_per_set, cfg.seed, cfg.max_sets)

    def examples(self, data: Dataset, cfg, model_config: dict) -> Examples:
        ex = self.drawer(cfg, model_config).examples(data)
        if len(ex.targets) == 0:
            raise ValueError(f"{data.path}: no held-out set has two or more ids; nothing to evaluate")
        return ex

    def groups(self, ex: Examples) -> np.ndarray:
        return ex.set_rows

    def summarize(self, ranks: np.ndarray, ex: Examples) -> dict:
        return summarize(ranks)

    def counts(self, ex: Examples) -> dict:
        return {"examples": int(len(ex.targets)), "targets_unseen": int((ex.targets < 0).sum()),
                "sets_skipped": ex.sets_skipped}

    def settings(self, cfg, model_config: dict) -> dict:
        return {"seed": cfg.seed, "n": cfg.n, "targets_per_set": cfg.targets_per_set, "depth": cfg.depth,
                "decode": cfg.decode.settings(), "context_excluded": True}

    def report(self, result) -> str:
        cols = ["rec@1", "rec@10", "rec@20", "mrr", "ndcg@10"]
        r, p = result.to_dict(), result.settings
        rows = method_rows(result)
        lines = method_table(result, cols, max(18, *(len(name) + 1 for name, _ in rows)))
        if result.about:
            lines.append(f"beside the model on the same examples: {result.about}.")
        per_set = p["targets_per_set"]
        lines.append(f"{r['examples']:,} examples ({per_set} held-out id{'s' * (per_set != 1)} per set, segments "
                     f"of <= {p['n']}, seed {p['seed']}); context ids excluded from every ranking; "
                     f"{r['targets_unseen']} targets unseen in training count as misses; "
                     f"{r['sets_skipped']} sets with < 2 ids skipped.")
        if r["examples"] < FEW_EXAMPLES and per_set == 1:
            lines.append("few examples: the intervals are wide; --targets-per-set 5 (in Python "
                         "EvalConfig(targets_per_set=5)) holds out 5 ids of each set (each its own example) for "
                         "about 5x the examples.")
        lines.append(decoding_line(result))
        return "\n".join(lines)


def _with_ci(ranks: np.ndarray, k: int = 10) -> dict:
    """sequence_summary + a 95% bootstrap interval of HR@k (users resampled)."""
    _, lo, hi = mean_ci(hits_at(ranks, k))
    return sequence_summary(ranks) | {f"hr@{k}_lo": lo, f"hr@{k}_hi": hi}


class LeaveOneOutProtocol(_ContextRanking):
    """Sequence recommendation (LeaveOneOut; evaluate.py's module docstring)."""
    name = "leave-one-out"
    recall = "hr"
    unit = "users"

    def claims(self, data: Dataset) -> bool:
        return data.split == "leave-one-out"

    def drawer(self, cfg, model_config: dict) -> LeaveOneOut:
        """A model with P learned positions gets contexts of at most P - 1 ids."""
        positions = model_positions(model_config)
        n = min(cfg.context_len, positions - 1) if positions > 1 else cfg.context_len
        return LeaveOneOut(cfg.split, n, cfg.exclude_history, cfg.max_sets, cfg.seed)

    def examples(self, data: Dataset, cfg, model_config: dict) -> Examples:
        ex = self.drawer(cfg, model_config).examples(data)
        if len(ex.targets) == 0:
            raise ValueError(f"{data.path}: no sequence has a {cfg.split} target (all shorter than 3 ids?)")
        return ex

    def groups(self, ex: Examples) -> None:
        return None  # one example per user

    def validation(self, data: Dataset, cfg, ex: Examples) -> Examples | None:
        """The validation targets (each user's id before the test target) with contexts as long as `ex`'s:
        `ex` itself when it is the validation split."""
        if cfg.split == "valid":
            return ex
        val = LeaveOneOut("valid", max(ex.contexts.shape[1], 1), cfg.exclude_history, cfg.max_sets,
                          cfg.seed).examples(data)
        return val if len(val.targets) else None

    def scored(self, name: str, ex: Examples, cfg) -> np.ndarray:
        last = cfg.cooc_last if baseline_entry(name).last_context else 0
        return ex.contexts[:, -last:] if last and ex.contexts.shape[1] > last else ex.contexts

    def summarize(self, ranks: np.ndarray, ex: Examples) -> dict:
        return _with_ci(ranks)

    def selection_score(self, ranks: np.ndarray, ex: Examples) -> float:
        """Without summarize's bootstrap interval (1.2 s at 22,000 users, for a value it does not change)."""
        return sequence_summary(ranks)[self.select]

    def counts(self, ex: Examples) -> dict:
        return {"examples": int(len(ex.targets)), "targets_unseen": int((ex.targets < 0).sum()), **ex.notes}

    def settings(self, cfg, model_config: dict) -> dict:
        return self.drawer(cfg, model_config).describe() | {
            "depth": cfg.depth, "cooc_last": cfg.cooc_last, "context_len_asked": cfg.context_len,
            "model_positions": model_positions(model_config), "baselines_fitted_on": "training prefixes",
            "decode": cfg.decode.settings()}

    def report(self, result) -> str:
        cols = ["hr@1", "hr@5", "hr@10", "hr@20", "ndcg@5", "ndcg@10", "ndcg@20", "mrr"]
        r, p = result.to_dict(), result.settings
        rows = method_rows(result)
        lines = method_table(result, cols, max(18, *(len(name) + 1 for name, _ in rows)))
        excl = ("the user's whole history EXCLUDED from every ranking" if p["exclude_history"]
                else "nothing excluded from the ranking (the user's history may be ranked)")
        lines.append("hr@10 95% bootstrap intervals (users resampled): " + "; ".join(
            f"{name} [{m['hr@10_lo']:.4f}, {m['hr@10_hi']:.4f}]" for name, m in rows if "skipped" not in m))
        lines.append(f"leave-one-out, {p['split']} targets: {r['examples']:,} users, full ranking over all ids, "
                     f"context = the {p['n']} most recent history ids in order; {excl}.")
        lines.append(f"{r['targets_unseen']} targets unseen in training count as misses; "
                     f"{r['targets_in_history']} targets also occur in their history"
                     f"{' (unrankable with exclusion)' if p['exclude_history'] else ''}; "
                     f"{r['empty_contexts']} empty contexts; MRR truncated at depth {p['depth']}; "
                     f"baselines fitted on the training prefixes, co-occurrence from the last "
                     f"{p['cooc_last'] or 'all'} context id(s).")
        lines.append(decoding_line(result))
        return "\n".join(lines)


# ---------------------------------------------------------------- report pieces the entries share


def method_rows(result) -> list[tuple[str, dict]]:
    """(row name, metrics) of the model, its variants (beside it, each by its label) and the baselines."""
    rows = [(result.labels.get("model", "superbloom model"), result.model)]
    rows += [(result.labels.get(key, key), m) for key, m in result.variants.items()]
    return rows + [(_with_setting(name, m), m) for name, m in result.baselines.items()]


def _with_setting(name: str, m: dict) -> str:
    """A baseline's row name, with the settings it chose on validation examples: `transition (decay 0.15)`,
    `als (confidence plain, alpha 10, factors 256)`; a tuned baseline that kept its defaults says so."""
    chosen = m.get("chosen", {})
    shown = [f"{k} {v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else f"{k} {v}"
             for k, v in chosen.items() if k not in ("how", "tried", "tuning_seconds")]
    if not shown and "tried" in chosen:
        return f"{name} (defaults chosen)"
    return f"{name} ({', '.join(shown)})" if shown else name


def method_table(result, cols: list[str], width: int) -> list[str]:
    """The report's table: a header, then one line per method with `cols`, or why it was skipped."""
    lines = [f"{'method':<{width}}" + "".join(f"{c:>9}" for c in cols)]
    for name, r in method_rows(result):
        if "skipped" in r:
            lines.append(f"{name:<{width}}  skipped: {r['skipped']}")
        else:
            lines.append(f"{name:<{width}}" + "".join(f"{r[c]:>9.4f}" for c in cols))
    return lines


def decoding_line(result) -> str:
    d, depth = result.decoding, result.settings["depth"]
    return (f"decoding: {d['certified_exact']:.1%} of top-{depth} answers certified exact, "
            f"mean beam {d['mean_beam']:.1f}, {d['queries_per_second']:,} queries/s")


def _text() -> EvalProtocol:
    from .text_protocol import TEXT  # the text front end is imported only for a text evaluation

    return TEXT


@dataclass(frozen=True)
class Registered:
    """A registry row: the entry (loaded when first asked for) and whether it claims a dataset
    (protocol "auto")."""
    load: Callable[[], EvalProtocol]
    claims: Callable[[Dataset], bool]


SETS, LEAVE_ONE_OUT = SetsProtocol(), LeaveOneOutProtocol()
REGISTRY: dict[str, Registered] = {  # "auto" tries them last first: a text dataset is also a "sets" split
    "sets": Registered(lambda: SETS, SETS.claims),
    "leave-one-out": Registered(lambda: LEAVE_ONE_OUT, LEAVE_ONE_OUT.claims),
    "text": Registered(_text, lambda data: "text" in data.meta),
}


def protocol(name: str) -> EvalProtocol:
    """The registry's entry `name`."""
    if name not in REGISTRY:
        raise ValueError(f"unknown protocol {name!r}; choose from {sorted(REGISTRY)}")
    return REGISTRY[name].load()


def resolve(name: str, data: Dataset) -> EvalProtocol:
    """The entry `name`, or for "auto" the last registered that claims the dataset (the more specific:
    text before sets)."""
    if name != "auto":
        return protocol(name)
    for row in reversed(REGISTRY.values()):
        if row.claims(data):
            return row.load()
    raise ValueError(f"{data.path}: no evaluation protocol for a {data.split!r} dataset; "
                     f"choose one of {sorted(REGISTRY)}")
