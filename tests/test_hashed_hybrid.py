"""The hashed hybrid head (heads/hashed_hybrid.py) and its bounded co-occurrence builder (neighbours.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import save_model

import superbloom as sb
from superbloom.evaluation.baselines import Cooccurrence
from superbloom.model.batches import MaskConfig
from superbloom.storage.checkpoint import load_weights
from superbloom.data.dataset import SetArray
from superbloom.heads.beam import DecodeConfig, decode_topk
from superbloom.hashing.bloom import BloomHash, HashConfig
from superbloom.heads import HEADS, head_config
from superbloom.heads.hashed_hybrid import MIXES, WEIGHTINGS, HashedHybridHead, mixed
from superbloom.heads.parts import TERM_ALONE, term_alone
from superbloom.storage.mapped import map_weights
from superbloom.model.encoder import ModelConfig, build_model
from superbloom.heads.neighbours import cooccurrence_neighbours
from superbloom.heads.local_ease import local_ease
from superbloom.inference.rank import rank_contexts
from superbloom.heads.ranking import NEG_INF, combine

from conftest import DEVICES, walking_sequences

N = 40
MODEL = ModelConfig(d=16, heads=2, d_ff=32, layers=1, dropout=0.0)


def sets_of(seed=0, n_sets=60, n=N):
    rng = np.random.default_rng(seed)
    return SetArray.from_lists([rng.choice(n, rng.integers(1, 9), replace=True) for _ in range(n_sets)])


def random_head(rng, alpha, m, neighbours=6, d=8, term="random"):
    """A head with random weights and a random term (values of both signs) over N ids; term
    "local-ease": the neighbourhood EASE term (heads/local_ease.py) of random sets instead."""
    h = BloomHash.build(N, HashConfig(alpha, m, int(rng.integers(1000))))
    emb = nn.Embedding(h.n_tokens, d)
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(rng.normal(0, 1.5, (h.n_tokens, d))).float())
    head = HashedHybridHead(emb, h, head_config("hashed-hybrid", neighbours=neighbours))
    with torch.no_grad():
        head.bias.copy_(torch.from_numpy(rng.normal(0, 1, h.n_tokens)).float())
    lens = rng.integers(0, neighbours + 1, N)
    cols = np.concatenate([np.sort(rng.choice(N, n, replace=False)) for n in lens]).astype(np.int32)
    head.indptr = torch.from_numpy(np.concatenate([[0], np.cumsum(lens)]).astype(np.int64))
    head.cols = torch.from_numpy(cols)
    head.values = torch.from_numpy(rng.normal(0, 2, len(cols))).float()
    if term == "local-ease":
        indptr, cols, values = local_ease(sets_of(int(rng.integers(1000))), N, k=int(rng.integers(2, 12)),
                                          lam=float(rng.choice([0.5, 5.0])), keep=neighbours)
        head.indptr = torch.from_numpy(indptr)
        head.cols = torch.from_numpy(cols.astype(np.int32))
        head.values = torch.from_numpy(values * 10)  # weights of both signs, on the network's scale
    return head


@torch.no_grad()
def exhaustive(head, hidden, context, exclude, mix, decay, score, term_alone=False):
    """Every id scored: gamma(network) + mix x term (or (term, network) for term alone), sorted by
    score, ties by id. -> (scores (Q, N) with -inf at excluded ids, order (Q, N), term (Q, N))."""
    logp = head.log_probs(hidden)
    net = combine(score, [logp[:, j].index_select(1, head.buckets[j].long()) for j in range(head.m)])  # (Q, N)
    dense = torch.zeros(N, N)
    for i in range(N):
        a, b = int(head.indptr[i]), int(head.indptr[i + 1])
        dense[i, head.cols[a:b]] = head.values[a:b]
    term = torch.zeros(len(context), N)
    for q, row in enumerate(context):
        real = [int(c) for c in row if c >= 0]
        for age, c in enumerate(reversed(real)):
            term[q] += (decay ** age if decay != 1.0 else 1.0) * dense[c]
    scores = net + mix * term
    if exclude is not None:
        for q, row in enumerate(exclude):
            scores[q, row[row >= 0]] = NEG_INF
            net[q, row[row >= 0]] = NEG_INF
            term[q, row[row >= 0]] = NEG_INF
    ids = torch.arange(N)
    if term_alone:
        order = [sorted(range(N), key=lambda j: (-float(term[q, j]), -float(net[q, j]), j)) for q in range(len(net))]
        return term, torch.tensor(order), term
    order = [sorted(range(N), key=lambda j: (-float(scores[q, j]), int(ids[j]))) for q in range(len(scores))]
    return scores, torch.tensor(order), term


def assert_is_top_k(r, scores, order, k, rows):
    """For each row: the ids are the top k of `scores` (near-ties may swap), with their scores."""
    for q in rows:
        ids, got = r.ids[q], r.scores[q]
        ref = scores[q, order[q, :k]]
        valid = ids >= 0
        assert int(valid.sum()) == int((ref > NEG_INF).sum())
        assert torch.allclose(got[valid], ref[valid], rtol=1e-5, atol=1e-5)
        assert torch.allclose(scores[q, ids[valid]], got[valid], rtol=1e-5, atol=1e-5)
        assert len(set(ids[valid].tolist())) == int(valid.sum())
        full = scores[q, order[q]]
        for i in range(int(valid.sum())):  # no near-tie around position i: the very id
            gaps = [abs(float(full[i] - full[j])) for j in (i - 1, i + 1) if 0 <= j < N and full[j] > NEG_INF]
            if all(g > 1e-4 for g in gaps):
                assert int(ids[i]) == int(order[q, i])


CASES = st.sampled_from([(1, 1), (2, 2), (3, 2), (4, 3), (2, 3)])


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), CASES, st.integers(1, 8), st.sampled_from([0.5, 1.0, 3.0, 30.0]),
       st.sampled_from([1.0, 0.5]), st.sampled_from(["sum_log", "min", "max"]), st.booleans(),
       st.sampled_from([None, 1, 2, 4]), st.booleans(), st.sampled_from(["random", "local-ease"]))
def test_the_merge_is_the_exhaustive_top_k(device, seed, hashing, k, mix, decay, score, exact, beam, exclude_more,
                                           term):
    rng = np.random.default_rng(seed)
    head = random_head(rng, *hashing, term=term).to(device)
    q = 5
    context = torch.from_numpy(rng.integers(-1, N, (q, 4))).long()
    context[0] = -1  # an empty context: nothing touched
    exclude = context.clone()
    if exclude_more:
        exclude = torch.cat([exclude, torch.from_numpy(rng.integers(-1, N, (q, 3)))], 1)
    hidden = torch.from_numpy(rng.normal(0, 1, (q, head.m, 8))).float()
    context, exclude, hidden = context.to(device), exclude.to(device), hidden.to(device)
    head.mix.fill_(mix), head.decay.fill_(decay)
    cfg = DecodeConfig(beam=beam, exact=exact, score=score)
    r = head.topk(hidden, k, exclude, cfg, context).cpu()
    # the variants: the network alone is the superbloom head's own ranking; the term alone, exactly ranked
    v = head.variants()
    assert set(v) == {"network alone", "term alone"}
    with v["network alone"]:
        pure = head.topk(hidden, k, exclude, cfg, context).cpu()
    plain = decode_topk(head.log_probs(hidden), head.buckets, head.inverse, k, exclude, cfg).cpu()
    with v["term alone"]:
        alone = head.topk(hidden, k, exclude, DecodeConfig(exact=True, score=score), context).cpu()
        alone_cfg = head.topk(hidden, k, exclude, cfg, context).cpu()
    with head.ranked_alongside() as extra:  # evaluate's one pass: the hybrid and both variants
        again = head.topk(hidden, k, exclude, cfg, context).cpu()
    assert list(extra) == ["network alone", "term alone"] and head._grid is None
    for got, want in ((again, r), (extra["network alone"], pure), (extra["term alone"], alone_cfg)):
        assert torch.equal(got.ids, want.ids) and torch.equal(got.scores, want.scores) and torch.equal(got.exact, want.exact)
    assert float(head.mix) == mix and not head._term_alone  # restored
    head, hidden, context, exclude = head.cpu(), hidden.cpu(), context.cpu(), exclude.cpu()  # references: CPU
    scores, order, _ = exhaustive(head, hidden, context, exclude, mix, decay, score)
    if exact:
        assert bool(r.exact.all())
    assert_is_top_k(r, scores, order, k, [i for i in range(q) if r.exact[i]])  # a certified answer is exact
    assert torch.equal(pure.ids, plain.ids) and torch.equal(pure.exact, plain.exact)
    term, order, _ = exhaustive(head, hidden, context, exclude, mix, decay, score, term_alone=True)
    assert bool(alone.exact.all())
    assert_is_top_k(alone, term, order, k, range(q))


def test_the_term_alone_beside_the_superbloom_ranking_at_mix_zero():
    head = random_head(np.random.default_rng(0), 4, 2)
    assert list(head.variants()) == ["term alone"]  # the head is its network; its term beside it
    h = BloomHash.build(N, HashConfig(4, 2, 0))
    unfitted = HashedHybridHead(nn.Embedding(h.n_tokens, 8), h, head_config("hashed-hybrid"))
    assert unfitted.variants() == {}  # no term built: nothing beside the network
    with head.ranked_alongside() as extra:
        pass
    assert extra == {}
    hidden, context = torch.randn(3, 2, 8), torch.tensor([[0, 5, -1], [1, 2, 3], [-1, -1, -1]])
    r = head.topk(hidden, 5, context, DecodeConfig(), context)
    plain = decode_topk(head.log_probs(hidden), head.buckets, head.inverse, 5, context, DecodeConfig())
    assert torch.equal(r.ids, plain.ids) and torch.equal(r.scores, plain.scores)
    with head.variants()["term alone"]:
        alone0 = head.topk(hidden, 5, context, DecodeConfig(), context)
    head.mix.fill_(2.0)
    with head.variants()["term alone"]:  # the term's ranking does not depend on the weight
        alone2 = head.topk(hidden, 5, context, DecodeConfig(), context)
    assert torch.equal(alone0.ids, alone2.ids) and torch.equal(alone0.scores, alone2.scores)
    assert not torch.equal(alone0.ids, r.ids)
    with pytest.raises(ValueError, match="pass context"):
        head.topk(hidden, 5)


def test_choose_ranks_every_candidate_in_one_pass_as_topk_would():
    head = random_head(np.random.default_rng(1), 3, 2)
    hidden, context = torch.randn(6, 2, 8), torch.randint(-1, N, (6, 5))
    calls, seen = [], []

    def rank():
        calls.append(1)
        return head.topk(hidden, 4, context, DecodeConfig(), context)

    def summarize(r):
        seen.append(r)
        return {"rec": float(r.scores[:, 0].sum())}

    out = head.choose(rank, summarize, "rec", decays=(1.0, 0.5)).record()
    # one pass: every candidate, and the term alone at each (decay, weighting) (here one weighting, 2 decays)
    assert len(calls) == 1 and len(seen) == 1 + 2 * (len(MIXES) - 1) + 2
    grid = [(0.0, 1.0)] + [(m, d) for d in (1.0, 0.5) for m in MIXES[1:]]
    for (mix, decay), r in zip(grid, seen):
        head.decay.fill_(decay)
        with mixed(head, mix):
            want = head.topk(hidden, 4, context, DecodeConfig(), context)
        assert torch.equal(r.ids, want.ids) and torch.equal(r.scores, want.scores)
    cands = grid + [(TERM_ALONE, 1.0), (TERM_ALONE, 0.5)]  # each setting's term alone: candidates too, last
    for (_, decay), r in zip(cands[len(grid):], seen[len(grid):]):
        head.decay.fill_(decay)
        with term_alone(head):
            want = head.topk(hidden, 4, context, DecodeConfig(), context)
        assert torch.equal(r.ids, want.ids) and torch.equal(r.scores, want.scores)
    best = max(range(len(cands)), key=lambda c: (seen[c].scores[:, 0].sum().item(), -c))
    assert out["item_mix"] == cands[best][0] == float(head.mix) and out["rec"] == summarize(seen[best])["rec"]
    assert "pure_rec" in out and head.describe()["name"] == "hashed-hybrid"
    head.decay.fill_(out["item_decay"])  # as choose left it (the loop above tried each decay)
    with term_alone(head):
        assert out["term_rec"] == summarize(head.topk(hidden, 4, context, DecodeConfig(), context))["rec"]
    # where the term alone scores best (here: the one at decay 0.5), it is chosen, and the head serves it
    head.decay.fill_(0.5)
    with term_alone(head):
        target = head.topk(hidden, 4, context, DecodeConfig(exact=True), context)
    head.decay.fill_(1.0)
    same = lambda r: {"rec": float(torch.equal(r.ids, target.ids) and torch.equal(r.scores, target.scores))}  # noqa: E731
    out = head.choose(rank, same, "rec", decays=(1.0, 0.5)).record()
    assert (out["item_mix"], out["item_decay"], out["rec"], out["term_rec"]) == (TERM_ALONE, 0.5, 1.0, 1.0)
    served = head.topk(hidden, 4, context, DecodeConfig(exact=True), context)
    assert torch.equal(served.ids, target.ids) and served.exact.all()


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 12), st.sampled_from([1, 7, 100, 1 << 22]))
def test_the_blocked_builder_is_the_hybrids_term_bit_for_bit(seed, k, budget):
    sets = sets_of(seed)  # repeated ids within a set and single-id sets included
    indptr, cols, values = cooccurrence_neighbours(sets, N, k, pair_budget=budget)
    counts = np.zeros((N, N), int)
    for i in range(len(sets)):
        u = np.unique(sets[i])
        counts[np.ix_(u, u)] += 1
    for i in range(N):
        partners = [j for j in range(N) if j != i and counts[i, j] > 0]
        want = sorted(sorted(partners, key=lambda j: (-counts[i, j], j))[:k])
        assert cols[indptr[i]:indptr[i + 1]].tolist() == want
    cos = Cooccurrence(sets, N).cos  # the hybrid's values: the sparse product in float32
    want = np.asarray(cos[np.repeat(np.arange(N), np.diff(indptr)), cols]).reshape(-1).astype(np.float32)
    assert values.dtype == np.float32 and np.array_equal(values.view(np.int32), want.view(np.int32))


def test_the_blocked_builder_gives_the_same_term_with_64_bit_keys(monkeypatch):
    """Blocks whose (row, id) keys pass 2^32 are sorted as int64 (a large vocabulary); forced here on
    a small one, the term is the one of the 32-bit keys, bit for bit."""
    import superbloom.heads.neighbours as nb

    sets = sets_of(3)
    want = cooccurrence_neighbours(sets, N, 5, pair_budget=100)
    monkeypatch.setattr(nb, "KEY32_MAX", 0)
    got = cooccurrence_neighbours(sets, N, 5, pair_budget=100)
    for w, g in zip(want, got):
        assert w.dtype == g.dtype and np.array_equal(w, g)


def make_model(alpha=4, m=2, seed=0, term="auto"):
    h = BloomHash.build(N, HashConfig(alpha, m, 0))
    torch.manual_seed(seed)
    return h, build_model(MODEL, head_config("hashed-hybrid", neighbours=5, term=term), h)


@pytest.mark.parametrize("loader", [load_weights, map_weights])
@pytest.mark.parametrize("term", ["ease", "cooccurrence", "transition"])
def test_the_saved_term_is_restored_into_a_fresh_model(loader, term, tmp_path):
    h, model = make_model(term=term)
    built = model.head.fit(sets_of())
    assert built["term"] == term and built["item_item_values"] == len(model.head.values) > 0
    model.head.mix.fill_(3.0)
    save_model(model, str(tmp_path / "model.safetensors"))
    _, fresh = make_model(seed=1, term=term)  # an empty term, as Predictor.load builds it
    assert len(fresh.head.values) == 0
    loader(fresh, tmp_path)
    for name in ("indptr", "cols", "values", "mix", "decay"):
        assert torch.equal(getattr(fresh.head, name), getattr(model.head, name))
    contexts = np.array([[0, 5, 17, -1], [3, -1, -1, -1]])
    a, b = rank_contexts(model, h, contexts, 5), rank_contexts(fresh, h, contexts, 5)
    assert torch.equal(a.ids, b.ids) and torch.equal(a.scores, b.scores)


def test_configuration_and_registration():
    assert HEADS["hashed-hybrid"][1] is HashedHybridHead
    with pytest.raises(ValueError, match="neighbours must be >= 1"):
        head_config("hashed-hybrid", neighbours=0)
    with pytest.raises(ValueError, match="term must be one of"):
        head_config("hashed-hybrid", term="svd")
    with pytest.raises(ValueError, match="label_smoothing"):
        head_config("hashed-hybrid", label_smoothing=1.0)
    _, model = make_model()
    assert model.head.term_name == "ease"  # auto: EASE where it fits


def test_trains_saves_and_predicts_end_to_end(wiki_data, tmp_path):
    out = tmp_path / "hashed-hybrid"
    cfg = sb.TrainConfig(data=str(wiki_data.path), out=str(out), hash=sb.HashConfig(alpha=4, m=2),
                         model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1),
                         head=head_config("hashed-hybrid", neighbours=20, term="cooccurrence"),
                         loop=sb.LoopConfig(steps=8, batch_size=32, eval_every=4, keep_best=False))
    sb.train(cfg, progress=False)
    saved = sb.load(out)
    config = json.loads((out / "config.json").read_text())
    built = config["head_built"]
    assert built["item_item_values"] == len(saved.model.head.values) > 0 and built["term"] == "cooccurrence"
    assert config["parameters"] == sum(p.numel() for p in saved.model.parameters()) + built["item_item_values"] + 1
    vals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if "val_item_mix" in line]
    assert vals and float(saved.model.head.mix) == vals[-1]["val_item_mix"] in MIXES  # chosen at validation
    assert all(v["val_rec@10"] >= v["val_pure_rec@10"] for v in vals)  # mix 0 (the superbloom head) is a candidate
    assert vals[-1]["val_item_weighting"] == WEIGHTINGS[int(saved.model.head.weighting)]  # chosen with the mix
    assert built["weightings"] == list(WEIGHTINGS) and len(saved.model.head.df) == saved.model.head.n_ids
    pred = saved.predict(["Copenhagen", "Aarhus"], k=5)
    assert len(pred.items) == 5
    exact = saved.predict(["Copenhagen", "Aarhus"], k=5, decode=DecodeConfig(exact=True))
    assert exact.exact  # the certificate, with decode exact
    if pred.exact:  # a certified approximate answer is the exact one
        assert [s for _, s in exact.items] == pytest.approx([s for _, s in pred.items])


def test_a_sequence_objective_trains_it_and_chooses_mix_and_decay(tmp_path):
    walking_sequences(tmp_path, 200)  # each user walks item i -> i + 1 (mod 20): order is everything
    cfg = sb.TrainConfig(data=str(tmp_path / "d"), out=str(tmp_path / "m"), hash=sb.HashConfig(alpha=2, m=2),
                         model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1, positions=12, causal=True),
                         mask=MaskConfig(n=12, p_mask=0.8, p_random=0.1, element_dropout=0.0),
                         head=head_config("hashed-hybrid", neighbours=4, term="transition"), objective="next-item",
                         loop=sb.LoopConfig(steps=30, batch_size=32, eval_every=15, checkpoint_every=1e9))
    out = sb.train(cfg, progress=False)
    val = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if "val_ndcg@10" in x]
    assert len(val) >= 2 and all(r["val_item_term"] == "transition" and "val_item_decay" in r for r in val)
    assert all(r["val_ndcg@10"] >= r["val_pure_ndcg@10"] for r in val)  # mix 0 is a candidate
    model = sb.load(out)
    best = max(val, key=lambda r: r["val_ndcg@10"])
    assert float(model.model.head.mix) == best["val_item_mix"]
    assert float(model.model.head.decay) == pytest.approx(best["val_item_decay"])
    assert len(model.predict(["i1", "i2", "i3"], 5).items) == 5
