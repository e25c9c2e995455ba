"""The hashed hybrid's co-occurrence weightings (heads/hashed_hybrid.py WEIGHTINGS: cosine, count, idf
over the same neighbour lists, chosen on validation): the values, the exact merge, choose, save/load."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import save_model

from superbloom.heads import head_config
from superbloom.heads.beam import DecodeConfig
from superbloom.heads.hashed_hybrid import MIXES, WEIGHTINGS
from superbloom.inference.rank import rank_contexts
from superbloom.storage.checkpoint import load_weights

from conftest import DEVICES
from test_hashed_hybrid import CASES, N, assert_is_top_k, exhaustive, make_model, random_head, sets_of


def brute_counts(sets) -> np.ndarray:
    counts = np.zeros((N, N))
    for i in range(len(sets)):
        u = np.unique(sets[i])
        counts[np.ix_(u, u)] += 1
    return counts


def weighted_copy(head, w: int):
    """A copy of `head` whose stored values are weighting w's (cosine x row x col / scale), ranked as cosine."""
    twin = copy.deepcopy(head)
    f = head._factors(w)
    rows = torch.repeat_interleave(torch.arange(N), torch.diff(head.indptr))
    twin.values = head.values if f is None else head.values * f[0][rows] * f[1][head.cols.long()]
    twin.df, twin._factor_cache = torch.zeros(0), {}
    twin.weighting.fill_(0)
    return twin


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_weightings_are_count_and_idf_over_the_neighbour_lists(seed):
    sets = sets_of(seed)
    _, model = make_model(term="cooccurrence")
    built = model.head.fit(sets)
    head = model.head
    assert built["weightings"] == list(WEIGHTINGS) and int(head.weighting) == 0
    counts = brute_counts(sets)
    df, s = np.diag(counts), len(sets)
    assert np.array_equal(head.df.numpy(), df.astype(np.float32)) and float(head.n_sets) == s
    rows = np.repeat(np.arange(N), np.diff(head.indptr.numpy()))
    cols = head.cols.numpy()
    count = counts[rows, cols]
    want = {"cosine": head.values.numpy().astype(np.float64), "count": count,
            "idf": count * np.log(s / np.maximum(df, 1))[cols]}
    for i, w in enumerate(WEIGHTINGS):
        got = weighted_copy(head, i).values.numpy() * float(head.scales[i])
        assert np.allclose(got, want[w], rtol=1e-5, atol=1e-6), w
        assert float(head.scales[i]) == pytest.approx(want[w].mean() / want["cosine"].mean(), rel=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), CASES, st.integers(1, 8), st.sampled_from([1.0, 30.0]), st.sampled_from([1, 2]),
       st.sampled_from([1.0, 0.5]), st.booleans())
def test_the_merge_is_exact_under_every_weighting(device, seed, hashing, k, mix, w, decay, exact):
    rng = np.random.default_rng(seed)
    head = random_head(rng, *hashing)
    head.df = torch.from_numpy(rng.integers(0, 20, N)).float()
    head.n_sets.fill_(25.0)
    head.scales.copy_(torch.tensor([1.0, float(rng.uniform(1, 50)), float(rng.uniform(1, 50))]))
    head.weighting.fill_(w)
    head.mix.fill_(mix), head.decay.fill_(decay)
    q = 5
    context = torch.from_numpy(rng.integers(-1, N, (q, 4))).long()
    hidden = torch.from_numpy(rng.normal(0, 1, (q, head.m, 8))).float()
    cfg = DecodeConfig(exact=exact)
    r = head.to(device).topk(hidden.to(device), k, context.to(device), cfg, context.to(device)).cpu()
    head = head.cpu()
    twin = weighted_copy(head, w)
    t = twin.topk(hidden, k, context, cfg, context)
    if device == "cpu":  # the weighting is the twin's values, bit for bit (CUDA: other rounding, checked below)
        assert torch.equal(r.ids, t.ids) and torch.equal(r.scores, t.scores)
    scores, order, _ = exhaustive(twin, hidden, context, context, mix, decay, "sum_log")
    assert_is_top_k(r, scores, order, k, [i for i in range(q) if r.exact[i]])
    with head.variants()["term alone"]:
        alone = head.topk(hidden, k, context, DecodeConfig(exact=True), context)
    term, order, _ = exhaustive(twin, hidden, context, context, mix, decay, "sum_log", term_alone=True)
    assert_is_top_k(alone, term, order, k, range(q))


def test_choose_tries_every_weighting_and_the_choice_is_saved(tmp_path):
    h, model = make_model(term="cooccurrence")
    model.head.fit(sets_of(3))
    head = model.head
    contexts = np.array([[0, 5, 17, -1], [3, -1, -1, -1], [7, 8, 9, 10]])
    seen = []

    def rank():
        return rank_contexts(model, h, contexts, 4)

    def summarize(r):
        seen.append(r)
        return {"rec": float(len(seen) == 1 + 2 * (len(MIXES) - 1) + 3)}  # one candidate of idf wins

    out = head.choose(rank, summarize, "rec").record()
    assert len(seen) == 1 + len(WEIGHTINGS) * (len(MIXES) - 1) + len(WEIGHTINGS)  # + each weighting's term alone
    assert out["item_weighting"] == "idf" == WEIGHTINGS[int(head.weighting)] and out["item_mix"] == MIXES[3]
    assert head.describe()["item_weighting"] == "idf"
    save_model(model, str(tmp_path / "model.safetensors"))
    _, fresh = make_model(seed=1, term="cooccurrence")
    load_weights(fresh, tmp_path)
    for name in ("df", "n_sets", "scales", "weighting", "mix"):
        assert torch.equal(getattr(fresh.head, name), getattr(head, name)), name
    a, b = rank_contexts(model, h, contexts, 5), rank_contexts(fresh, h, contexts, 5)
    assert torch.equal(a.ids, b.ids) and torch.equal(a.scores, b.scores)


def test_a_model_saved_before_the_weightings_loads_as_the_cosine(tmp_path):
    h, model = make_model(term="cooccurrence")
    model.head.fit(sets_of(4))
    model.head.mix.fill_(3.0)
    state = {k: v for k, v in model.state_dict().items()
             if k.rsplit(".", 1)[-1] not in ("df", "n_sets", "scales", "weighting")}
    _, fresh = make_model(seed=1, term="cooccurrence")
    fresh.load_state_dict(state)
    assert len(fresh.head.df) == 0 and int(fresh.head.weighting) == 0 and fresh.head._weightings() == (0,)
    contexts = np.array([[0, 5, 17, -1], [3, -1, -1, -1]])
    a, b = rank_contexts(model, h, contexts, 5), rank_contexts(fresh, h, contexts, 5)
    assert torch.equal(a.ids, b.ids) and torch.equal(a.scores, b.scores)  # weighting 0 is the cosine


def test_weighting_settings_are_checked():
    with pytest.raises(ValueError, match="weighting must be one of"):
        head_config("hashed-hybrid", weighting="bm25")
    with pytest.raises(ValueError, match="weighs the co-occurrence term"):
        head_config("hashed-hybrid", term="ease", weighting="idf")
    _, model = make_model(term="cooccurrence")
    model.head.cfg = head_config("hashed-hybrid", neighbours=5, term="cooccurrence", weighting="count")
    model.head.fit(sets_of(5))
    assert model.head._weightings() == (1,) and int(model.head.weighting) == 1
    _, ease = make_model(term="ease")
    assert "weightings" not in ease.head.fit(sets_of(5)) and ease.head._weightings() == (0,)
