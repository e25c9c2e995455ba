"""Coherent hash maps (paper appendix C): equal buckets, similar ids together, the second-map
constraint, determinism, and the HashConfig / CLI wiring."""
import json

import numpy as np
import pytest

from superbloom.hashing import coherent as coherent
from superbloom.cli import main
from superbloom.hashing.coherent import CoherentStats, coherent_orders, cooccurrence_embeddings
from superbloom.data.dataset import SetArray
from superbloom.hashing.bloom import BloomHash, HashConfig, duplicate_rows

N_CLUSTERS, PER_CLUSTER = 30, 10


def planted_sets(seed=0, n_sets=1500, extra=5) -> tuple[SetArray, np.ndarray, int]:
    """Sets drawn inside one of 30 planted clusters of 10 ids (plus `extra` loose ids that
    appear in random sets), with a skewed id frequency. -> (sets, cluster of every id, n_ids)."""
    rng = np.random.default_rng(seed)
    n = N_CLUSTERS * PER_CLUSTER + extra
    perm = rng.permutation(n)  # hide the cluster structure from the id numbering
    cluster = np.full(n, -1)
    cluster[perm[:N_CLUSTERS * PER_CLUSTER]] = np.arange(N_CLUSTERS * PER_CLUSTER) // PER_CLUSTER
    weights = 1.0 / np.arange(1, PER_CLUSTER + 1)  # within a cluster, a skewed popularity
    sets = []
    for _ in range(n_sets):
        c = rng.integers(N_CLUSTERS)
        members = perm[c * PER_CLUSTER:(c + 1) * PER_CLUSTER]
        s = rng.choice(members, rng.integers(3, 7), replace=False, p=weights / weights.sum())
        if rng.random() < 0.1:
            s = np.append(s, perm[N_CLUSTERS * PER_CLUSTER + rng.integers(extra)])
        sets.append(s)
    return SetArray.from_lists(sets), cluster, n


@pytest.fixture(params=["greedy", "tree"])
def method(request, monkeypatch):
    """Both ways to build coherent maps: the exact greedy, and the bisection tree that replaces it
    from coherent.TREE_MIN_IDS ids on (lowered here so that the small planted data uses it)."""
    if request.param == "tree":
        monkeypatch.setattr(coherent, "TREE_MIN_IDS", 0)
    return request.param


def bucket_sizes(order: np.ndarray, alpha: int) -> np.ndarray:
    b = np.empty(len(order), np.int64)
    b[order] = np.arange(len(order)) // alpha
    return np.bincount(b)


def purity(buckets: np.ndarray, cluster: np.ndarray) -> float:
    """Fraction of planted ids whose bucket's majority cluster is their own."""
    good = 0
    ids = np.flatnonzero(cluster >= 0)
    for b in np.unique(buckets[ids]):
        c = cluster[ids[buckets[ids] == b]]
        good += np.bincount(c).max()
    return good / len(ids)


def test_equal_buckets_and_permutation(method):
    sets, _, n = planted_sets()
    for alpha in (7, 10, 16):  # 305 ids: the last bucket holds fewer
        for order in coherent_orders(sets, n, alpha, 2):
            assert np.array_equal(np.sort(order), np.arange(n))
            sizes = bucket_sizes(order, alpha)
            assert (sizes[:-1] == alpha).all() and 1 <= sizes[-1] <= alpha


def test_similar_ids_share_a_bucket(method):
    sets, cluster, n = planted_sets()
    first = coherent_orders(sets, n, PER_CLUSTER, 1)[0]
    coherent = np.empty(n, np.int64)
    coherent[first] = np.arange(n) // PER_CLUSTER
    random = BloomHash.build(n, HashConfig(PER_CLUSTER, 1, seed=123)).buckets[0]
    assert purity(coherent, cluster) > 0.9  # the planted clusters come back as buckets
    assert purity(random, cluster) < 0.5


def test_second_map_never_repeats_a_first_map_pair(method):
    sets, cluster, n = planted_sets()
    alpha = 10
    stats = CoherentStats()
    o1, o2 = coherent_orders(sets, n, alpha, 2, stats=stats)
    assert stats.method == method
    b1, b2 = np.empty(n, np.int64), np.empty(n, np.int64)
    b1[o1], b2[o2] = np.arange(n) // alpha, np.arange(n) // alpha
    pairs_violating = 0
    for b in range(b2.max() + 1):  # ids of one second-map bucket: all in different first-map buckets
        firsts = b1[b2 == b]
        pairs_violating += len(firsts) - len(np.unique(firsts))
    assert pairs_violating <= stats.violations * alpha  # only where the greedy said it had to
    assert stats.violations <= 1
    # the built maps (which separate any leftover) never put two ids together twice
    h = BloomHash.build(n, HashConfig(alpha, 2, seed=0, coherent=2), sets)
    assert len(duplicate_rows(h.buckets)) == 0
    assert purity(h.buckets[1], cluster) < purity(h.buckets[0], cluster)


def test_deterministic(method):
    sets, _, n = planted_sets()
    a = coherent_orders(sets, n, 8, 2, seed=3)
    b = coherent_orders(sets, n, 8, 2, seed=3)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    h1 = BloomHash.build(n, HashConfig(8, 3, seed=1, coherent=1), sets)
    h2 = BloomHash.build(n, HashConfig(8, 3, seed=1, coherent=1), sets)
    assert np.array_equal(h1.buckets, h2.buckets)


def test_mixed_configuration_and_random_default_unchanged():
    sets, cluster, n = planted_sets()
    mixed = BloomHash.build(n, HashConfig(10, 2, seed=0, coherent=1), sets)
    assert purity(mixed.buckets[0], cluster) > 0.9 and purity(mixed.buckets[1], cluster) < 0.5
    # coherent = 0 draws exactly the random maps it always did (sets are not even needed)
    assert np.array_equal(BloomHash.build(n, HashConfig(10, 2, seed=4), sets).buckets,
                          BloomHash.build(n, HashConfig(10, 2, seed=4)).buckets)


def test_embeddings_are_unit_or_zero():
    sets, _, n = planted_sets()
    emb = cooccurrence_embeddings(sets, n + 3, rank=8)  # 3 ids that never occur: zero rows
    norms = np.linalg.norm(emb, axis=1)
    assert np.allclose(norms[:n], 1.0, atol=1e-4) and np.allclose(norms[n:], 0.0)


def test_float32_sketch_matches_float64(monkeypatch):
    """Millions of ids switch the sketch to float32 blocks (coherent.FLOAT64_MAX_ELEMS): the same
    seed gives the same co-occurrence geometry as the float64 path (the Gram matrices stay float64)."""
    sets, _, n = planted_sets()
    ref = cooccurrence_embeddings(sets, n + 3, rank=8)
    monkeypatch.setattr(coherent, "FLOAT64_MAX_ELEMS", 0)
    monkeypatch.setattr(coherent, "GRAM_ROWS", 37)  # several chunks
    seen, inner = [], coherent._randomized_embeddings
    monkeypatch.setattr(coherent, "_randomized_embeddings", lambda a, *rest: seen.append(a.dtype) or inner(a, *rest))
    low = cooccurrence_embeddings(sets, n + 3, rank=8)
    assert seen == [np.float32] and low.shape == ref.shape
    # the basis of a rank-8 factorisation is determined up to sign/rotation: compare the cosines
    assert np.abs(low @ low.T - ref @ ref.T).max() < 1e-3
    assert np.allclose(np.linalg.norm(low[n:], axis=1), 0.0)


def test_config_errors():
    with pytest.raises(ValueError, match="coherent must be between 0 and m"):
        HashConfig(alpha=4, m=2, coherent=3)
    with pytest.raises(ValueError, match="training sets"):
        BloomHash.build(100, HashConfig(4, 2, coherent=1))


def test_train_cli_flag(wiki_data, tmp_path):
    out = tmp_path / "model"
    rc = main(["train", "--preset", "none", str(wiki_data.path), "--out", str(out), "--steps", "2", "--batch-size", "16", "--d", "16",
               "--heads", "2", "--d-ff", "32", "--layers", "1", "--alpha", "16", "--coherent", "2",
               "--eval-every", "0", "--val-fraction", "0", "--quiet"])
    assert rc == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["hash"]["coherent"] == 2
    assert cfg["coherent_build"]["method"] == "greedy"  # how the maps were built, for the record
    h = BloomHash.load(out / "hashing.safetensors")
    assert len(duplicate_rows(h.buckets)) == 0


def test_tree_second_map_keeps_similar_ids_together(monkeypatch):
    """With topics larger than alpha^2 ids (as the paper's data: thousands of ids per topic), the
    interleaved second map is coherent too, and never repeats a first-map pair."""
    monkeypatch.setattr(coherent, "TREE_MIN_IDS", 0)
    rng = np.random.default_rng(1)
    n_topics, per, alpha = 4, 144, 6  # 576 ids: 16 whole groups of alpha^2, no incomplete tail
    sets = [rng.choice(np.arange(t * per, (t + 1) * per), 8, replace=False)
            for t in rng.integers(n_topics, size=3000)]
    cluster = np.arange(n_topics * per) // per
    o1, o2 = coherent_orders(SetArray.from_lists(sets), n_topics * per, alpha, 2, rank=8)
    b1, b2 = np.empty(len(o1), np.int64), np.empty(len(o2), np.int64)
    b1[o1], b2[o2] = np.arange(len(o1)) // alpha, np.arange(len(o2)) // alpha
    assert purity(b1, cluster) > 0.95 and purity(b2, cluster) > 0.9
    assert all(len(np.unique(b1[b2 == b])) == (b2 == b).sum() for b in range(b2.max() + 1))


@pytest.mark.parametrize("n_segments", [1, 70, 3000])
def test_order_within_is_lexsort_ties_included(n_segments):
    rng = np.random.default_rng(n_segments)
    seg = np.sort(rng.integers(0, n_segments, 20_000))
    proj = rng.standard_normal(20_000).astype(np.float32)
    proj[::5] = 0.0
    proj[::7] = -0.0  # equal to 0.0 for lexsort: a tie, kept in input order
    proj[::11] = rng.choice([-1.5, 2.25], len(proj[::11]))
    got = coherent._order_within(proj, seg, len(np.unique(seg)))
    assert np.array_equal(got, np.lexsort((proj, seg)))
