"""The classical baselines against brute-force references on hand-made sets."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from superbloom.evaluation.baselines import fit_baseline
from superbloom.data.dataset import SetArray

SETS = [[0, 1, 2], [0, 1], [1, 2, 3], [3, 4], [3, 4, 5], [0, 2], [4, 5]]
N = 7  # id 6 never occurs


def dense(sets, n):
    x = np.zeros((len(sets), n))
    for r, s in enumerate(sets):
        x[r, s] = 1.0
    return x


def test_popularity_ranks_by_count_and_excludes_context():
    b = fit_baseline("popularity", SetArray.from_lists(SETS), N)
    ctx = np.array([[1, -1]])
    got = b.rank(ctx, ctx, 3)[0]
    counts = dense(SETS, N).sum(0)
    counts[1] = -1
    assert list(got) == list(np.argsort(-counts, kind="stable")[:3])


def test_cooccurrence_is_the_cosine_sum():
    b = fit_baseline("cooccurrence", SetArray.from_lists(SETS), N)
    x = dense(SETS, N)
    c = x.T @ x
    cos = c / np.sqrt(np.outer(np.maximum(np.diag(c), 1), np.maximum(np.diag(c), 1)))
    np.fill_diagonal(cos, 0)
    np.testing.assert_allclose(b.scores(np.array([[0, 3]])), cos[[0]] + cos[[3]], rtol=1e-6)


def test_ease_matches_the_closed_form():
    lam = 2.0
    from superbloom.evaluation.baselines import Ease

    b = Ease(SetArray.from_lists(SETS), N, lam=lam)
    x = dense(SETS, N)
    p = np.linalg.inv(x.T @ x + lam * np.eye(N))
    ref = np.eye(N) - p / np.diag(p)[None, :]
    np.testing.assert_allclose(b.b, ref, atol=1e-6)


def test_puresvd_projects_onto_the_top_singular_space():
    from superbloom.evaluation.baselines import PureSVD

    x = dense(SETS, N)
    rank = 3
    b = PureSVD(SetArray.from_lists(SETS), N, rank=rank)
    assert b.v.shape == (N, rank)
    _, _, vt = np.linalg.svd(x)
    proj = vt[:rank].T @ vt[:rank]  # the reference projection onto the top-3 right singular vectors
    got = b.scores(np.array([[0, 1, -1], [3, 4, 5]]))
    np.testing.assert_allclose(got, dense([[0, 1], [3, 4, 5]], N) @ proj, atol=1e-5)
    # ranking works and never returns a context id
    ctx = np.array([[0, 1, -1]])
    top = b.rank(ctx, ctx, 3)[0]
    assert 0 not in top and 1 not in top


def test_unknown_baseline_is_named():
    with pytest.raises(ValueError, match="unknown baseline"):
        fit_baseline("nope", SetArray.from_lists(SETS), N)


def test_spd_inverse_in_place_matches_numpy():
    from superbloom.evaluation.baselines import spd_inverse

    rng = np.random.default_rng(0)
    a = rng.normal(size=(2100, 40))
    g = a @ a.T + 3.0 * np.eye(2100)  # > one 1024 block, so the blocked mirror is exercised
    ref = np.linalg.inv(g)
    got = spd_inverse(g)
    assert np.shares_memory(got, g)  # no N x N copy
    np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-10)


def test_spd_inverse_float32_in_place():
    from superbloom.evaluation.baselines import spd_inverse

    rng = np.random.default_rng(1)
    a = rng.normal(size=(1500, 30))
    g = a @ a.T + 3.0 * np.eye(1500)
    ref = np.linalg.inv(g)
    for order in "CF":  # either memory order is inverted in place (no N x N copy)
        g32 = g.astype(np.float32, order=order)
        got = spd_inverse(g32)
        assert got.dtype == np.float32 and np.shares_memory(got, g32)
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-5)


def test_ease_above_the_float64_limit_is_float32_and_ranks_the_same(monkeypatch):
    """Above EASE_FLOAT64_MAX_IDS the N x N matrix is float32 throughout (half the memory): the weights stay
    within float32 rounding of the float64 fit, and the top ids of every context are the same."""
    import superbloom.heads.itemitem as itemitem

    rng = np.random.default_rng(2)
    lists = [sorted(rng.choice(300, rng.integers(2, 12), replace=False).tolist()) for _ in range(2000)]
    sets = SetArray.from_lists(lists)
    b64 = itemitem.ease_weights(sets, 300, lam=10.0)
    monkeypatch.setattr(itemitem, "EASE_FLOAT64_MAX_IDS", 100)
    b32 = itemitem.ease_weights(sets, 300, lam=10.0)
    assert b32.dtype == np.float32 and b32.flags.c_contiguous and b64.flags.c_contiguous  # rows contiguous
    np.testing.assert_allclose(b32, b64, atol=1e-5)
    ctx = dense(lists[:50], 300)
    s64, s32 = ctx @ b64, ctx @ b32
    np.testing.assert_array_equal(np.argsort(-s64, 1)[:, :5], np.argsort(-s32, 1)[:, :5])


def test_ease_says_what_a_long_fit_will_cost(monkeypatch, caplog):
    import logging

    import superbloom.heads.itemitem as itemitem

    monkeypatch.setattr(itemitem, "spd_inverse", lambda g: np.eye(len(g), dtype=g.dtype))  # no 10K^3 work here
    sets = SetArray.from_lists([[0, 1], [1, 10_001]])
    with caplog.at_level(logging.INFO, logger="superbloom"):
        itemitem.ease_weights(sets, 10_002)
    assert "EASE: inverting a 10,002 x 10,002 float64 matrix (0.8 GB), about 17 s on one thread" in caplog.text


def test_ease_refuses_what_memory_cannot_hold(monkeypatch):
    import builtins
    import io

    import superbloom.heads.itemitem as itemitem

    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda f, *a, **k: io.StringIO("MemAvailable:   1024 kB\n")
                        if f == "/proc/meminfo" else real_open(f, *a, **k))
    with pytest.raises(MemoryError, match=r"EASE is dense: 1,000 ids need about .* GiB .* available"):
        itemitem.ease_memory_check(1000)


def test_spd_inverse_rejects_an_indefinite_matrix():
    from superbloom.evaluation.baselines import spd_inverse

    with pytest.raises(ValueError, match="not positive definite"):
        spd_inverse(np.array([[1.0, 2.0], [2.0, 1.0]]))


def _registered():
    from superbloom.evaluation.baselines import BASELINES
    return sorted(BASELINES)


@pytest.mark.parametrize("name", _registered())
def test_every_registered_baseline_keeps_the_ranking_contract(name):
    """The contract table over the whole registry: fitted on the same sets, every baseline ranks up to
    k distinct known ids per context, best first (a sparse baseline pads with -1 where it reaches
    fewer ids), never an excluded one, the same ids whether the contexts come one at a time or
    together, the same again when fitted a second time, and an empty context too."""
    from superbloom.evaluation.baselines import BASELINES
    from superbloom._extras import MissingExtra

    sets = SetArray.from_lists(SETS * 3)  # enough sets for the embedding baselines' minimum counts
    try:
        b = BASELINES[name].fit(sets, N)
    except MissingExtra as e:  # item2vec, als: the [baselines] extra
        pytest.skip(str(e))
    rng = np.random.default_rng(0)
    contexts, exclude = rng.integers(-1, N - 1, (9, 2)), rng.integers(-1, N, (9, 3))
    contexts[0] = -1  # no known id in the context
    top = b.rank(contexts, exclude, 4)
    assert top.shape == (9, 4) and np.issubdtype(top.dtype, np.integer)
    found = top >= 0
    assert (top < N).all() and (top >= -1).all() and all(len(set(r[f])) == f.sum() for r, f in zip(top, found))
    assert (np.diff(found.astype(int), axis=1) <= 0).all(), "-1 only after the ids it ranks"
    assert not ((top[:, :, None] == exclude[:, None, :]) & found[:, :, None]).any()
    one_by_one = np.concatenate([b.rank(contexts[i:i + 1], exclude[i:i + 1], 4) for i in range(len(contexts))])
    if not np.array_equal(one_by_one, top):  # only float ties may order differently (a matmul's batch size)
        if hasattr(b, "scores"):  # the same scores at every rank: ties, even across the k-th place
            s_all, s_one = (np.take_along_axis(b.scores(contexts), t, 1) for t in (top, one_by_one))
            assert np.allclose(s_all, s_one, atol=1e-5), "the ranking depends on which contexts share the call"
        else:
            assert [set(r) for r in one_by_one] == [set(r) for r in top], "the ranking depends on the batch"
    again = BASELINES[name].fit(sets, N).rank(contexts, exclude, 4)
    assert np.array_equal(again, top), "fitting twice on the same sets ranks differently"


def test_rank_scores_is_the_same_in_any_chunking():
    from superbloom.evaluation.baselines import rank_scores, topk_excluding

    rng = np.random.default_rng(1)
    scores = rng.integers(0, 4, (11, 30)).astype(np.float64)  # many ties
    rows = np.arange(11)[:, None]
    contexts, exclude = rows, rng.integers(-1, 30, (11, 5))
    of = lambda c: scores[c[:, 0]]  # noqa: E731  (the "context" names its score row)
    whole = topk_excluding(scores, exclude, 7)
    for batch in (1, 3, 256):
        assert np.array_equal(rank_scores(of, contexts, exclude, 7, batch), whole)
    best = np.take_along_axis(scores, whole, 1)
    assert (np.diff(best, axis=1) <= 0).all()  # best first
    assert rank_scores(of, contexts[:0], exclude[:0], 7, 4).shape == (0, 7)


def test_registry_entries_say_when_they_are_skipped():
    from superbloom.evaluation.baselines import BASELINES, EASE_MAX_IDS

    assert BASELINES["ease"].skipped(EASE_MAX_IDS) is None
    assert BASELINES["ease"].skipped(EASE_MAX_IDS + 1) == f"{EASE_MAX_IDS + 1:,} ids > {EASE_MAX_IDS:,} (dense EASE)"
    assert BASELINES["popularity"].skipped(10**9) is None
    assert [n for n, e in BASELINES.items() if e.last_context] == ["cooccurrence", "cooc-count", "cooc-idf", "cooc-cosine"]



@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 12), st.integers(0, 40))
def test_first_not_excluded_is_the_order_without_each_rows_ids(seed, k, width):
    """The popularity ranking per row: the first k ids of the shared order that the row does not
    exclude (-1 padded rows, repeats, exclusions wider than k), as a loop over rows gives them."""
    from superbloom.evaluation.baselines import first_not_excluded

    rng = np.random.default_rng(seed)
    n = 60
    order = rng.permutation(n)
    exclude = rng.integers(-1, n, (1100, width))  # more rows than one block of 1024
    got = first_not_excluded(order, exclude, k)
    assert got.shape == (1100, k)
    for row, ex in zip(got[::37], exclude[::37]):
        assert row.tolist() == [i for i in order.tolist() if i not in set(ex.tolist())][:k]


def test_cooccurrence_uses_the_inverted_index_from_the_sparse_floor(monkeypatch):
    """Below heads.ranking.SPARSE_MIN_IDS the dense float32 cosine (small vocabularies rank as they
    did); from there the same sums from the inverted index, with no N x N matrix."""
    from superbloom.evaluation.baselines import Cooccurrence
    from superbloom.heads import ranking
    from superbloom.evaluation.cooccur_index import CoocCosine, CooccurIndex

    train = SetArray.from_lists(SETS)
    ctx = np.array([[0, 3], [5, -1]])
    assert type(fit_baseline("cooccurrence", train, N)) is Cooccurrence
    monkeypatch.setattr(ranking, "SPARSE_MIN_IDS", N)
    base = fit_baseline("cooccurrence", train, N)
    assert type(base) is CoocCosine
    np.testing.assert_array_equal(base.rank(ctx, ctx, 4), CooccurIndex(train, N).rank(ctx, None, 4, "cosine"))
    # the sums are the dense cosine's: every id the index ranks first scores the dense maximum
    dense = Cooccurrence(train, N).scores(ctx)
    rows, cols = np.nonzero(ctx >= 0)
    dense[rows, ctx[rows, cols]] = -1  # the context ids are never ranked
    np.testing.assert_allclose(dense[np.arange(2), base.rank(ctx, ctx, 1)[:, 0]], dense.max(1), rtol=1e-6)
