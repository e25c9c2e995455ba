"""Metrics and their confidence intervals on hand-computed cases."""
import numpy as np
import pytest

from superbloom.evaluation.metrics import bootstrap_ci, hits_at, mean_ci, mrr, ndcg_at, paired_difference, recall_at, summarize, summarize_ci, target_ranks


def test_hand_computed():
    ranked = np.array([[5, 3, 9], [1, 2, 3], [7, 8, 9], [4, -1, -1]])
    targets = np.array([3, 1, 0, -1])  # ranks 2, 1, miss, unseen target (always a miss)
    ranks = target_ranks(ranked, targets)
    assert ranks.tolist() == [2, 1, 0, 0]
    assert recall_at(ranks, 1) == 0.25
    assert recall_at(ranks, 2) == 0.5
    assert mrr(ranks) == pytest.approx((1 / 2 + 1) / 4)
    assert ndcg_at(ranks, 10) == pytest.approx((1 / np.log2(3) + 1) / 4)
    assert ndcg_at(ranks, 1) == pytest.approx(0.25)
    s = summarize(ranks)
    assert set(s) == {"rec@1", "rec@10", "rec@20", "mrr", "ndcg@10"}


def test_padding_id_never_matches_unseen_target():
    assert target_ranks(np.array([[-1, -1]]), np.array([-1])).tolist() == [0]


def test_bootstrap_interval_contains_mean():
    v = np.random.default_rng(0).random(500) < 0.3
    lo, hi = bootstrap_ci(v.astype(float))
    assert lo < v.mean() < hi and hi - lo < 0.15


def test_hits_at():
    assert hits_at(np.array([0, 1, 3, 10, 11]), 10).tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]
    assert hits_at(np.array([0, 1, 3]), 1).dtype == np.float64


# five held-out sets of unequal sizes, labelled out of order: 2 examples of set 7, 3 of set 2, ...
VALUES = np.array([1, 0, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1], dtype=float)
GROUPS = np.array([7, 7, 2, 2, 2, 9, 9, 9, 9, 4, 5, 5])


def test_set_bootstrap_equals_a_direct_resampling_of_whole_sets():
    n_boot = 200
    labels = np.unique(GROUPS)  # the sets in sorted order: the order bootstrap_ci draws them in
    pick = np.random.default_rng(3).integers(0, len(labels), (n_boot, len(labels)))
    means = [np.concatenate([VALUES[GROUPS == labels[j]] for j in row]).mean() for row in pick]
    want = np.quantile(means, [0.025, 0.975])
    assert bootstrap_ci(VALUES, n_boot, seed=3, groups=GROUPS) == pytest.approx(tuple(want), abs=1e-12)
    want90 = np.quantile(means, [0.05, 0.95])
    assert bootstrap_ci(VALUES, n_boot, level=0.9, seed=3, groups=GROUPS) == pytest.approx(tuple(want90), abs=1e-12)


def test_set_bootstrap_moves_the_examples_of_a_set_together():
    values, groups = np.array([1.0, 0.0, 1.0, 0.0, 0.0, 1.0]), np.array([0, 0, 1, 1, 2, 2])
    assert bootstrap_ci(values, groups=groups) == (0.5, 0.5)  # every set's mean is 0.5: so is every resample's
    lo, hi = bootstrap_ci(values)  # examples resampled one by one: the interval is wide
    assert lo < 0.5 < hi and hi - lo > 0.4


def test_singleton_groups_are_the_plain_bootstrap():
    v = np.random.default_rng(1).random(300)
    assert bootstrap_ci(v, 500, seed=2) == bootstrap_ci(v, 500, seed=2, groups=np.arange(300) + 7)
    assert bootstrap_ci(np.array([])) == (0.0, 0.0)


def test_mean_ci_and_paired_difference():
    mean, lo, hi = mean_ci(VALUES, GROUPS)
    assert mean == pytest.approx(6 / 12) and lo <= mean <= hi
    other = np.array([0, 0, 1, 0, 1, 0, 0, 1, 1, 0, 1, 1], dtype=float)
    d = paired_difference(VALUES, other, GROUPS)
    assert d["diff"] == pytest.approx((6 - 6) / 12)
    assert (d["lo"], d["hi"]) == bootstrap_ci(VALUES - other, groups=GROUPS)
    assert paired_difference(VALUES, VALUES, GROUPS) == {"diff": 0.0, "lo": 0.0, "hi": 0.0}


def test_summarize_ci():
    ranks = np.array([1, 0, 5, 12, 20, 2, 0, 30])
    groups = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    s = summarize_ci(ranks, groups)
    assert set(s) == {f"rec@{k}{x}" for k in (1, 10, 20) for x in ("", "_lo", "_hi")} | {"mrr"}
    assert s["rec@1"] == recall_at(ranks, 1) == 1 / 8
    assert s["rec@10"] == 3 / 8 and s["rec@20"] == 5 / 8
    assert s["mrr"] == mrr(ranks)
    assert (s["rec@10_lo"], s["rec@10_hi"]) == bootstrap_ci(hits_at(ranks, 10), groups=groups)
