"""The tuned baselines (evaluation/tuning.py): ALS's and item2vec's settings chosen on validation sets
held out of the training sets, in bounded time, the chosen settings reported; the defaults behind
their -untuned names."""
from __future__ import annotations

import numpy as np
import pytest

from superbloom.data.dataset import SetArray
from superbloom.evaluation import tuning
from superbloom.evaluation.baselines import BASELINES

pytest.importorskip("implicit", reason="ALS needs implicit (the [baselines] extra)")
pytest.importorskip("gensim", reason="item2vec needs gensim (the [baselines] extra)")

N = 60


def planted(seed=0, sets=400):
    """Sets drawn from 6 topics of 10 ids: what co-occurs is learnable."""
    rng = np.random.default_rng(seed)
    lists = [sorted((t * 10 + rng.choice(10, rng.integers(3, 7), replace=False)).tolist())
             for t in rng.integers(0, 6, sets)]
    return SetArray.from_lists(lists)


def test_the_search_keeps_the_best_validation_setting_and_refits_on_everything(monkeypatch):
    from superbloom.evaluation.als import ALS, ALSConfig

    train = planted()
    fitted = []

    def fit(sets, n_ids, config):
        fitted.append((len(sets), config))
        return ALS(sets, n_ids, config)

    axes = [("factors", [4, 8]), ("iterations", [3])]
    base, chosen = tuning.tuned(fit, ALSConfig(factors=2, iterations=2), axes, train, N)
    assert [n for n, _ in fitted[:-1]] == [len(train) - 40] * 4  # 40 validation sets held out (10%)
    assert fitted[-1][0] == len(train)  # the chosen setting refitted on every training set
    tried = chosen["tried"]
    assert list(tried)[0] == "defaults" and len(tried) == 4
    best = max(tried.values())
    label = ", ".join(f"{k} {v}" for k, v in chosen.items() if k not in ("how", "tried", "tuning_seconds")) or "defaults"
    assert tried[label] == best  # the report's settings are the best on validation (ties: the earlier)
    assert tuning._label(tuning.changed(fitted[-1][1], ALSConfig(factors=2, iterations=2))) == label  # refitted
    assert "held out of the training sets" in chosen["how"]


def test_the_budget_bounds_the_search():
    from superbloom.evaluation.item2vec import Item2Vec, Item2VecConfig

    calls = []

    def fit(sets, n_ids, config):
        calls.append(config)
        return Item2Vec(sets, n_ids, config)

    _, chosen = tuning.tuned(fit, Item2VecConfig(epochs=1), [("epochs", [2, 3, 4])], planted(1), N, budget=0.0)
    assert len(calls) == 2  # the defaults on the held-out split, then the final fit: nothing else started
    assert chosen["tried"].keys() == {"defaults"} and "3 left out by the 0 s budget" in chosen["how"]


def test_too_few_sets_keep_the_defaults():
    from superbloom.evaluation.als import ALSConfig

    base, chosen = tuning.tuned(lambda s, n, c: ("fit", len(s), c), ALSConfig(), [("factors", [8])],
                                SetArray.from_lists([[0, 1], [1, 2], [2, 3]]), 4)
    assert base == ("fit", 3, ALSConfig()) and "too few training sets" in chosen["how"]


@pytest.mark.parametrize("name", ["als", "item2vec", "als-untuned", "item2vec-untuned"])
def test_the_registry_tunes_by_default_and_keeps_the_defaults_behind_untuned(name, monkeypatch):
    monkeypatch.setattr(tuning, "TUNE_SECONDS", 30.0)
    base = BASELINES[name].fit(planted(2), N)
    contexts = np.asarray([[0, 1, 2], [31, 32, -1]])
    top = base.rank(contexts, contexts, 5)
    assert top.shape == (2, 5) and not (top[:, :, None] == contexts[:, None, :]).any()
    assert (getattr(base, "chosen", None) is not None) == (not name.endswith("-untuned"))


def test_eval_reports_the_chosen_settings(tiny_predictor, wiki_data, monkeypatch):
    import superbloom as sb
    from superbloom.evaluation import als, item2vec

    monkeypatch.setattr(als, "ALS_AXES", [("factors", [16])])  # one setting beside the defaults: fast
    monkeypatch.setattr(item2vec, "ITEM2VEC_AXES", [("epochs", [2])])
    res = sb.evaluate(tiny_predictor, wiki_data, sb.EvalConfig(baselines=("als", "item2vec-untuned"), max_sets=60),
                      progress=False)
    chosen = res.baselines["als"]["chosen"]
    assert set(chosen["tried"]) <= {"defaults", "factors 16"} and "validation sets" in chosen["how"]
    assert "chosen" not in res.baselines["item2vec-untuned"]
    report = res.report()
    assert ("als (factors 16)" in report) or ("als (defaults chosen)" in report)
