"""The hybrid head at a large vocabulary: where its term reaches few of the ids, each candidate weight
is ranked over those ids and the network's best others, and the term alone over its ids and the
smallest others; both give exactly the lists that scoring every id gives (heads/term_sums.py,
ranking.sparse_best / sparse_sum_candidates). The head itself: test_hybrid_head.py."""
from __future__ import annotations

import numpy as np
import torch

from superbloom.data.dataset import SetArray
from superbloom.hashing.bloom import BloomHash, HashConfig
from superbloom.heads import head_config
from superbloom.heads.term_sums import term_support, term_topk
from superbloom.model.batches import query_batch
from superbloom.model.encoder import ModelConfig, build_model

MODEL = ModelConfig(d=16, heads=2, d_ff=32, layers=1, dropout=0.0)


def test_with_many_ids_only_the_termed_ids_and_the_networks_best_are_scored_and_topk_stays_exact(monkeypatch):
    """Where the term gives values to few of the ids (k + the largest support under a quarter of N),
    each candidate mix of choose's pass is ranked over those ids and the network's best others
    (ranking.sparse_sum_candidates): the same top-k as scoring every id, for terms of either sign,
    any decay, excluded ids never returned. (2,000 ids stand for many: the floor is lowered.)"""
    from superbloom.heads import ranking
    from superbloom.heads.ranking import sparse_sum_candidates

    assert sparse_sum_candidates(torch.zeros(2, 2000), torch.zeros(2, 2000, dtype=torch.bool), 10) is None
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
    cand = sparse_sum_candidates(logp.clone(), support, 10)
    assert cand is not None and cand.shape[1] == 10 + int(support.sum(1).max())
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
    assert sparse_sum_candidates(logp, torch.ones(37, n, dtype=torch.bool), 10) is None  # no saving: every id
    # the term alone (term_topk): the full stable sort's list, ties (the many zeros) by the smaller id
    head.values[::3] = 0.0  # ties among the termed ids too
    for decay in (1.0, 0.4):
        got = term_topk(head.indptr, head.cols, head.values, n, ctx, decay, 25, exclude)
        s = head.item_item(ctx, head.age_weights(ctx, decay))
        rows, at = (ctx >= 0).nonzero(as_tuple=True)
        s[rows, ctx[rows, at]] = -torch.inf
        s[torch.arange(37)[:, None].expand_as(exclude), exclude] = -torch.inf
        want = s.sort(dim=1, descending=True, stable=True)
        assert torch.equal(got.ids, want.indices[:, :25]), decay
