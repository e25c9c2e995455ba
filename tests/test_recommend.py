"""The in-memory query API: `model.recommend` and `model.similar_items` (inference/recommend.py).

A batch equals its queries one at a time; allow / deny / exclude_seen equal exhaustive scoring
restricted to the ids they leave (hypothesis); similar items equal the exhaustive cosine over the
allowed ids; each for the superbloom head (Algorithm 1 and its certificate) and the hybrid head (the
recommended recipe: network + item-item term); the arrays convert to Arrow and pandas with the bulk
predict file's columns."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import superbloom as sb
from superbloom.heads.decode_config import DecodeConfig


@pytest.fixture(scope="module")
def hybrid_predictor(tiny_hybrid):
    return tiny_hybrid  # conftest.py


@pytest.fixture(scope="module", params=["superbloom", "hybrid"])
def any_head(request):
    """The query API's tests on each kind of head: the hashed superbloom head and the hybrid head."""
    return request.getfixturevalue("tiny_predictor" if request.param == "superbloom" else "hybrid_predictor")


def contexts_of(model, n=9):
    s = model.vocab.strings
    return [[s[3], s[10]], [s[5]], [s[20], s[1], s[7], s[400]], [s[2], "no-such-id"], [s[50], s[51]],
            [s[8], s[9], s[11]], [s[100]], [s[0], s[30], s[60]], [s[13]]][:n]


@pytest.mark.parametrize("decode", [DecodeConfig(), DecodeConfig(exact=True)], ids=["approx", "exact"])
def test_recommend_in_a_batch_equals_one_at_a_time(any_head, decode):
    model = any_head
    s = model.vocab.strings
    contexts = contexts_of(model)
    for lists in [{}, {"allow": list(s[::3])}, {"deny": list(s[:40])}, {"exclude_seen": False}]:
        batch = model.recommend(contexts, 7, decode=decode, batch_size=4, **lists)
        assert batch.ids.shape == batch.scores.shape == batch.index.shape == (len(contexts), 7)
        assert batch.exact.shape == (len(contexts),) and batch.exact.dtype == bool
        for q, ctx in enumerate(contexts):
            one = model.recommend([ctx], 7, decode=decode, **lists)
            assert one.index[0].tolist() == batch.index[q].tolist(), (q, lists)
            assert np.allclose(one.scores[0], batch.scores[q], atol=1e-5)
            assert one.exact[0] == batch.exact[q]
            pred = model.predict(ctx, 7, decode, lists.get("allow"), lists.get("deny"),
                                 lists.get("exclude_seen", True))  # the one-context API answers the same
            assert [i for i, _ in pred.items] == batch.ids[q][batch.index[q] >= 0].tolist()
            assert pred.exact == batch.exact[q]
    assert batch.unknown[3] == ["no-such-id"]


def exhaustive(model, ctx_ids, allow, deny, exclude_seen, k):
    """The reference: every id scored (DecodeConfig(exhaustive=True)), nothing excluded, then filtered
    -> the first k (id, score) pairs left."""
    every = model.rank(np.asarray([ctx_ids]), len(model.vocab), DecodeConfig(exhaustive=True),
                       exclude=np.zeros((1, 0), np.int64))
    gone = set(deny) | (set(ctx_ids) if exclude_seen else set())
    keep = [(i, s) for i, s in zip(every.ids[0].tolist(), every.scores[0].tolist())
            if i >= 0 and i not in gone and (allow is None or i in allow)]
    return keep[:k], [s for _, s in keep]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), share=st.floats(0.01, 1.0), n_deny=st.integers(0, 200),
       k=st.integers(1, 15), width=st.integers(1, 6), exclude_seen=st.booleans(), use_allow=st.booleans())
def test_recommend_filters_equal_exhaustive_scoring(any_head, seed, share, n_deny, k, width, exclude_seen,
                                                    use_allow):
    model = any_head
    n = len(model.vocab)
    rng = np.random.default_rng(seed)
    ctx = rng.choice(n, width, replace=False).tolist()
    allow = set(np.flatnonzero(rng.random(n) < share).tolist()) if use_allow else None
    if allow is not None and not allow:
        allow = {int(rng.integers(n))}
    deny = rng.choice(n, n_deny, replace=False).tolist()
    s = model.vocab.strings
    got = model.recommend([[s[i] for i in ctx]], k, allow=None if allow is None else [s[i] for i in sorted(allow)],
                          deny=[s[i] for i in deny], exclude_seen=exclude_seen, decode=DecodeConfig(exact=True))
    ref, every = exhaustive(model, ctx, allow, deny, exclude_seen, k)
    assert got.exact[0]
    ids = got.index[0][got.index[0] >= 0].tolist()
    assert len(ids) == len(ref)
    assert np.allclose(got.scores[0][:len(ref)], [x for _, x in ref], atol=1e-5)
    for pos, (i, x) in enumerate(ref):  # ids equal wherever a score is not tied with another kept id's
        if sum(abs(y - x) <= 1e-5 for y in every) == 1:
            assert ids[pos] == i
    if exclude_seen:
        assert not set(ids) & set(ctx)
    assert not set(ids) & set(deny)
    if allow is not None:
        assert set(ids) <= allow


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), share=st.floats(0.0, 1.0), n_deny=st.integers(0, 300), k=st.integers(1, 20),
       q=st.integers(1, 5), exclude_seen=st.booleans(), use_allow=st.booleans())
def test_similar_items_equal_exhaustive_cosine(any_head, seed, share, n_deny, k, q, exclude_seen, use_allow):
    model = any_head
    n = len(model.vocab)
    rng = np.random.default_rng(seed)
    queries = rng.choice(n, q, replace=False)
    allow = np.flatnonzero(rng.random(n) < share) if use_allow else np.arange(n)
    if use_allow and not len(allow):
        allow = np.asarray([int(rng.integers(n))])
    deny = rng.choice(n, n_deny, replace=False)
    s = model.vocab.strings
    got = model.similar_items([s[i] for i in queries], k, allow=[s[i] for i in allow] if use_allow else None,
                              deny=[s[i] for i in deny], exclude_seen=exclude_seen)
    vecs = model.item_vectors().astype(np.float64)
    unit = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    assert got.exact.all()
    for r, i in enumerate(queries.tolist()):
        cand = [j for j in allow.tolist() if j not in set(deny.tolist()) and (j != i or not exclude_seen)]
        cos = unit[cand] @ unit[i]
        order = np.argsort(-cos, kind="stable")[:k]
        ids = got.index[r][got.index[r] >= 0]
        assert len(ids) == min(k, len(cand))
        assert np.allclose(got.scores[r][:len(ids)], cos[order], atol=1e-5)
        for pos in range(len(ids)):  # ids equal wherever the cosine is not tied
            if np.sum(np.abs(cos - cos[order[pos]]) <= 1e-5) == 1:
                assert ids[pos] == cand[order[pos]]


def test_similar_items_batch_equals_similar(tiny_predictor):
    model = tiny_predictor
    s = model.vocab.strings
    ids = [s[3], s[4], s[200], s[0]]
    batch = model.similar_items(ids, 6)
    for r, i in enumerate(ids):
        one = model.similar(i, 6)
        assert [x for x, _ in batch.items(r)] == [x for x, _ in one]
        assert [c for _, c in batch.items(r)] == pytest.approx([c for _, c in one], abs=1e-6)
    with_self = model.similar_items([s[3]], 3, exclude_seen=False)
    assert with_self.ids[0][0] == s[3] and with_self.scores[0][0] == pytest.approx(1.0, abs=1e-5)


def test_filters_from_a_file_equal_inline(tiny_predictor, tmp_path):
    model = tiny_predictor
    s = model.vocab.strings
    allow, deny = tmp_path / "allow.txt", tmp_path / "deny.txt"
    allow.write_text("\n".join(s[::4]) + "\n\nno-such-id\n")
    deny.write_text("\n".join(s[:20:2]) + "\n")
    for call in (lambda **kw: model.recommend(contexts_of(model, 3), 5, **kw),
                 lambda **kw: model.similar_items([s[3], s[8]], 5, **kw)):
        from_files = call(allow=allow, deny=deny)
        inline = call(allow=list(s[::4]), deny=list(s[:20:2]))
        assert np.array_equal(from_files.index, inline.index)
    with pytest.raises(sb.ArgumentError, match=r"a list of ids, or a pathlib.Path.*Path\('allow.txt'\)"):
        model.recommend(contexts_of(model, 1), 5, allow="allow.txt")
    with pytest.raises(ValueError, match="allow: none of the 1 ids"):
        model.similar_items([s[3]], 5, allow=["no-such-id"])


def test_unknown_queries_name_their_row_or_are_empty(tiny_predictor):
    model = tiny_predictor
    s = model.vocab.strings
    with pytest.raises(ValueError, match="context 1: none of its 1 ids"):
        model.recommend([[s[1]], ["nope"]], 3)
    with pytest.raises(ValueError, match="id 0: 'nope' is not in the model's vocabulary"):
        model.similar_items(["nope", s[2]], 3)
    got = model.recommend([[s[1]], ["nope"]], 3, skip_empty=True)
    assert (got.index[1] == -1).all() and not got.exact[1] and got.unknown[1] == ["nope"]
    assert got.ids[1].tolist() == [None] * 3
    sims = model.similar_items(["nope", s[2]], 3, skip_empty=True)
    assert (sims.index[0] == -1).all() and (sims.index[1] >= 0).all()
    with pytest.raises(sb.ArgumentError, match="contexts: expected a list of contexts"):
        model.recommend(s[1], 3)


def test_arrays_to_arrow_and_pandas(tiny_predictor):
    pd = pytest.importorskip("pandas")
    model = tiny_predictor
    s = model.vocab.strings
    recs = model.recommend([[s[1], s[2]], [s[5]]], 4, allow=list(s[:6]))  # few allowed: short rows
    table = recs.to_arrow(keys=["u1", "u2"])
    assert table.schema.names == ["key", "rank", "id", "score", "exact"]
    assert [str(t) for t in table.schema.types] == ["string", "int32", "string", "double", "bool"]
    rows = table.to_pylist()
    for q, key in enumerate(["u1", "u2"]):
        mine = [r for r in rows if r["key"] == key]
        assert [r["id"] for r in mine] == [i for i, _ in recs.items(q)]
        assert [r["rank"] for r in mine] == list(range(1, len(mine) + 1))
        assert {r["exact"] for r in mine} == {bool(recs.exact[q])}
    frame = recs.to_pandas()
    assert isinstance(frame, pd.DataFrame) and len(frame) == int((recs.index >= 0).sum())
    assert frame["key"].tolist()[0] == "0"
    with pytest.raises(ValueError, match="keys: 1 given for 2 queries"):
        recs.to_arrow(keys=["x"])
