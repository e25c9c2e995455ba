"""Bloom hash maps (paper sec. 3.2): equal buckets, disjoint ranges, no full collisions, identity."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from superbloom.hashing.bloom import MASK, MASK_ELEM, PAD, PAD_ELEM, SPECIALS, BloomHash, HashConfig, duplicate_rows


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 3000), alpha=st.integers(1, 60), m=st.integers(1, 4), seed=st.integers(0, 10))
def test_bucket_properties(n, alpha, m, seed):
    if m >= 2 and n < 2 * alpha * alpha:  # too few buckets to separate every pair: a clear error
        if (-(-n // alpha)) ** m < n:
            with pytest.raises(ValueError, match="distinct tuples"):
                BloomHash.build(n, HashConfig(alpha, m, seed))
        return
    h = BloomHash.build(n, HashConfig(alpha, m, seed))
    nb = -(-n // alpha)
    assert h.n_buckets == nb and h.buckets.shape == (m, n)
    for j in range(m):  # exactly alpha ids per bucket, the last may hold fewer
        sizes = np.bincount(h.buckets[j], minlength=nb)
        assert (sizes[:-1] == alpha).all() and 1 <= sizes[-1] <= alpha
    tokens = h.tokens(np.arange(n))  # (n, m) global tokens
    ranges = [set(tokens[:, j].tolist()) for j in range(m)]
    for j in range(m):  # disjoint token ranges, after the special tokens
        assert min(ranges[j]) >= len(SPECIALS) * m
        assert max(ranges[j]) < h.n_tokens
        for k in range(j + 1, m):
            assert not ranges[j] & ranges[k]
    if m >= 2:  # no two ids share all m tokens
        assert len({tuple(r) for r in tokens.tolist()}) == n
    for j in range(m):  # inverse index agrees with the maps
        for b in range(nb):
            ids = h.inverse[j, b][h.inverse[j, b] >= 0]
            assert (h.buckets[j, ids] == b).all()
    assert (h.inverse >= 0).sum() == m * n


def test_alpha_1_m_1_is_identity():
    h = BloomHash.build(50, HashConfig(alpha=1, m=1, seed=3))
    assert (h.tokens(np.arange(50))[:, 0] == np.arange(50) + len(SPECIALS)).all()
    assert h.n_tokens == 50 + len(SPECIALS)


def test_deterministic_per_seed():
    a, b, c = (BloomHash.build(1000, HashConfig(7, 2, s)) for s in (1, 1, 2))
    assert (a.buckets == b.buckets).all()
    assert not (a.buckets == c.buckets).all()


def test_special_tokens_are_collision_free():
    h = BloomHash.build(100, HashConfig(10, 3))
    enc = h.encode(np.array([[PAD_ELEM, MASK_ELEM, 0]]))
    assert enc[0, :3].tolist() == [PAD * 3, PAD * 3 + 1, PAD * 3 + 2]
    assert enc[0, 3:6].tolist() == [MASK * 3, MASK * 3 + 1, MASK * 3 + 2]
    assert (enc[0, 6:] >= len(SPECIALS) * 3).all()


def test_collisions_are_separated_at_scale():
    # ~(alpha-1)^2 / 2 = 1200 colliding pairs expected for random maps; the builder removes them
    h = BloomHash.build(200_000, HashConfig(50, 2))
    assert len(duplicate_rows(h.buckets)) == 0


def test_save_load_roundtrip(tmp_path):
    h = BloomHash.build(1234, HashConfig(5, 2))
    h.save(tmp_path / "h.safetensors")
    g = BloomHash.load(tmp_path / "h.safetensors")
    assert (g.buckets == h.buckets).all() and (g.inverse == h.inverse).all()
    assert g.describe() == h.describe()


def test_alpha_zero_is_chosen_from_the_vocabulary_size():
    from superbloom.hashing.bloom import AUTO_ALPHA, UNHASHED_MAX_IDS

    small = HashConfig(alpha=0, m=2).resolve(UNHASHED_MAX_IDS)
    assert (small.alpha, small.m) == (1, 1)
    big = HashConfig(alpha=0, m=2).resolve(UNHASHED_MAX_IDS + 1)
    assert (big.alpha, big.m) == (AUTO_ALPHA, 2)
    assert HashConfig(alpha=3).resolve(10) == HashConfig(alpha=3)
    assert BloomHash.build(100, HashConfig(alpha=0)).alpha == 1
