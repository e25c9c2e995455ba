"""Seed ensembles of the network alone (benchmarks/quality/ensemble.py, issue 33): members ranked here
equal the harness's ranks, an ensemble of one model twice is that model, and the probes' rows."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmarks.quality import ensemble, harness

pytestmark = pytest.mark.benchmarks  # a benchmark script's test: -m 'not benchmarks' leaves it out


@pytest.fixture(scope="module")
def trained(wiki_data, tmp_path_factory):
    work = tmp_path_factory.mktemp("ensemble")
    mp = pytest.MonkeyPatch()
    for module in (harness, ensemble):
        mp.setattr(module, "WORK", work)
        mp.setattr(module, "RESULTS", work)
    mp.setattr(harness, "REPO", work)
    mp.setattr(harness, "split_dataset", lambda name, split: wiki_data)
    mp.setattr(ensemble, "split_dataset", lambda name, split: wiki_data)
    tiny = harness.Recipe(alpha=1, m=1, d=16, heads=2, d_ff=32, layers=1, head="full", eval_every=4, val_fraction=0.1,
                          warmup=1, ema=0.9)
    mp.setitem(harness.RECIPES, "tiny", tiny)
    mp.setitem(harness.RECIPES, "tiny_s1", harness.Recipe(**{**tiny.__dict__, "seed": 1}))
    mp.setitem(harness.RECIPES, "tiny_hybrid", harness.Recipe(**{**tiny.__dict__, "head": "hybrid"}))
    rows = harness.run(["wikispeedia"], ["tiny", "tiny_s1", "tiny_hybrid"], 4, "test", baselines=("ease",))
    mp.setattr(ensemble, "harness_rows", rows, raising=False)
    yield work
    mp.undo()


def test_ranks_of_excludes_the_context_and_counts_from_one():
    scores = torch.tensor([[0.9, 0.8, 0.1, 0.5], [0.1, 0.2, 0.3, 0.4]])
    ranks = ensemble.ranks_of(scores, np.array([[0, -1], [3, 2]]), np.array([3, 0]), k=3)
    assert ranks.tolist() == [2, 2]  # row 0: 1 (0.8), then 3 (0.5); row 1: 1, then 0 (3 and 2: the context)
    assert ensemble.ranks_of(scores, np.array([[-1, -1]] * 2), np.array([2, 0]), k=3).tolist() == [0, 0]


def test_subsets_keep_at_least_one_id_and_pad_at_the_end():
    ctx = np.array([[4, 5, 6, -1], [7, -1, -1, -1]])
    out = ensemble.subsets(ctx, 0.0, np.random.default_rng(0))
    assert out.tolist() == [[4, -1, -1, -1], [7, -1, -1, -1]]
    assert np.array_equal(ensemble.subsets(ctx, 1.0, np.random.default_rng(0)), ctx)


def test_an_ensemble_of_one_model_twice_is_that_model(trained):
    rows = ensemble.ensemble("wikispeedia", "test", ["tiny", "tiny"], 4)  # stops if a member's ranks differ
    model = next(r for r in rows if r["method"] == "tiny")
    for combo in ("mean_logp", "mean_p"):
        row = next(r for r in rows if r["method"] == f"ensemble {combo} (2)")
        assert row["rec@10"] == model["rec@10"] and row["vs_best_member"]["diff"] == 0


def test_two_seeds_the_last_average_and_subsets_get_rows(trained):
    rows = ensemble.ensemble("wikispeedia", "test", ["tiny", "tiny_s1"], 4, keeps=(0.5,), views=2, last=True)
    methods = [r["method"] for r in rows]
    assert methods[:3] == ["ease", "tiny", "tiny_s1"]
    assert sum(m.startswith("ensemble ") for m in methods) == 2
    assert sum(" last average (BEST: step " in m for m in methods) == 2
    assert "tiny subsets keep 0.5 (2 views + full)" in methods
    assert all(r["examples"] == rows[0]["examples"] for r in rows)
    assert all(r["vs_ease"]["lo"] <= r["vs_ease"]["diff"] <= r["vs_ease"]["hi"] for r in rows[1:])


def test_a_hybrid_member_is_its_network_alone(trained):
    """A hybrid member enters without its term: one hybrid twice ranks as the harness's network alone
    (the hybrid's own row where validation chose mix 0 and the hybrid is its network)."""
    rows = ensemble.ensemble("wikispeedia", "test", ["tiny_hybrid", "tiny_hybrid"], 4)
    harness_rows = {r["recipe"]: r for r in ensemble.harness_rows if r["method"] == "superbloom"}
    network = harness_rows.get("tiny_hybrid network only", harness_rows["tiny_hybrid"])
    for combo in ("mean_logp", "mean_p"):
        row = next(r for r in rows if r["method"] == f"ensemble {combo} (2)")
        assert row["rec@10"] == network["rec@10"] and row["rec@1"] == network["rec@1"]


def test_an_untrained_member_is_refused(trained):
    with pytest.raises(SystemExit, match="not trained"):
        ensemble.ensemble("wikispeedia", "test", ["tiny", "nope"], 4)


def test_hybrid_rows_with_eases_scores(trained):
    """--mixes: one model twice as an ensemble equals that model's hybrid at every weight, and at a very
    large weight the hybrid ranks as EASE (the term alone): the row differs from the `ease` row only by
    EASE's popularity tiebreak."""
    rows = ensemble.ensemble("wikispeedia", "test", ["tiny", "tiny"], 4, mixes=(3.0, 1e6))
    by = {r["method"]: r for r in rows}
    for m in ("3", "1e+06"):
        single, ens = by[f"tiny + EASE x {m}"], by[f"ensemble mean_logp (2) + EASE x {m}"]
        assert ens["rec@10"] == single["rec@10"] and ens["vs_best_member"]["diff"] == 0
        assert ens["mix"] == float(m)
    assert abs(by["tiny + EASE x 1e+06"]["rec@10"] - by["ease"]["rec@10"]) <= 0.02
    assert by["tiny + EASE x 3"]["mrr"] != by["tiny"]["mrr"]  # the term moved the ranking (MRR sees any move in the top 20)


def test_the_library_rows_are_the_ensemble_and_its_variants(trained):
    """--library: sb.Ensemble's three rows per weight; its networks alone rank as the benchmark's own
    mean-log-p ensemble of the same members, and the term-alone row carries no difference."""
    rows = ensemble.library_rows("wikispeedia", "test", ["tiny", "tiny_hybrid"], 4, (3.0,))
    methods = [r["method"] for r in rows]
    assert methods == ["sb.Ensemble (2) x 3", "sb.Ensemble (2) x 3 network alone", "sb.Ensemble (2) x 3 term alone"]
    assert rows[2]["vs_ease"] is None and rows[0]["vs_ease"]["lo"] <= rows[0]["vs_ease"]["diff"] <= rows[0]["vs_ease"]["hi"]
    net = ensemble.ensemble("wikispeedia", "test", ["tiny", "tiny_hybrid"], 4)
    assert rows[1]["rec@10"] == next(r for r in net if r["method"] == "ensemble mean_logp (2)")["rec@10"]
