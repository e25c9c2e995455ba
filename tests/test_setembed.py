"""superbloom.setembed: the attention pool, kNN / rejection / scores, and the labels file."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from superbloom.data.readers import InputError
from superbloom.setembed import AttentionPool, classify, coverage_curve, knn_votes, label_agreement, load_labels, multilabel_scores, read_label_pairs, topk_cosine
from superbloom.data.labels import align_labels

# ------------------------------------------------------------------------------------- pool


@pytest.fixture()
def pool() -> AttentionPool:
    torch.manual_seed(0)
    p = AttentionPool(8, heads=2)
    with torch.no_grad():
        p.query.normal_()  # a query that is not ~0, so the weights are far from uniform
    return p.eval()


def test_pool_outputs_unit_vectors(pool):
    h = torch.randn(3, 5, 8)
    pad = torch.tensor([[False] * 5, [False, False, True, True, True], [False, True, False, True, False]])
    out = pool(h, pad)
    assert out.shape == (3, 8)
    assert torch.allclose(out.norm(dim=1), torch.ones(3), atol=1e-6)


def test_pool_padding_invariance(pool):
    """Appending padded slots with random content changes nothing (-inf masking, not 0)."""
    g = torch.Generator().manual_seed(1)
    h = torch.randn(2, 4, 8, generator=g)
    pad = torch.tensor([[False, False, False, True], [False, False, False, False]])
    base = pool(h, pad)
    junk = torch.randn(2, 6, 8, generator=g) * 10
    h2 = torch.cat([h, junk], dim=1)
    pad2 = torch.cat([pad, torch.ones(2, 6, dtype=torch.bool)], dim=1)
    h2[0, 3] = junk[0, 0]  # the already padded slot gets new content too
    assert torch.allclose(pool(h2, pad2), base, atol=1e-6)
    # a padded slot that is *not* masked would change the vector: the test can fail
    assert not torch.allclose(pool(h2, torch.zeros_like(pad2)), base, atol=1e-3)


def test_pool_permutation_invariance(pool):
    h = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(2))
    pad = torch.tensor([[False] * 4 + [True] * 2, [False] * 6])
    perm = torch.tensor([5, 2, 0, 4, 1, 3])
    assert torch.allclose(pool(h[:, perm], pad[:, perm]), pool(h, pad), atol=1e-6)


def test_pool_fully_padded_row_is_an_error(pool):
    pad = torch.tensor([[False, True], [True, True]])
    with pytest.raises(ValueError, match=r"rows \[1\] are fully padded"):
        pool(torch.randn(2, 2, 8), pad)
    with pytest.raises(ValueError, match="divisible"):
        AttentionPool(6, heads=4)


def test_pool_gradients_reach_query(pool):
    pool.train()
    h = torch.randn(3, 4, 8, requires_grad=True)
    pool(h, torch.zeros(3, 4, dtype=torch.bool))[:, 0].sum().backward()
    assert pool.query.grad is not None and pool.query.grad.abs().sum() > 0 and h.grad.abs().sum() > 0


# ---------------------------------------------------------------------------------------- kNN


def brute_topk(q, b, k, exclude=None):
    s = F.normalize(q, dim=1) @ F.normalize(b, dim=1).T
    if exclude is not None:
        for i, e in enumerate(exclude.tolist()):
            if e >= 0:
                s[i, e] = -float("inf")
    return s.topk(min(k, len(b)), dim=1)


@pytest.mark.parametrize("chunk", [1, 3, 1 << 20])
def test_topk_cosine_matches_brute_force(chunk):
    g = torch.Generator().manual_seed(0)
    q, b = torch.randn(7, 4, generator=g), torch.randn(11, 4, generator=g) * 3
    scores, index = topk_cosine(q, b, k=3, chunk_elems=chunk)
    ref = brute_topk(q, b, 3)
    assert torch.equal(index, ref.indices) and torch.allclose(scores, ref.values)
    ex = torch.tensor([ref.indices[i, 0].item() if i % 2 else -1 for i in range(7)])  # drop the best, odd rows
    scores, index = topk_cosine(q, b, k=3, exclude=ex, chunk_elems=chunk)
    ref = brute_topk(q, b, 3, ex)
    assert torch.equal(index, ref.indices)
    assert not (index == ex[:, None]).any()


def test_topk_cosine_hand_made_and_short_bank():
    bank = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-1.0, 0.0]])
    q = torch.tensor([[1.0, 0.1], [0.0, -5.0]])
    scores, index = topk_cosine(q, bank, k=5)  # k > N: all 3
    assert index.tolist() == [[0, 1, 2], [0, 2, 1]] or index.tolist() == [[0, 1, 2], [2, 0, 1]]
    assert scores[1, 2].item() == pytest.approx(-1.0)
    _, index = topk_cosine(bank, bank, k=3, exclude=torch.arange(3))  # self excluded: 2 left, then -1
    assert (index[:, 2] == -1).all() and not (index[:, :2] == torch.arange(3)[:, None]).any()


def test_knn_votes_weights_and_multilabel_split():
    labels = torch.tensor([[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1]], dtype=torch.bool)
    scores = torch.tensor([[0.9, 0.5, 0.2], [0.4, -0.3, -1.0]])
    index = torch.tensor([[0, 1, 2], [3, 0, -1]])
    shares = knn_votes(scores, index, labels)
    # query 0: A = 0.9 + 0.1, B = 0.5 + 0.1 of 1.6; query 1: only label C (negative sims weigh 0)
    assert shares[0].tolist() == pytest.approx([1.0 / 1.6, 0.6 / 1.6, 0.0], abs=1e-6)
    assert shares[1].tolist() == pytest.approx([0.0, 0.0, 1.0], abs=1e-6)
    soft = knn_votes(scores, index, labels, temperature=0.5)
    w = np.exp(np.array([0.9, 0.5, 0.2]) / 0.5)
    want = np.array([w[0] + w[2] / 2, w[1] + w[2] / 2, 0]) / w.sum()
    assert soft[0].tolist() == pytest.approx(want.tolist(), abs=1e-6)
    all_negative = knn_votes(torch.tensor([[-0.5, -0.6]]), torch.tensor([[0, 1]]), labels)
    assert all_negative[0].tolist() == pytest.approx([0.5, 0.5, 0.0])  # falls back to counts


def test_classify_rejects_below_threshold():
    shares = torch.tensor([[0.85, 0.15, 0.0], [0.5, 0.3, 0.2], [0.0, 0.0, 0.0], [0.1, 0.1, 0.8]])
    label, conf = classify(shares)
    assert label.tolist() == [0, 0, -1, 2]
    label, conf = classify(shares, reject=0.8)
    assert label.tolist() == [0, -1, -1, 2]
    assert conf.tolist() == pytest.approx([0.85, 0.5, 0.0, 0.8])


def test_coverage_curve_hand_made():
    curve = coverage_curve(np.array([0.5, 0.9, 0.8, 0.8]), np.array([False, True, False, True]))
    assert curve["threshold"].tolist() == [0.9, 0.8, 0.5]
    assert curve["coverage"].tolist() == [0.25, 0.75, 1.0]
    assert curve["accuracy"].tolist() == pytest.approx([1.0, 2 / 3, 0.5])
    with pytest.raises(ValueError, match="one length"):
        coverage_curve(np.zeros(3), np.zeros(2, bool))


def test_label_agreement():
    bank = np.array([[1, 0], [0, 1], [1, 1]], bool)
    query = np.array([[1, 0], [0, 1]], bool)
    index = np.array([[0, 1, 2], [0, -1, -1]])
    assert label_agreement(index, query, bank).tolist() == pytest.approx([2 / 3, 0.0])


def test_multilabel_scores_hand_made():
    truth = np.array([[1, 0, 0], [0, 1, 1], [0, 1, 0], [0, 0, 1], [1, 0, 0]], bool)
    pred = np.array([0, 2, 0, 2, -1])
    s = multilabel_scores(pred, truth)
    assert s["accuracy"] == pytest.approx(3 / 5)
    # references: 0, 2 (correct), 1 (lowest true label), 2, 0  -> per-label tp/pred/ref:
    # A: tp 1, pred 2, ref 2 -> F1 0.5; B: tp 0, pred 0, ref 1 -> 0; C: tp 2, pred 2, ref 2 -> 1
    assert s["macro_f1"] == pytest.approx((0.5 + 0.0 + 1.0) / 3)


def test_multilabel_scores_match_sklearn_on_single_labels():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    y, p = rng.integers(0, 5, 200), rng.integers(0, 6, 200)
    truth = np.eye(6, dtype=bool)[y]
    s = multilabel_scores(p, truth)
    assert s["accuracy"] == pytest.approx(metrics.accuracy_score(y, p))
    assert s["macro_f1"] == pytest.approx(metrics.f1_score(y, p, average="macro"))


# ------------------------------------------------------------------------------------- labels


def test_read_label_pairs_tabs_spaces_comments(tmp_path):
    f = tmp_path / "labels.tsv"
    f.write_text("# set\tlabel\n\nA\tx y\nB  z\r\nA\tx y\n")
    assert read_label_pairs(f) == [("A", "x y"), ("B", "z"), ("A", "x y")]


@pytest.mark.parametrize("bad,line", [("A\tx\nB\n", 2), ("A b c\n", 1), ("A\t\n", 1), ("A\tx\tz\n", 1)])
def test_read_label_pairs_errors_name_file_and_line(tmp_path, bad, line):
    f = tmp_path / "labels.tsv"
    f.write_text(bad)
    with pytest.raises(InputError, match=rf"labels.tsv:{line}: expected two columns"):
        read_label_pairs(f)


def test_align_labels_counts_and_multilabel():
    pairs = [("a", "x"), ("b", "y"), ("a", "y"), ("zz", "x"), ("c%C3%85", "y"), ("a", "x"), ("q", "w")]
    keys = {"train": ["b", "a", "d"], "test": ["cÅ"]}
    t = align_labels(pairs, keys)
    assert t.names == ["y", "x", "w"]  # y: 3 sets, x: 2 (a, zz), w: 1
    assert t["train"].tolist() == [[True, False, False], [True, True, False], [False, False, False]]
    assert t["test"].tolist() == [[True, False, False]]  # matched through the URL-decoded form
    assert t.unknown_keys == 2 and t.unknown_examples == ["zz", "q"]
    assert t.repeated_lines == 1 and t.unlabelled == {"train": 1, "test": 0}


def test_load_labels_aligns_to_prepared_dataset(wiki_data, tmp_path):
    train, test = wiki_data.set_names("train"), wiki_data.set_names("test")
    f = tmp_path / "labels.tsv"
    f.write_text(f"{train[3]}\tred\n{train[3]}\tblue\n{test[0]}\tred\nNot_a_page\tred\n")
    t = load_labels(f, wiki_data)
    assert t["train"].shape == (len(train), 2) and t["test"].shape == (len(test), 2)
    assert t["train"][3].tolist() == [True, True] and t["train"].sum() == 2
    assert t["test"][0].tolist() == [True, False]
    assert t.summary()["unknown_keys"] == 1 and t.summary()["labelled"] == {"train": 1, "test": 1}
