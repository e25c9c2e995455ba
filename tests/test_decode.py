"""Algorithm 1 on hand-made distributions, and exact decoding against exhaustive scoring."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from superbloom.heads.beam import DecodeConfig, beam_pass, beam_topk, decode_topk, exhaustive_topk, sufficient_beam
from superbloom.heads.ranking import score_fn, topk_last
from superbloom.hashing.bloom import BloomHash, HashConfig

from conftest import DEVICES


def tables(h):
    return h.tables()


def figure2():
    """Paper figure 2: m = 2, four-to-one hashing, 16 ids; id = 4 * row + col with
    map 1 = id // 4 (row), map 2 = id % 4 (column)."""
    ids = np.arange(16)
    h = BloomHash(np.stack([ids // 4, ids % 4]), alpha=4)
    return h


def test_hand_made_certified():
    h = figure2()
    buckets, inverse = tables(h)
    p1 = torch.tensor([0.7, 0.2, 0.05, 0.05]).log()
    p2 = torch.tensor([0.1, 0.6, 0.2, 0.1]).log()
    logp = torch.stack([p1, p2])[None]  # (1, 2, 4)
    r = beam_pass(logp, buckets, inverse, k=1, beam=2)
    assert r.ids.tolist() == [[1]]  # row 0, column 1: 0.7 * 0.6
    assert r.scores[0, 0] == pytest.approx(float(np.log(0.7 * 0.6)))
    # bound gamma(p^B) with B = 2: 0.2 * 0.2 = 0.04 < 0.42 -> certified
    assert r.exact.tolist() == [True] and r.beam.tolist() == [2]


def test_hand_made_needs_wider_beam():
    h = figure2()
    buckets, inverse = tables(h)
    # beam 1 picks row 0 and column 0; best scored candidate 0.4 * 0.3 = 0.12 (id 0) or
    # 0.4 * 0.29 / 0.35 * 0.3 ...; the true best is id 5 (row 1, column 1): 0.35 * 0.29 < id 0?
    p1 = torch.tensor([0.40, 0.35, 0.15, 0.10]).log()
    p2 = torch.tensor([0.01, 0.29, 0.30, 0.40]).log()
    logp = torch.stack([p1, p2])[None]
    approx = beam_pass(logp, buckets, inverse, k=1, beam=1)
    # candidates: row 0 (ids 0-3) and column 3 (ids 3, 7, 11, 15): best is id 3 (0.4 * 0.4 = 0.16)
    assert approx.ids.tolist() == [[3]]
    # bound: p1^1 * p2^1 = 0.4 * 0.4 = 0.16 <= 0.16 -> certified (ties are allowed)
    assert approx.exact.tolist() == [True]
    exact = beam_topk(logp, buckets, inverse, k=3, beam=1, exact=True)
    ref = exhaustive_topk(logp, buckets, k=3)
    assert exact.ids.tolist() == ref.ids.tolist() and exact.exact.all()


def test_exclusion_and_padding():
    h = figure2()
    buckets, inverse = tables(h)
    logp = torch.randn(1, 2, 4).log_softmax(-1)
    ref = exhaustive_topk(logp, buckets, k=16)
    excl = ref.ids[:, :3]
    r = beam_topk(logp, buckets, inverse, k=16, beam=4, exclude=torch.cat([excl, torch.tensor([[-1]])], 1))
    assert r.ids[0, :13].tolist() == ref.ids[0, 3:].tolist()
    assert r.ids[0, 13:].tolist() == [-1, -1, -1]  # fewer than k ids remain
    assert r.exact.all()  # every id scored


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=60, deadline=None)
@given(n=st.integers(5, 400), alpha=st.integers(2, 12), m=st.integers(2, 3), k=st.integers(1, 12),
       beam=st.integers(1, 8), seed=st.integers(0, 1000), score=st.sampled_from(["sum_log", "min", "max"]),
       peak=st.floats(0.1, 8.0), n_exclude=st.integers(0, 4))
def test_exact_equals_exhaustive(device, n, alpha, m, k, beam, seed, score, peak, n_exclude):
    n = max(n, 2 * alpha * alpha)  # enough buckets to separate every pair of ids
    h = BloomHash.build(n, HashConfig(alpha, m, seed))
    buckets, inverse = (t.to(device) for t in tables(h))
    g = torch.Generator().manual_seed(seed)
    logp = (torch.randn(3, m, h.n_buckets, generator=g) * peak).log_softmax(-1).to(device)
    exclude = torch.randint(0, n, (3, n_exclude), generator=g).to(device) if n_exclude else None
    k = min(k, n)
    ref = exhaustive_topk(logp, buckets, k, exclude, score)
    ex = beam_topk(logp, buckets, inverse, k, beam, exclude, score, exact=True)
    assert ex.exact.all()
    # same scores in the same order; ids equal wherever scores are not tied
    assert torch.allclose(ex.scores, ref.scores)
    approx = beam_pass(logp, buckets, inverse, k, beam, exclude, score)
    widened = beam_topk(logp, buckets, inverse, k, beam, exclude, score)  # approximate, k ids when there are
    left = [n - len(set(exclude[q].tolist())) if exclude is not None else n for q in range(3)]
    assert (widened.ids >= 0).sum(1).tolist() == [min(k, x) for x in left]
    every = exhaustive_topk(logp, buckets, n, exclude, score).scores  # every id's score, for ties
    for q in range(3):
        untied = [i for i in range(k) if (every[q] == ref.scores[q, i]).sum() == 1]
        assert ex.ids[q, untied].tolist() == ref.ids[q, untied].tolist()
        if approx.exact[q]:  # a certified approximate answer is the exact one
            assert torch.allclose(approx.scores[q], ref.scores[q])


def test_user_supplied_gamma():
    h = BloomHash.build(300, HashConfig(6, 2, 1))
    buckets, inverse = tables(h)
    logp = (torch.randn(4, 2, h.n_buckets) * 3).log_softmax(-1)

    def weighted(lp):  # increasing in every coordinate
        return 2.0 * lp[..., 0] + 0.5 * lp[..., 1]

    ref = exhaustive_topk(logp, buckets, 5, score=weighted)
    r = decode_topk(logp, buckets, inverse, 5, cfg=DecodeConfig(beam=1, exact=True, score=weighted))
    assert torch.allclose(r.scores, ref.scores) and r.exact.all()


def test_sufficient_beam_is_smallest():
    logp = torch.tensor([[[-0.1, -1.0, -2.0, -3.0], [-0.2, -0.5, -4.0, -5.0]]])
    # bounds for B' = 1..4: -0.3, -1.5, -6.0, -8.0
    assert sufficient_beam(logp, torch.tensor([-1.6])).tolist() == [3]
    assert sufficient_beam(logp, torch.tensor([-1.5])).tolist() == [2]
    assert sufficient_beam(logp, torch.tensor([float("-inf")])).tolist() == [4]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 3000), k=st.integers(1, 40), rows=st.integers(1, 3), levels=st.integers(1, 50),
       block=st.sampled_from([1, 2, 4, 7]), seed=st.integers(0, 1000))
def test_two_stage_topk_equals_torch_topk(n, k, rows, levels, block, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, levels, (rows, 2, n), generator=g).float()  # many ties
    x[0, 0, : n // 3] = float("-inf")
    vals, idx = topk_last(x, k, block)
    ref = x.topk(min(k, n), dim=-1).values
    assert torch.equal(vals, ref)
    assert torch.equal(x.gather(-1, idx), vals)  # indices point at the values
    assert all(len(set(r.tolist())) == r.numel() for r in idx.flatten(0, 1))  # no id twice


@settings(max_examples=40, deadline=None)
@given(nb=st.integers(1, 700), m=st.integers(1, 3), start=st.integers(1, 20), seed=st.integers(0, 1000),
       score=st.sampled_from(["sum_log", "min", "max"]))
def test_sufficient_beam_matches_full_sort(nb, m, start, seed, score):
    g = torch.Generator().manual_seed(seed)
    logp = (torch.randn(4, m, nb, generator=g) * 3).log_softmax(-1)
    srt = logp.sort(dim=2, descending=True).values
    bounds = score_fn(score)(srt.transpose(1, 2))  # (4, nb) bound after B' = 1..nb
    kth = bounds[torch.arange(4), torch.randint(0, nb, (4,), generator=g)] + torch.tensor([0, 1e-3, -1e-3, 0])
    ok = bounds <= kth[:, None]
    want = torch.where(ok.any(1), ok.float().argmax(1) + 1, torch.full((4,), nb))
    assert sufficient_beam(logp, kth, score, start).tolist() == want.tolist()


def test_exhaustive_is_the_same_in_chunks(monkeypatch):
    from superbloom.heads import ranking
    monkeypatch.setattr(ranking, "CHUNK_MIN_QUERIES", 1)  # chunks of chunk_elems scores only
    h = BloomHash.build(500, HashConfig(5, 2, 3))
    buckets, _ = tables(h)
    logp = (torch.randn(5, 2, h.n_buckets) * 2).log_softmax(-1)
    exclude = torch.tensor([[1, 2, -1], [-1, -1, -1], [7, 8, 9], [0, -1, 3], [499, 498, 497]])
    whole = exhaustive_topk(logp, buckets, 12, exclude)
    chunked = exhaustive_topk(logp, buckets, 12, exclude, chunk_elems=700)  # one query per chunk
    assert torch.equal(whole.ids, chunked.ids) and torch.equal(whole.scores, chunked.scores)
    assert not (set(whole.ids[0].tolist()) & {1, 2}) and not (set(whole.ids[4].tolist()) & {497, 498, 499})
