"""EASE on each id's neighbourhood (heads/local_ease.py) and the registry of terms (heads/terms.py)."""
from __future__ import annotations

import numpy as np
import pytest

from superbloom.data.dataset import SetArray
from superbloom.heads import config as head_configs
from superbloom.heads.config import HybridConfig
from superbloom.heads.itemitem import EASE_MAX_IDS, ease_weights
from superbloom.heads.local_ease import local_ease
from superbloom.heads.terms import TERMS, auto_term, build_term, memory_estimate, term_entry


def random_sets(seed: int, n: int, n_sets: int = 150, full: bool = False) -> SetArray:
    rng = np.random.default_rng(seed)
    sets = [rng.choice(n, rng.integers(2, 8), replace=False) for _ in range(n_sets)]
    return SetArray.from_lists(sets + ([np.arange(n)] if full else []))


def dense(indptr, cols, values, n):
    a = np.zeros((n, n), np.float64)
    a[np.repeat(np.arange(n), np.diff(indptr)), cols] = values
    return a


def brute_force(sets: SetArray, n: int, k: int, lam: float, lists: int, by: str, keep: int) -> np.ndarray:
    """The module docstring's construction, one id at a time in numpy: G from each id's `lists`
    co-occurring ids of largest count (or cosine; ties by the smaller id), a ridge regression per
    target over its k first of them, P's symmetry for the rows the direct values miss, each row's
    `keep` largest."""
    x = sets.incidence(n).toarray().astype(np.float64)
    full = x.T @ x
    df = np.diag(full).copy()
    score = full if by == "count" else full / np.sqrt(np.maximum(np.outer(df, df), 1))
    top = {}
    for i in range(n):
        cand = [j for j in range(n) if j != i and full[i, j] > 0]
        top[i] = sorted(cand, key=lambda j: (-np.float32(score[i, j]), j))[:lists]
    g = np.zeros((n, n))
    for i in range(n):
        for j in top[i]:
            g[i, j] = g[j, i] = full[i, j]
    g[np.diag_indices(n)] = df
    direct, p_diag, hood = {}, np.zeros(n), {}
    for j in range(n):
        nb = sorted(top[j][:k])
        hood[j] = nb
        b = np.linalg.solve(g[np.ix_(nb, nb)] + lam * np.eye(len(nb)), g[nb, j]) if nb else np.zeros(0)
        p_diag[j] = 1.0 / (df[j] + lam - g[j, nb] @ b)
        for c, v in zip(nb, b):
            direct[c, j] = v
    a = np.zeros((n, n))
    for j in range(n):
        for c in hood[j]:
            a[j, c] = direct[c, j] * p_diag[j] / p_diag[c]  # B[j, c] by P's symmetry ...
    for (c, j), v in direct.items():
        a[c, j] = v  # ... where c's own regression gave no direct value
    for i in range(n):  # each row's `keep` largest |values|, ties by the smaller id
        order = sorted(np.flatnonzero(a[i]), key=lambda j: (-abs(np.float32(a[i, j])), j))
        a[i, order[keep:]] = 0.0
    return a


@pytest.mark.parametrize("k,lists,by,keep", [(3, 3, "count", 50), (4, 9, "cosine", 50), (5, 8, "count", 3),
                                             (2, 20, "cosine", 2)])
def test_it_equals_the_brute_force_construction(k, lists, by, keep):
    n = 25
    sets = random_sets(1, n)
    want = brute_force(sets, n, k, 3.0, lists, by, keep)
    indptr, cols, values = local_ease(sets, n, k, 3.0, lists=lists, by=by, keep=keep)
    assert values.dtype == np.float32 and cols.dtype == np.int64 and len(indptr) == n + 1
    for i in range(n):
        row = cols[indptr[i]:indptr[i + 1]]
        assert np.all(np.diff(row) > 0) and i not in row  # sorted by id, no diagonal
    np.testing.assert_allclose(dense(indptr, cols, values, n), want, rtol=2e-4, atol=1e-6)


@pytest.mark.parametrize("lam", [1.0, 30.0])
def test_with_the_whole_vocabulary_as_neighbourhood_it_is_dense_ease(lam):
    n = 30
    sets = random_sets(2, n, full=True)  # one set holds every id: every pair co-occurs
    b = ease_weights(sets, n, lam)
    indptr, cols, values = local_ease(sets, n, k=n - 1, lam=lam, keep=n)
    np.testing.assert_allclose(dense(indptr, cols, values, n), b, rtol=1e-4, atol=1e-6)
    indptr, cols, values = local_ease(sets, n, k=n - 1, lam=lam, keep=4)  # the EASE term's pruning
    from superbloom.heads.itemitem import largest_pattern
    ip, cc = largest_pattern(b, 4)
    assert np.array_equal(indptr, ip) and np.array_equal(cols, cc)


def test_rare_ids_get_rows_and_blocks_do_not_change_the_result(monkeypatch):
    n = 60
    sets = random_sets(3, n, n_sets=80)
    indptr, cols, values = local_ease(sets, n, k=3, lam=2.0, keep=10)
    seen = np.bincount(sets.ids, minlength=n) > 0
    has_partner = np.diff(local_ease(sets, n, k=1, lam=2.0, keep=1)[0]) > 0
    assert np.all(np.diff(indptr)[seen & has_partner] > 0)  # every id with a co-occurring id has a row
    import superbloom.heads.local_ease as le
    monkeypatch.setattr(le, "BLOCK_IDS", 9)  # 2 targets a block
    again = local_ease(sets, n, k=3, lam=2.0, keep=10)
    assert np.array_equal(again[0], indptr) and np.array_equal(again[1], cols)
    np.testing.assert_allclose(again[2], values, rtol=1e-6)


def test_bad_settings_are_refused():
    sets = random_sets(0, 10)
    for kw, what in (({"k": 0}, "k and keep"), ({"lam": 0.0}, "lam"), ({"by": "idf"}, "by must be")):
        with pytest.raises(ValueError, match=what):
            local_ease(sets, 10, **kw)


def test_the_registry_of_terms():
    assert set(TERMS) | {"auto"} == set(head_configs.TERMS)  # the names the configs check (no torch)
    from superbloom.heads.terms import AUTO_ABOVE
    assert auto_term(1000) == "ease" and auto_term(EASE_MAX_IDS + 1) == AUTO_ABOVE
    with pytest.raises(ValueError, match="exceed the"):
        term_entry("ease", EASE_MAX_IDS + 1)
    with pytest.raises(ValueError, match="hashed-hybrid head's"):
        term_entry("bigram", 100, "hybrid")
    with pytest.raises(ValueError, match="unknown item-item term"):
        term_entry("svd", 100)
    assert memory_estimate("ease", 60_000, 0) > 14e9  # dense: N^2 float32
    assert 0 < memory_estimate("local-ease", 10**6, 10**7) < memory_estimate("local-ease", 2 * 10**6, 10**7)
    sets = random_sets(4, 20)
    got = build_term("local-ease", sets, 20, HybridConfig(neighbours=5))
    assert np.diff(got[0]).max() <= 5


def test_the_hybrid_heads_build_the_new_term():
    from superbloom.heads.hashed_hybrid import resolve_term as hashed_resolve
    from superbloom.heads.hybrid import resolve_term
    assert resolve_term("auto", EASE_MAX_IDS + 1) == (auto_term(EASE_MAX_IDS + 1),)
    assert resolve_term("auto", EASE_MAX_IDS + 1, ordered=True) == ("transition", auto_term(EASE_MAX_IDS + 1))
    assert resolve_term("local-ease", 10**6) == ("local-ease",)
    assert hashed_resolve("local-ease", 10**6) == "local-ease"
    with pytest.raises(ValueError, match="exceed"):
        resolve_term("ease", EASE_MAX_IDS + 1)
