"""Allow-lists: exact decoding among the allowed ids equals exhaustive scoring restricted to them,
for Algorithm 1 on hand-made distributions and for every head of the contract table (test_heads.py)."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from superbloom.hashing.bloom import BloomHash, HashConfig
from superbloom.heads.beam import DecodeConfig, beam_topk, exhaustive_topk

from conftest import DEVICES
from test_heads import CASES, N_IDS, make, queries


def restricted_reference(full_ids, full_scores, allow: set, k: int):
    """The first k allowed ids of an exhaustive ranking of every id -> (ids, scores, every allowed
    id's score) lists per query."""
    out = []
    for ids, scores in zip(full_ids.tolist(), full_scores.tolist()):
        kept = [(i, s) for i, s in zip(ids, scores) if i in allow and i >= 0]
        out.append(([i for i, _ in kept[:k]], [s for _, s in kept[:k]], [s for _, s in kept]))
    return out


def check_against(r, ref, k):
    for q, (ids, scores, every) in enumerate(ref):
        got = r.ids[q].tolist()
        assert (r.ids[q] >= 0).sum().item() == len(ids)  # as many as the allowed ids not excluded, up to k
        assert torch.allclose(r.scores[q, :len(ids)], torch.tensor(scores, dtype=r.scores.dtype), atol=1e-5)
        assert got[len(ids):] == [-1] * (k - len(ids))
        # ids equal wherever their score is not tied with another allowed id's
        for pos, s in enumerate(scores):
            if every.count(s) == 1:
                assert got[pos] == ids[pos]


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=60, deadline=None)
@given(n=st.integers(5, 300), alpha=st.integers(2, 8), m=st.integers(2, 3), k=st.integers(1, 12),
       beam=st.integers(1, 6), seed=st.integers(0, 1000), score=st.sampled_from(["sum_log", "min", "max"]),
       share=st.floats(0.0, 1.0), n_exclude=st.integers(0, 4))
def test_exact_with_allow_equals_exhaustive_over_allowed(device, n, alpha, m, k, beam, seed, score, share,
                                                        n_exclude):
    n = max(n, 2 * alpha * alpha)
    h = BloomHash.build(n, HashConfig(alpha, m, seed))
    buckets, inverse = (t.to(device) for t in h.tables())
    g = torch.Generator().manual_seed(seed)
    logp = (torch.randn(3, m, h.n_buckets, generator=g) * 3).log_softmax(-1).to(device)
    allow = (torch.rand(n, generator=g) < share).nonzero().squeeze(1).to(device)  # sorted unique, maybe empty
    exclude = torch.randint(0, n, (3, n_exclude), generator=g).to(device) if n_exclude else None
    r = beam_topk(logp, buckets, inverse, k, beam, exclude, score, exact=True, allow=allow).cpu()
    assert r.exact.all()
    assert set(r.ids[r.ids >= 0].tolist()) <= set(allow.tolist())
    every = exhaustive_topk(logp, buckets, n, exclude, score).cpu()
    check_against(r, restricted_reference(every.ids, every.scores, set(allow.tolist()), k), k)
    direct = exhaustive_topk(logp, buckets, k, exclude, score, allow=allow).cpu()  # the restricted reference
    assert torch.equal(direct.ids >= 0, r.ids >= 0) and torch.allclose(direct.scores, r.scores)
    approx = beam_topk(logp, buckets, inverse, k, beam, exclude, score, allow=allow).cpu()
    for q in range(3):  # a certified approximate answer is the exact one among the allowed ids
        assert set(approx.ids[q][approx.ids[q] >= 0].tolist()) <= set(allow.tolist())
        if approx.exact[q]:
            assert torch.allclose(approx.scores[q], r.scores[q])


@pytest.mark.parametrize("case", CASES)
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 1000), share=st.floats(0.02, 0.9), k=st.integers(1, 15))
def test_every_head_topk_allowed_equals_exhaustive_over_allowed(case, seed, share, k):
    h, model = make(case)
    model.eval()
    hidden, exclude = queries(h, model)
    g = torch.Generator().manual_seed(seed)
    allow = (torch.rand(N_IDS, generator=g) < share).nonzero().squeeze(1)
    with torch.no_grad():
        r = model.head.topk_allowed(hidden, k, allow, exclude, DecodeConfig(exact=True), context=exclude)
        every = model.head.topk(hidden, N_IDS, exclude, DecodeConfig(exhaustive=True), context=exclude)
    assert r.exact.all()
    check_against(r, restricted_reference(every.ids, every.scores, set(allow.tolist()), k), k)
