"""A baseline's few settings chosen on validation sets carved from its training sets, in bounded time.

    base, chosen = tuned(ALS, ALSConfig(), ALS_AXES, train, n_ids)   # fitted on all training sets, best settings

An untuned ALS or item2vec makes every model look good (their defaults trail popularity on some
data), so the registry's `als` and `item2vec` are tuned (the defaults stay as `als-untuned`,
`item2vec-untuned`). A share of the training sets (VAL_FRACTION, at most VAL_SETS, seeded) is held out;
the paper's examples are drawn from them (one held-out id per set, the rest of a segment the context:
examples.make_examples); each setting is fitted on the other training sets and scored by rec@10 on
them. The search is by coordinates: starting from the defaults, each axis's values are tried in turn,
keeping the best so far (ties: the earlier value, so the default wins a tie), until TUNE_SECONDS are
spent (a fit that would not finish within them is not started: its time is guessed from the last).
The chosen settings are then fitted on every training set. The test sets are never seen.
`chosen` records the settings, their validation rec@10 and the time, for the report.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable, Sequence

import numpy as np

from ..data.dataset import SetArray
from .examples import make_examples
from .metrics import hits_at, target_ranks

VAL_FRACTION = 0.1  # of the training sets, held out to choose on
VAL_SETS = 5000  # at most this many held-out sets (their examples: one id each)
VAL_SEED = 1  # the hold-out's seed (the training's validation uses its own)
TUNE_SECONDS = 600.0  # the search's budget per baseline (fits on the 90%); the final fit comes after it

Axis = tuple[str | tuple[str, ...], Sequence]  # a field (or fields set together) and the values tried


def changed(config, default) -> dict:
    """The settings of `config` that differ from `default` (the report's "chosen" settings)."""
    base = dataclasses.asdict(default)
    return {k: v for k, v in dataclasses.asdict(config).items() if base[k] != v}


def _with(config, axis: Axis, value):
    fields, values = ((axis[0],), (value,)) if isinstance(axis[0], str) else (axis[0], value)
    return dataclasses.replace(config, **dict(zip(fields, values)))


def tuned(fit: Callable, default, axes: Sequence[Axis], train: SetArray, n_ids: int,
          budget: float = TUNE_SECONDS) -> tuple[object, dict]:
    """`fit(train, n_ids, config)` with the config chosen on held-out training sets (module docstring)
    -> (the baseline fitted on all of `train` with it, what was chosen: the settings that differ from
    `default`, how, each setting's validation rec@10, the seconds)."""
    t0 = time.time()
    rng = np.random.default_rng(VAL_SEED)
    n_val = min(VAL_SETS, int(round(VAL_FRACTION * len(train))))
    order = rng.permutation(len(train))
    val_rows, fit_rows = np.sort(order[:n_val]), np.sort(order[n_val:])
    ex = make_examples(train.subset(val_rows), 32, 1, VAL_SEED) if n_val else None
    if ex is None or len(ex.targets) == 0 or len(fit_rows) == 0:
        return fit(train, n_ids, default), {"how": "the defaults: too few training sets to hold some out"}
    part = train.subset(fit_rows)
    tried: dict[str, float] = {}

    def score(config) -> float:
        base = fit(part, n_ids, config)
        value = float(hits_at(target_ranks(base.rank(ex.contexts, ex.contexts, 10), ex.targets), 10).mean())
        tried[_label(changed(config, default))] = round(value, 4)
        return value

    best, last = default, time.time()
    best_score = score(default)
    last = time.time() - last
    skipped = 0
    for axis in axes:
        for value in axis[1]:
            candidate = _with(best, axis, value)
            if _label(changed(candidate, default)) in tried:
                continue
            if time.time() - t0 + last > budget:
                skipped += 1
                continue
            s0 = time.time()
            s = score(candidate)
            last = time.time() - s0
            if s > best_score:
                best, best_score = candidate, s
    how = (f"chosen by rec@10 on {len(ex.targets):,} validation sets held out of the training sets (seed "
           f"{VAL_SEED}), {len(tried)} settings tried" + (f", {skipped} left out by the {budget:g} s budget"
                                                          if skipped else ""))
    chosen = {**changed(best, default), "how": how, "tried": tried,
              "tuning_seconds": round(time.time() - t0, 1)}
    return fit(train, n_ids, best), chosen


def _label(settings: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in settings.items()) or "defaults"
