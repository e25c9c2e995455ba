"""The baselines for millions of ids (cooccur_index.py, item2vec.py, als.py, dot_topk.py) on tiny data:
the inverted index equals the dense co-occurrence it replaces, exclusion holds, ties are deterministic."""
import numpy as np
import pytest

from superbloom.evaluation.baselines import BASELINES, Cooccurrence
from superbloom.evaluation.cooccur_index import CooccurIndex
from superbloom.data.dataset import SetArray
from superbloom.heads.dot_topk import table_topk

N = 50


def tiny(seed=0, n_sets=80, n_queries=40):
    rng = np.random.default_rng(seed)
    sets = [rng.choice(N - 5, rng.integers(1, 9), replace=False) for _ in range(n_sets)]  # ids 45..49 never seen
    sets.append(np.array([3, 3, 7]))  # a repeat within a set counts once
    contexts = np.full((n_queries, 5), -1, np.int64)
    for q in range(n_queries):
        n = rng.integers(0, 6)  # empty contexts too
        contexts[q, :n] = rng.choice(N, n, replace=False)
    return SetArray.from_lists(sets), contexts


def dense_rank(scores, banned, counts, k):
    """Brute force: every id not banned, by score desc, then training count desc, then smaller id."""
    out = np.full((len(scores), k), -1, np.int64)
    for q, (s, ban) in enumerate(zip(scores, banned)):
        ok = np.setdiff1d(np.arange(len(s)), ban[ban >= 0])
        top = ok[np.lexsort((ok, -counts[ok], -s[ok]))][:k]
        out[q, :len(top)] = top
    return out


def context_matrix(contexts):
    a = np.zeros((len(contexts), N))
    for q, row in enumerate(contexts):
        np.add.at(a[q], row[row >= 0], 1.0)
    return a


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_count_equals_dense_cooccurrence_counts(seed):
    train, contexts = tiny(seed)
    x = train.incidence(N).toarray().astype(np.float64)  # (S, N) binary
    scores = context_matrix(contexts) @ (x.T @ x)  # (Q, N): the dense X^T X summed over the context
    counts = np.bincount(train.ids, minlength=N)
    exclude = np.random.default_rng(seed).integers(-1, N, (len(contexts), 3))
    banned = np.concatenate([contexts, exclude], 1)
    got = CooccurIndex(train, N).rank(contexts, exclude, 12, "count")
    np.testing.assert_array_equal(got, dense_rank(scores, banned, counts, 12))


def test_touched_is_the_sparse_row_of_dense_counts():
    train, contexts = tiny(3)
    x = train.incidence(N).toarray().astype(np.float64)
    scores = context_matrix(contexts) @ (x.T @ x)
    index = CooccurIndex(train, N)
    for q in range(len(contexts)):
        ids, s = index.touched(contexts[q])
        np.testing.assert_array_equal(ids, np.flatnonzero(scores[q]))
        np.testing.assert_array_equal(s, scores[q][ids])


def test_idf_weight():
    train, contexts = tiny(4)
    x = train.incidence(N).toarray().astype(np.float64)
    df = x.sum(0)
    idf = np.log(len(train) / np.maximum(df, 1))
    scores = (context_matrix(contexts) @ (x.T @ x)) * idf  # count x the candidate's idf
    counts = np.bincount(train.ids, minlength=N)
    got = CooccurIndex(train, N).rank(contexts, None, 10, "idf")
    np.testing.assert_array_equal(got, dense_rank(scores, contexts, counts, 10))


@pytest.mark.parametrize("seed", [0, 5])
def test_cosine_ranks_as_the_dense_cosine_baseline(seed):
    """Same ranking as baselines.Cooccurrence up to ties: the dense one scores in float32 and breaks
    ties by adding 1e-6 x popularity, so compare the exact (float64) scores of the two rankings."""
    train, contexts = tiny(seed)
    k = 10
    dense = Cooccurrence(train, N)
    theirs = dense.rank(contexts, contexts, k)
    ours = CooccurIndex(train, N).rank(contexts, None, k, "cosine")
    x = train.incidence(N).toarray().astype(np.float64)
    c = x.T @ x
    norm = 1.0 / np.sqrt(np.maximum(np.diag(c), 1.0))
    cos = c * norm[:, None] * norm[None, :]
    np.fill_diagonal(cos, 0.0)
    exact = context_matrix(contexts) @ cos  # (Q, N) float64
    q = np.arange(len(contexts))[:, None]
    np.testing.assert_allclose(exact[q, ours], exact[q, theirs], rtol=0, atol=1e-6)
    assert (ours[exact[q, ours] > 1e-6] == theirs[exact[q, ours] > 1e-6]).mean() > 0.9  # mostly identical outright


def test_exclusion_ties_and_fill():
    # ids 1 and 2 each share one set with 0; 2 is more popular; 3 only with 9; 4 never seen
    train = SetArray.from_lists([[0, 1], [0, 2], [2, 5], [9, 3], [5, 6], [5, 7]])
    index = CooccurIndex(train, 10)
    ranked = index.rank(np.array([[0, -1]]), None, 6, "count")
    # touched: 1 and 2 (count 1; 2 is more popular), then the popularity fill: 5 (3), then count-1 ids by id
    np.testing.assert_array_equal(ranked, [[2, 1, 5, 3, 6, 7]])
    ranked = index.rank(np.array([[0, -1]]), np.array([[2, 5]]), 4, "count")
    np.testing.assert_array_equal(ranked, [[1, 3, 6, 7]])
    assert (index.rank(np.array([[0, 2]]), None, 10, "count") == -1).sum() == 2  # 10 ids, 2 in the context
    np.testing.assert_array_equal(index.rank(np.array([[-1, -1]]), None, 3, "idf"), [[5, 0, 2]])  # empty: popularity
    ids, scores = index.touched(np.array([-1]))
    assert len(ids) == 0 and len(scores) == 0


@pytest.mark.parametrize("budget,dense,weight", [(5, 16 << 20, "cosine"), (8 << 20, 0, "cosine"), (5, 0, "count")])
def test_batches_and_chunks_do_not_change_the_ranking(monkeypatch, budget, dense, weight):
    """One query per batch summed in chunks (np.add.at), the np.unique path, and both (partial sums
    merged: exact only for integer counts) rank as the default (one batch, one bincount)."""
    from superbloom.evaluation import cooccur_index as ci

    train, contexts = tiny(6, n_queries=60)
    index = CooccurIndex(train, N)
    whole = index.rank(contexts, None, 10, weight)
    monkeypatch.setattr(ci, "CANDIDATE_BUDGET", budget)
    monkeypatch.setattr(ci, "DENSE_ENTRIES", dense)
    np.testing.assert_array_equal(index.rank(contexts, None, 10, weight), whole)
    ids, s = index.touched(contexts[1], weight)
    monkeypatch.undo()
    ids0, s0 = index.touched(contexts[1], weight)
    np.testing.assert_array_equal(ids, ids0)
    np.testing.assert_array_equal(s, s0)


def test_table_topk_equals_brute_force_with_ties():
    rng = np.random.default_rng(0)
    table = rng.integers(-2, 3, (300, 4)).astype(np.float32)  # small integers: many exact ties
    queries = rng.integers(-2, 3, (37, 4)).astype(np.float32)
    exclude = rng.integers(-1, 300, (37, 6))
    rows, _ = table_topk(queries, table, exclude, 15, score_entries=37 * 20)  # blocks of 20 rows
    s = queries.astype(np.float64) @ table.T.astype(np.float64)
    for q in range(37):
        s[q, exclude[q][exclude[q] >= 0]] = -np.inf
    want = np.lexsort((np.broadcast_to(np.arange(300), s.shape), -s), axis=-1)[:, :15]  # score, then row
    np.testing.assert_array_equal(rows, want)


def test_registry_entries():
    for name in ("cooc-count", "cooc-idf", "cooc-cosine", "item2vec", "als", "item2vec-untuned", "als-untuned"):
        assert name in BASELINES and hasattr(BASELINES[name], "fit")
    train, contexts = tiny(7)
    base = BASELINES["cooc-idf"].fit(train, N)
    np.testing.assert_array_equal(base.rank(contexts, None, 5), CooccurIndex(train, N).rank(contexts, None, 5, "idf"))


def check_factor_baseline(make, train, contexts, k=10):
    """Shapes, exclusion, never an unseen id, and the same ranking from a second fit with the same seed."""
    exclude = np.random.default_rng(0).integers(-1, N, (len(contexts), 4))
    a = make()
    top = a.rank(contexts, exclude, k)
    assert top.shape == (len(contexts), k) and top.dtype == np.int64
    banned = np.concatenate([contexts, exclude], 1)
    assert not (top[:, :, None] == banned[:, None, :]).any()
    seen = np.bincount(train.ids, minlength=N) > 0
    assert seen[top[top >= 0]].all()
    for row in top:  # distinct ids
        assert len(set(row[row >= 0])) == (row >= 0).sum()
    np.testing.assert_array_equal(make().rank(contexts, exclude, k), top)
    return top


def test_item2vec():
    pytest.importorskip("gensim")
    from superbloom.evaluation.item2vec import Item2Vec, Item2VecConfig

    train, contexts = tiny(8)
    for sg in (False, True):
        check_factor_baseline(lambda: Item2Vec(train, N, Item2VecConfig(sg=sg, dim=8, epochs=2, window=0 if sg else 50,
                                                                       shrink_windows=not sg)), train, contexts)


def test_als():
    pytest.importorskip("implicit")
    from implicit.nearest_neighbours import bm25_weight

    from superbloom.evaluation.als import ALS, ALSConfig

    train, contexts = tiny(9)
    for conf in ("bm25", "plain"):
        check_factor_baseline(lambda: ALS(train, N, ALSConfig(factors=8, iterations=3, confidence=conf)),
                              train, contexts)
    x = train.incidence(N)
    ref = bm25_weight(x.T.tocsr(), K1=100, B=0.8).T.tocsr()  # implicit's own BM25, ids x sets
    np.testing.assert_allclose(ALS(train, N, ALSConfig(factors=8, iterations=1))._values(x), ref.data, rtol=1e-5)


def test_als_fold_in_reproduces_the_training_sets_factors():
    """A training set given as a query gets (nearly) its own fitted factors: the fold-in solves the
    same normal equations exactly where fitting ran 3 conjugate-gradient steps."""
    pytest.importorskip("implicit")
    from superbloom.evaluation.als import ALS, ALSConfig

    train, _ = tiny(10)
    contexts = np.full((len(train), int(train.lengths.max())), -1, np.int64)
    for s in range(len(train)):
        contexts[s, :train.lengths[s]] = train[s]
    for conf in ("bm25", "plain"):
        base = ALS(train, N, ALSConfig(factors=8, iterations=5, confidence=conf))
        folded = base.query_factors(contexts)
        assert np.corrcoef(folded.ravel(), base.model.user_factors.ravel())[0, 1] > 0.99
        assert not np.allclose(folded[:5], folded[5:10])  # different sets, different factors


@pytest.mark.parametrize("module,name", [("gensim", "item2vec"), ("implicit", "als"), ("gensim", "item2vec-untuned"),
                                         ("implicit", "als-untuned")])
def test_missing_optional_dependency_says_how_to_install(monkeypatch, module, name):
    monkeypatch.setitem(__import__("sys").modules, module, None)  # import of it now fails
    train, _ = tiny(11)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[baselines\]' from a clone, pip install 'superbloom\[baselines\]'"):
        BASELINES[name].fit(train, N)


def test_id_counts_in_chunks():
    from superbloom.heads.dot_topk import id_counts

    ids = np.random.default_rng(12).integers(0, 9, 100).astype(np.int32)
    np.testing.assert_array_equal(id_counts(ids, 11, step=7), np.bincount(ids, minlength=11))
