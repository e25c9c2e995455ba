"""The item-item term's sparsity patterns (heads/itemitem.py), checked by hand and against dense
brute force: the top-k co-occurring ids (the set term), the top-k magnitudes of each row (EASE's
weights kept), and the directed transition counts with a window and a gap decay (the sequence term).
The hybrid head that uses them is checked in test_hybrid_head.py."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from superbloom.data.dataset import SetArray
from superbloom.heads.itemitem import largest_pattern, neighbour_pattern, transition_pattern

N = 30


def sets_of(seed=0, n_sets=40):
    rng = np.random.default_rng(seed)
    return SetArray.from_lists([rng.choice(N, rng.integers(2, 8), replace=False) for _ in range(n_sets)])


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 12))
def test_neighbour_pattern_is_the_top_k_co_occurring_ids(seed, k):
    sets = sets_of(seed)
    indptr, cols = neighbour_pattern(sets, N, k)
    counts = np.zeros((N, N), int)
    for s in (sets[i] for i in range(len(sets))):
        u = np.unique(s)
        counts[np.ix_(u, u)] += 1
    np.fill_diagonal(counts, 0)
    for i in range(N):
        partners = [j for j in range(N) if counts[i, j] > 0]
        want = sorted(sorted(partners, key=lambda j: (-counts[i, j], j))[:k])
        assert cols[indptr[i]:indptr[i + 1]].tolist() == want



@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 9), st.integers(1, 7))
def test_largest_pattern_is_the_top_k_magnitudes_of_each_row(seed, k, block):
    rng = np.random.default_rng(seed)
    b = rng.normal(size=(10, 10)).astype(np.float32) * (rng.random((10, 10)) < 0.6)
    indptr, cols = largest_pattern(b, k, block=block)
    for i in range(10):
        row = np.abs(b[i]).copy()
        row[i] = 0
        want = sorted(j for j in np.argsort(-row, kind="stable")[:k] if row[j] > 0)
        got = cols[indptr[i]:indptr[i + 1]].tolist()
        assert len(got) == len(want) and sorted(row[got]) == sorted(row[want]) and got == sorted(got)


def test_transition_pattern_counts_who_follows_whom_by_hand():
    seqs = SetArray.from_lists([[0, 1, 2], [0, 1], [2, 0], [3, 3, 1]])
    indptr, cols, values = transition_pattern(seqs, 4, k=10, window=2, gap_decay=0.5)
    got = {(a, int(c)): float(v) for a in range(4)
           for c, v in zip(cols[indptr[a]:indptr[a + 1]], values[indptr[a]:indptr[a + 1]])}
    # 0 -> 1 twice (gap 1), 0 -> 2 once at gap 2 (0.5), 1 -> 2 once, 2 -> 0 once, 3 -> 1 at gap 1 and 2;
    # 3 -> 3 is the diagonal (left out); nothing goes 1 -> 0 or 2 -> 1: the term is directed
    want = {(0, 1): 2.0, (0, 2): 0.5, (1, 2): 1.0, (2, 0): 1.0, (3, 1): 1.5}
    assert got.keys() == want.keys()
    assert all(got[p] == pytest.approx(np.log1p(want[p])) for p in want)
    indptr, cols, values = transition_pattern(seqs, 4, k=1, window=2, gap_decay=0.5)  # the largest of each row
    assert [cols[indptr[a]:indptr[a + 1]].tolist() for a in range(4)] == [[1], [2], [0], [1]]
    indptr, cols, _ = transition_pattern(seqs, 4, k=10, window=1, gap_decay=0.5)  # window 1: neighbours only
    assert cols[indptr[0]:indptr[1]].tolist() == [1]


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 6), st.integers(1, 4), st.sampled_from([1.0, 0.8, 0.5]))
def test_transition_pattern_is_the_top_k_of_the_pair_sums(seed, k, window, gap_decay):
    rng = np.random.default_rng(seed)
    lists = [rng.integers(0, N, rng.integers(1, 9)) for _ in range(25)]
    t = np.zeros((N, N))
    for s in lists:
        for i in range(len(s)):
            for g in range(1, window + 1):
                if i + g < len(s) and s[i] != s[i + g]:
                    t[s[i], s[i + g]] += gap_decay ** (g - 1)
    indptr, cols, values = transition_pattern(SetArray.from_lists(lists), N, k, window, gap_decay)
    for a in range(N):
        want = sorted(sorted(np.nonzero(t[a])[0], key=lambda j: (-round(t[a, j], 9), j))[:k])
        assert cols[indptr[a]:indptr[a + 1]].tolist() == want
        assert np.allclose(values[indptr[a]:indptr[a + 1]], np.log1p(t[a, want]))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["counts", "float32", "float64", "signed zeros", "inf"]))
def test_the_one_key_row_order_is_lexsorts(seed, kind):
    """_largest_per_row's order (row ascending, value descending, ties in the order given) from one
    uint64 key where the values are exact in float32, else lexsort: always lexsort's order."""
    from superbloom.heads.itemitem import _row_major_descending

    rng = np.random.default_rng(seed)
    rows = np.sort(rng.integers(0, 20, 400))
    data = {"counts": lambda: rng.integers(0, 6, 400).astype(np.float32),
            "float32": lambda: np.round(rng.normal(size=400), 1).astype(np.float32),
            "float64": lambda: rng.normal(size=400),
            "signed zeros": lambda: rng.choice(np.array([-0.0, 0.0, 1.5, -1.5], np.float32), 400),
            "inf": lambda: rng.choice(np.array([np.inf, -np.inf, 0.0, 3.0], np.float32), 400)}[kind]()
    assert np.array_equal(_row_major_descending(rows, data), np.lexsort((-data, rows)))
