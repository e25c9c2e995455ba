"""The hybrid head at a large vocabulary: where its term reaches few of the ids, each candidate weight
is ranked over those ids and the network's best others, and the term alone over its ids and the
smallest others; both give exactly the lists that scoring every id gives (heads/term_sums.py,
ranking.sparse_best). The head itself: test_hybrid_head.py."""
from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from superbloom.data.dataset import SetArray
from superbloom.hashing.bloom import BloomHash, HashConfig
from superbloom.heads import head_config
from superbloom.heads.term_sums import SparseSums, _sparse_term_top, term_sum, term_topk
from superbloom.model.batches import query_batch
from superbloom.model.encoder import ModelConfig, build_model

MODEL = ModelConfig(d=16, heads=2, d_ff=32, layers=1, dropout=0.0)


def term_support(indptr, cols, values, n_ids, context):
    """The oracle: (U, N) bool, the ids the context ids' rows of A (CSR) give a value to, whatever the
    values and weights (a dense sum of ones)."""
    return term_sum(indptr, cols, values.new_ones(1).expand(len(values)), n_ids, context) > 0


def test_with_many_ids_only_the_termed_ids_and_the_networks_best_are_scored_and_topk_stays_exact(monkeypatch):
    """Where the term gives values to few of the ids (k + the largest support under a quarter of N),
    each candidate mix of choose's pass is ranked over those ids and the network's best others
    (ranking.sparse_best): the same top-k as scoring every id, for terms of either sign, any decay,
    excluded ids never returned; the term alone (term_topk) from the sparse sums, the full stable
    sort's list. (2,000 ids stand for many: the floor is lowered.)"""
    from superbloom.heads import ranking
    from superbloom.heads.ranking import sparse_best

    none = SparseSums(torch.zeros(3, dtype=torch.long), torch.zeros(0, dtype=torch.long), torch.zeros(0), 2,
                      torch.full((2, 1), -1))
    assert sparse_best(torch.zeros(2, 2000), none, 10) is None  # under the floor: every id scored
    monkeypatch.setattr(ranking, "SPARSE_MIN_IDS", 1000)

    n = 2000
    rng = np.random.default_rng(3)
    h = BloomHash.build(n, HashConfig(1, 1, 0))
    torch.manual_seed(0)
    model = build_model(MODEL, head_config("hybrid", neighbours=4, term="cooccurrence"), h)
    model.head.fit(SetArray.from_lists([rng.choice(n, rng.integers(2, 6), replace=False) for _ in range(3000)]))
    head = model.head.eval()
    head.values.copy_(torch.randn(len(head.values)) * 2)  # both signs, as EASE's
    contexts = np.array([rng.choice(n, 4, replace=False) for _ in range(37)])
    contexts[::5, 3] = -1
    qb = query_batch(contexts, h)
    ctx = qb.context(qb.target_elem)
    with torch.no_grad():
        hidden = model.target_hidden(qb)
        logp = torch.log_softmax(head.logits(hidden), -1)
    exclude = torch.as_tensor(np.concatenate([contexts, rng.integers(0, n, (37, 2))], 1))
    support = term_support(*head.term_arrays(0), n, ctx)
    sums = SparseSums(*head.term_arrays(0), n, ctx)
    reached = torch.zeros_like(support)
    reached[(sums.found >= 0).nonzero(as_tuple=True)[0], sums.found[sums.found >= 0]] = True
    assert sums.z == int(support.sum(1).max()) and torch.equal(reached, support)
    best = sparse_best(logp.clone(), sums, 10)
    assert best is not None and not bool(support.gather(1, best).any())  # the network's best outside the term
    grid = [(0.0, 1.0, 0)] + [(m, d, 0) for d in (1.0, 0.4) for m in (1.0, 30.0, 1000.0)]
    head._grid, head._parts = grid, [[] for _ in grid]
    try:
        head.topk(hidden, 10, exclude=exclude, context=ctx)
        got = [r for (r,) in head._parts]
    finally:
        head._grid, head._parts = None, None
    for (mix, decay, _), r in zip(grid, got):
        s = logp + mix * head.item_item(ctx, head.age_weights(ctx, decay))
        s[torch.arange(37)[:, None].expand_as(exclude), exclude] = -torch.inf
        want = s.topk(10, dim=1)
        assert torch.equal(r.ids, want.indices), (mix, decay)
        assert torch.allclose(r.scores, want.values), (mix, decay)
    head.mix.fill_(30.0), head.decay.fill_(0.4)
    with head.ranked_alongside() as extra:  # evaluate's one pass: the sparse hybrid and the dense network alone
        hybrid = head.topk(hidden, 10, exclude=exclude, context=ctx)
    assert torch.equal(hybrid.ids, got[5].ids) and torch.equal(extra["network alone"].ids, got[0].ids)
    monkeypatch.setattr(ranking, "SPARSE_MIN_IDS", 1 << 16)
    assert sparse_best(logp, sums, 10) is None  # under the floor again: every id scored
    monkeypatch.setattr(ranking, "SPARSE_MIN_IDS", 1000)
    # the term alone (term_topk): the full stable sort's list, ties (the many zeros) by the smaller id
    head.values[::3] = 0.0  # ties among the termed ids too
    for decay in (1.0, 0.4):
        assert _sparse_term_top(head.indptr, head.cols, head.values, n, ctx, decay, 25, exclude)[0] is not None
        got = term_topk(head.indptr, head.cols, head.values, n, ctx, decay, 25, exclude)
        s = head.item_item(ctx, head.age_weights(ctx, decay))
        rows, at = (ctx >= 0).nonzero(as_tuple=True)
        s[rows, ctx[rows, at]] = -torch.inf
        s[torch.arange(37)[:, None].expand_as(exclude), exclude] = -torch.inf
        want = s.sort(dim=1, descending=True, stable=True)
        assert torch.equal(got.ids, want.indices[:, :25]), decay


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from([1.0, 0.5]), st.integers(1, 30))
def test_the_term_alone_from_sparse_sums_is_the_full_sort(seed, decay, k):
    """term_topk's sparse path (the reached ids and the smallest others) against scoring every id:
    the same ids and scores, for terms with negative values and zeros, padded contexts, excluded ids
    that repeat, are padded or are reached by the term."""
    from superbloom.heads import ranking

    rng = np.random.default_rng(seed)
    n, u = 400, 9
    lens = rng.integers(0, 5, n)
    indptr = torch.as_tensor(np.concatenate([[0], np.cumsum(lens)]))
    cols = torch.as_tensor(np.concatenate([np.sort(rng.choice(n, m, replace=False)) for m in lens]))
    values = torch.as_tensor(rng.choice([-1.0, 0.0, 0.5, 2.0], len(cols)), dtype=torch.float32)
    ctx = torch.as_tensor(rng.integers(-1, n, (u, 3)))
    exclude = torch.as_tensor(rng.integers(-1, n, (u, 4)))
    exclude[:, 0] = cols[rng.integers(0, len(cols), u)] if len(cols) else -1  # often a reached id
    dense = term_topk(indptr, cols, values, n, ctx, decay, k, exclude)
    ranking_floor = ranking.SPARSE_MIN_IDS
    try:
        ranking.SPARSE_MIN_IDS = 100
        assert _sparse_term_top(indptr, cols, values, n, ctx, decay, k, exclude)[0] is not None
        sparse = term_topk(indptr, cols, values, n, ctx, decay, k, exclude)
    finally:
        ranking.SPARSE_MIN_IDS = ranking_floor
    assert torch.equal(sparse.ids, dense.ids)
    assert torch.equal(sparse.scores, dense.scores)
