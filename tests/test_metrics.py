"""Metrics on hand-computed cases."""
import numpy as np
import pytest

from superbloom.metrics import bootstrap_ci, mrr, ndcg_at, recall_at, summarize, target_ranks


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
