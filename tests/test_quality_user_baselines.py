"""What a user would run instead (benchmarks/quality/user_baselines.py, issue 33): item2vec and ALS chosen on
val, ranked once on test beside the hybrid's rows, every row paired with the hybrid and its network."""
from __future__ import annotations

import pytest

from benchmarks.quality import harness, user_baselines
from superbloom.evaluation.als import ALSConfig
from superbloom.evaluation.item2vec import Item2VecConfig

pytestmark = pytest.mark.benchmarks  # a benchmark script's test: -m 'not benchmarks' leaves it out

pytest.importorskip("gensim", reason="item2vec needs gensim (the [baselines] extra)")
pytest.importorskip("implicit", reason="ALS needs implicit (the [baselines] extra)")


def test_rows_are_paired_and_the_choice_is_made_on_val(wiki_data, tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "WORK", tmp_path)
    monkeypatch.setattr(harness, "REPO", tmp_path)
    splits = []
    monkeypatch.setattr(user_baselines, "split_dataset", lambda name, split: splits.append(split) or wiki_data)
    monkeypatch.setitem(harness.RECIPES, "tiny", harness.Recipe(alpha=1, m=1, d=16, heads=2, d_ff=32, layers=1,
                                                                 head="hybrid", eval_every=4, warmup=1))
    monkeypatch.setattr(user_baselines, "RECIPE", "tiny")
    monkeypatch.setattr(user_baselines, "STEPS", 4)
    grid = {"item2vec": (user_baselines.Item2Vec, [Item2VecConfig(epochs=1), Item2VecConfig(epochs=2)]),
            "als": (user_baselines.ALS, [ALSConfig(iterations=2), ALSConfig(iterations=2, factors=8)])}
    monkeypatch.setattr(user_baselines, "GRID", grid)
    rows = user_baselines.dataset_rows("wikispeedia")
    assert splits == ["val", "test"]
    methods = [r["method"] for r in rows]
    assert methods == ["tiny", "tiny network only", "tiny term only", "cooccurrence", "ease", "item2vec", "als"]
    by = {r["method"]: r for r in rows}
    for family, (_, configs) in grid.items():
        val = by[family]["val_rec10"]
        assert len(val) == len(configs)
        best = max(val.values())
        assert val[str(by[family]["setting"] or "default")] == best  # the test row is val's best setting
    assert "tiny - it, rec@10" not in by["tiny"] and "tiny network only - it, rec@10" not in by["tiny network only"]
    ease = by["ease"]["tiny - it, rec@10"]
    assert ease["lo"] <= ease["diff"] <= ease["hi"]
    assert by["tiny network only"]["tiny - it, rec@10"]["diff"] == pytest.approx(
        by["tiny"]["rec@10"] - by["tiny network only"]["rec@10"], abs=2e-4)  # both rounded to 4 places
    lines = user_baselines.table(rows)
    assert len(lines) == 2 + len(rows) and "| wikispeedia | als |" in "\n".join(lines)
