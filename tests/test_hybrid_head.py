"""The hybrid head (heads/hybrid.py): full softmax + a sparse learned item-item term over the context
(itemitem.py), and its variants: the network alone, the term alone. The term's sparsity patterns
alone: test_itemitem_patterns.py."""
from __future__ import annotations

import json
from unittest import mock

import numpy as np
import pytest
import torch

import superbloom as sb
from superbloom.model.batches import MaskConfig, query_batch, training_batch
from superbloom.storage.checkpoint import load_weights
from superbloom.data.dataset import SetArray
from superbloom.hashing.bloom import BloomHash, HashConfig
from superbloom.heads import head_config
from superbloom.heads.hybrid import MIXES
from superbloom.heads import ranking
from superbloom.heads.ranking import Ranking
from superbloom.heads.parts import TERM_ALONE, term_alone
from superbloom.storage.mapped import map_weights
from superbloom.model.encoder import ModelConfig, build_model
from superbloom.inference.rank import rank_contexts
from safetensors.torch import load_file, save_file, save_model

N = 30
MODEL = ModelConfig(d=16, heads=2, d_ff=32, layers=1, dropout=0.0)


def sets_of(seed=0, n_sets=40):
    rng = np.random.default_rng(seed)
    return SetArray.from_lists([rng.choice(N, rng.integers(2, 8), replace=False) for _ in range(n_sets)])


def make(head="hybrid", seed=0, neighbours=5, build=True, term="auto", **settings):
    h = BloomHash.build(N, HashConfig(1, 1, 0))
    torch.manual_seed(seed)
    cfg = head_config(head, neighbours=neighbours, term=term, **settings) if head == "hybrid" else head_config(head)
    model = build_model(MODEL, cfg, h)
    if head == "hybrid" and build:
        model.head.fit(sets_of())
    return h, model


def test_item_item_term_equals_the_dense_matrix_product():
    h, model = make()
    head = model.head
    head.values.copy_(torch.randn(len(head.values)))
    dense = torch.zeros(N, N)
    for i in range(N):
        a, b = int(head.indptr[i]), int(head.indptr[i + 1])
        dense[i, head.cols[a:b]] = head.values[a:b]
    ctx = torch.tensor([[0, 5, 17, -1], [3, -1, -1, -1], [1, 2, 3, 4], [-1, -1, -1, -1], [7, 7, 2, 29]])
    want = torch.stack([dense[c[c >= 0]].sum(0) for c in ctx])
    assert torch.allclose(head.item_item(ctx), want, atol=1e-6)


def test_topk_is_the_exhaustive_ranking_of_the_hybrid_scores():
    h, model = make()
    model.head.values.copy_(torch.randn(len(model.head.values)) * 3)
    model.head.mix.fill_(2.0)
    model.eval()
    contexts = np.array([[0, 5, 17, -1], [3, -1, -1, -1], [1, 2, 3, 4]])
    r = rank_contexts(model, h, contexts, 6)
    qb = query_batch(contexts, h)
    with torch.no_grad():
        hidden = model.target_hidden(qb)
        head = model.head
        scores = (torch.log_softmax(head.logits(hidden), -1)
                  + 2.0 * head.item_item(qb.context(qb.target_elem)))
    for i, c in enumerate(contexts):
        s = scores[i].clone()
        s[c[c >= 0]] = -torch.inf
        assert r.ids[i].tolist() == torch.topk(s, 6).indices.tolist()
        assert bool(r.exact[i])


@pytest.mark.parametrize("loader", [load_weights, map_weights])
def test_the_saved_pattern_is_restored_into_a_fresh_model(loader, tmp_path):
    h, model = make()
    model.head.values.copy_(torch.randn(len(model.head.values)))
    model.head.mix.fill_(30.0)
    save_model(model, str(tmp_path / "model.safetensors"))
    _, fresh = make(seed=1, build=False)  # an empty pattern, as Predictor.load builds it
    assert len(fresh.head.values) == 0
    loader(fresh, tmp_path)
    for name in ("indptr", "cols", "values", "mix"):
        assert torch.equal(getattr(fresh.head, name), getattr(model.head, name))
    contexts = np.array([[0, 5, 17, -1], [3, -1, -1, -1]])
    a, b = rank_contexts(model, h, contexts, 5), rank_contexts(fresh, h, contexts, 5)
    assert torch.equal(a.ids, b.ids) and torch.allclose(a.scores, b.scores)


@pytest.mark.parametrize("loader", [load_weights, map_weights])
def test_a_model_with_two_terms_loads_and_one_saved_before_them_still_does(loader, tmp_path):
    h, model = make(build=False)
    model.head.fit(sets_of(), ordered=True)  # transition + EASE
    model.head.mix.fill_(10.0), model.head.alt.fill_(1)
    save_model(model, str(tmp_path / "model.safetensors"))
    _, fresh = make(seed=1, build=False)
    loader(fresh, tmp_path)
    for name in ("indptr", "cols", "values", "alt_indptr", "alt_cols", "alt_values", "alt", "mix"):
        assert torch.equal(getattr(fresh.head, name), getattr(model.head, name))
    assert fresh.head.term_names() == ("transition", "ease") and int(fresh.head.alt) == 1
    contexts = np.array([[0, 5, 17, -1], [3, -1, -1, -1]])
    a, b = rank_contexts(model, h, contexts, 5), rank_contexts(fresh, h, contexts, 5)
    assert torch.equal(a.ids, b.ids) and torch.allclose(a.scores, b.scores)
    # a file written before the second term existed (no alt_* tensors, no decay): one term, alt 0
    _, old = make(seed=2)
    save_model(old, str(tmp_path / "model.safetensors"))
    state = load_file(str(tmp_path / "model.safetensors"))
    save_file({k: v for k, v in state.items() if "alt" not in k and not k.endswith("head.decay")},
              str(tmp_path / "model.safetensors"))
    _, fresh = make(seed=3, build=False)
    loader(fresh, tmp_path)
    assert fresh.head.term_slots == 1 and int(fresh.head.alt) == 0 and float(fresh.head.decay) == 1.0
    assert torch.equal(fresh.head.values, old.head.values)


def test_configuration_errors_say_what_is_wrong():
    with pytest.raises(ValueError, match="identity hashing"):
        build_model(MODEL, head_config("hybrid"), BloomHash.build(N, HashConfig(4, 2, 0)))
    with pytest.raises(ValueError, match="neighbours must be >= 1"):
        head_config("hybrid", neighbours=0)
    with pytest.raises(ValueError, match="term must be one of"):
        head_config("hybrid", term="svd")
    with pytest.raises(ValueError, match="window must be >= 1"):
        head_config("hybrid", term="transition", window=0)
    with pytest.raises(ValueError, match=r"gap_decay must be in \(0, 1\]"):
        head_config("hybrid", term="transition", gap_decay=0.0)


def test_trains_saves_and_predicts_end_to_end(wiki_data, tmp_path):
    out = tmp_path / "hybrid"
    cfg = sb.TrainConfig(data=str(wiki_data.path), out=str(out), hash=sb.HashConfig(alpha=1, m=1),
                         model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1),
                         head=head_config("hybrid", neighbours=20),
                         loop=sb.LoopConfig(steps=8, batch_size=32, eval_every=4, keep_best=False))
    sb.train(cfg, progress=False)
    saved = sb.load(out)
    built = json.loads((out / "config.json").read_text())["head_built"]
    assert built["item_item_values"] == len(saved.model.head.values) > 0 and built["term"] == "ease"
    params = json.loads((out / "config.json").read_text())["parameters"]
    assert params == sum(p.numel() for p in saved.model.parameters()) + built["item_item_values"] + 1 == saved.n_parameters
    vals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if "val_item_mix" in line]
    assert vals and float(saved.model.head.mix) == vals[-1]["val_item_mix"] in MIXES + (TERM_ALONE,)  # chosen
    assert all(v["val_rec@10"] >= v["val_pure_rec@10"] for v in vals)  # mix 0 (the pure model) is a candidate
    pred = saved.predict(["Copenhagen", "Aarhus"], k=5)
    assert len(pred.items) == 5 and pred.exact


def walks(tmp_path, users=200, items=20, seed=0):
    """Each user walks item i -> i + 1 (mod `items`): a leave-one-out dataset where order is everything."""
    rng = np.random.default_rng(seed)
    lines = [f"u{u} " + " ".join(f"i{(s + j) % items}" for j in range(n))
             for u, s, n in zip(range(users), rng.integers(items, size=users), rng.integers(4, 10, size=users))]
    (tmp_path / "seq.txt").write_text("\n".join(lines) + "\n")
    sb.prepare(sb.PrepareConfig(str(tmp_path / "seq.txt"), str(tmp_path / "d"), read=sb.ReadConfig(format="lines"),
                                split="leave-one-out"), progress=False)
    return tmp_path / "d"


@pytest.mark.parametrize("objective,samples", [("next-item", 8), ("masked-sequence", 0)])
def test_sequence_objectives_train_it_and_choose_mix_and_decay(tmp_path, objective, samples):
    data = walks(tmp_path)
    cfg = sb.TrainConfig(data=str(data), out=str(tmp_path / "m"), hash=sb.HashConfig(alpha=1, m=1),
                         model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1, positions=12,
                                              causal=objective == "next-item"),
                         mask=MaskConfig(n=12, p_mask=0.8, p_random=0.1, element_dropout=0.0),
                         head=head_config("hybrid", neighbours=4, samples=samples), objective=objective,
                         loop=sb.LoopConfig(steps=60, batch_size=32, eval_every=30, checkpoint_every=1e9))
    out = sb.train(cfg, progress=False)
    val = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if "val_ndcg@10" in x]
    assert len(val) >= 2 and all("val_item_mix" in r and "val_item_decay" in r for r in val)
    # term auto on ordered data: the transition term and EASE both built, the validation chooses
    assert json.loads((out / "config.json").read_text())["head_built"]["term"] == "transition | ease"
    assert all(r["val_item_term"] in ("transition", "ease") for r in val)
    assert all(r["val_ndcg@10"] >= r["val_pure_ndcg@10"] for r in val)  # mix 0 is a candidate
    model = sb.load(out)
    best = max(val, key=lambda r: r["val_ndcg@10"])
    assert float(model.model.head.mix) == best["val_item_mix"]
    assert float(model.model.head.decay) == pytest.approx(best["val_item_decay"])
    assert model.model.head.term_names()[int(model.model.head.alt)] == best["val_item_term"]
    assert len(model.predict(["i1", "i2", "i3"], 5).items) == 5


def test_sampled_training_uses_the_sampled_loss_and_evaluation_the_full_one():
    h, model = make()
    torch.manual_seed(3)
    sampled = build_model(MODEL, head_config("hybrid", neighbours=5, samples=4), h)
    sampled.load_state_dict(model.state_dict())
    b = training_batch(sets_of(1), np.arange(8), h, MaskConfig(mask_rate=0.3), np.random.default_rng(0))
    model.eval(), sampled.eval()
    assert torch.allclose(sampled(b), model(b), atol=1e-6)  # evaluation: the full softmax
    model.train(), sampled.train()
    torch.manual_seed(0)
    assert not torch.allclose(sampled(b), model(b))  # training: 4 sampled negatives, not all 30 ids
    with pytest.raises(ValueError, match="samples"):
        head_config("hybrid", samples=-1)


@pytest.mark.parametrize("proposal", ["uniform", "unigram", "log_uniform"])
def test_the_sampled_negatives_come_from_the_configured_proposal(proposal):
    from superbloom.heads.sampled import proposal_probs
    h, _ = make()
    counts = np.arange(h.n_ids, 0, -1)
    head = build_model(MODEL, head_config("hybrid", neighbours=5, samples=4, proposal=proposal), h, counts).head
    assert head.proposal.kind == proposal
    assert np.allclose(head.proposal.q.numpy(), proposal_probs(proposal, h.n_ids, counts))

@pytest.mark.parametrize("term", ["ease", "cooccurrence"])
def test_the_item_item_values_are_the_closed_forms_on_the_pattern(term):
    from superbloom.evaluation.baselines import Cooccurrence, Ease  # the baselines: the same closed forms (itemitem.py)
    _, model = make(neighbours=4, term=term)
    head, sets = model.head, sets_of()
    dense = Ease(sets, N).b if term == "ease" else Cooccurrence(sets, N).cos.toarray()
    for i in range(N):
        a, e = int(head.indptr[i]), int(head.indptr[i + 1])
        cols = head.cols[a:e].numpy()
        assert np.allclose(head.values[a:e].numpy(), dense[i, cols], atol=1e-6) and i not in cols
        if term == "ease":  # the 4 largest |B| of the row (the rest no larger)
            assert e - a == 4 and np.abs(np.delete(dense[i], np.r_[cols, i])).max() <= np.abs(dense[i, cols]).min()
    assert float(head.mix) == 0.0  # the pure model until a validation chooses


def test_training_never_touches_the_item_item_term_and_the_loss_is_the_full_heads():
    h, hybrid = make(seed=3)
    _, full = make("full", seed=3)
    assert not any(p is hybrid.head.values for p in hybrid.parameters())
    rng = np.random.default_rng(0)
    b = training_batch(sets_of(1), np.arange(8), h, MaskConfig(mask_rate=0.3), rng)
    hybrid.eval(), full.eval()
    assert torch.allclose(hybrid(b), full(b), atol=1e-6)


def _validation(head, seed=0, q=37):
    """A made-up validation: random hidden states, ordered contexts and targets -> (rank, metrics)."""
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(q, 1, MODEL.d, generator=g)
    ids = torch.randint(0, N, (q, 6), generator=g)
    ids[torch.rand(q, 6, generator=g) < 0.3] = -1
    targets = torch.randint(0, N, (q,), generator=g).numpy()
    calls = []

    def rank():
        calls.append(1)
        with mock.patch.object(ranking, "CHUNK_MIN_QUERIES", 1):  # chunks of chunk_elems scores only
            return head.topk(hidden, 10, exclude=ids, context=ids, chunk_elems=5 * N)  # 8 chunks

    def metrics(ranking):
        from superbloom.evaluation.metrics import summarize, target_ranks
        return summarize(target_ranks(ranking.ids.numpy(), targets))
    return rank, metrics, calls


@pytest.mark.parametrize("ordered", [False, True])
def test_choose_mix_ranks_every_candidate_in_one_pass_as_one_at_a_time(ordered):
    _, model = make(seed=1, build=False)
    head = model.head
    head.fit(sets_of(), ordered=ordered)  # ordered (term auto): transition and EASE, both candidates
    assert head.term_names() == (("transition", "ease") if ordered else ("ease",))
    head.values.copy_(torch.randn(len(head.values)).abs())
    rank, metrics, calls = _validation(head)
    decays = (1.0, 0.7, 0.4)
    grid = [(0.0, 1.0, 0)] + [(m, d, t) for t in range(head.term_slots) for d in decays for m in MIXES[1:]]
    brute = []
    for mix, decay, slot in grid:  # one candidate at a time, its weights set
        head.mix.fill_(mix), head.decay.fill_(decay), head.alt.fill_(slot)
        brute.append(metrics(rank()))
    settings = list(dict.fromkeys((d, t) for _, d, t in grid[1:]))
    for decay, slot in settings:  # each setting's term alone (mix TERM_ALONE): candidates after the hybrids
        head.decay.fill_(decay), head.alt.fill_(slot)
        with term_alone(head):
            brute.append(metrics(rank()))
    cands = grid + [(TERM_ALONE, d, t) for d, t in settings]
    head.mix.fill_(0.0), head.decay.fill_(1.0), head.alt.fill_(0)
    calls.clear()
    v = head.choose(rank, metrics, "rec@10", decays).record()
    assert len(calls) == 1  # one ranking pass for all 22 (ordered: 43) mixes and each setting's term alone
    best = max(range(len(cands)), key=lambda c: (brute[c]["rec@10"], -c))  # ties: the earlier
    mix, decay, slot = cands[best] if best else (0.0, 1.0, 0)
    assert (v["item_mix"], v["item_decay"]) == (mix, decay) and float(head.mix) == mix
    assert v["item_term"] == head.term_names()[slot] and int(head.alt) == slot
    assert v["rec@10"] == brute[best]["rec@10"] and v["pure_rec@10"] == brute[0]["rec@10"]
    assert v["term_rec@10"] == brute[len(grid) + settings.index((decay, slot))]["rec@10"]  # the chosen setting's
    assert v["rec@10"] >= max(b["rec@10"] for b in brute[len(grid):])  # never below any term alone
    assert head._grid is None and head._parts is None  # nothing left behind
    with term_alone(head):  # the chosen term and decay, no network
        assert v["term_rec@10"] == metrics(rank())["rec@10"]
    calls.clear()  # the next validation of the same queries: the terms alone, which no training moves, are not ranked again
    assert head.choose(rank, metrics, "rec@10", decays).parts["term"]["rec@10"] == v["term_rec@10"] and len(calls) == 1


def test_choose_mix_prefers_the_pure_model_and_smaller_mixes_on_ties():
    _, model = make()
    head = model.head
    rank, _, _ = _validation(head)
    v = head.choose(rank, lambda ranking: {"rec@10": 0.5}, "rec@10", (1.0, 0.5)).record()
    assert v == {"rec@10": 0.5, "item_mix": 0.0, "item_decay": 1.0, "item_term": "ease", "pure_rec@10": 0.5,
                 "term_rec@10": 0.5}
    assert float(head.mix) == 0.0


@pytest.mark.parametrize("fixed", [0.0, 30.0])
def test_a_fixed_mix_is_kept_and_only_the_decay_is_chosen(fixed):
    """HybridConfig.mix: the validation scores the fixed weight only (mix 0: the network alone, so BEST
    is the network's checkpoint), while a chosen mix would have taken another candidate here."""
    _, model = make(mix=fixed)
    head = model.head
    head.values.copy_(torch.randn(len(head.values)).abs())
    rank, metrics, _ = _validation(head)
    decays = (1.0, 0.5)
    grid = [(0.0, 1.0)] + [(m, d) for d in decays for m in MIXES[1:]]
    brute = []
    for mix, decay in grid:
        head.mix.fill_(mix), head.decay.fill_(decay)
        brute.append(metrics(rank())["rec@10"])
    head.mix.fill_(0.0), head.decay.fill_(1.0)
    v = head.choose(rank, metrics, "rec@10", decays).record()
    allowed = [c for c, (m, _) in enumerate(grid) if m == fixed]
    best = max(allowed, key=lambda c: (brute[c], -c))
    assert v["item_mix"] == fixed and float(head.mix) == fixed and v["item_decay"] == grid[best][1]
    assert v["rec@10"] == brute[best] and v["pure_rec@10"] == brute[0]
    free = max(range(len(grid)), key=lambda c: (brute[c], -c))
    assert grid[free][0] != fixed  # a chosen mix would have been another weight here (else nothing is tested)


def test_a_fixed_mix_must_be_a_finite_weight_and_mix_0_reports_its_term_alone():
    with pytest.raises(ValueError, match="mix must be a finite weight >= 0"):
        head_config("hybrid", mix=-1.0)
    assert head_config("hybrid", mix=0.0).mix == 0.0 and head_config("hybrid").mix is None
    fixed, chosen = make(mix=0.0)[1].head, make()[1].head
    assert list(fixed.variants()) == ["term alone"]  # the network alone, its term beside it
    assert fixed.describe() == {"name": "hybrid", "item_mix": 0.0, "item_decay": 1.0, "item_term": "ease"}
    # chosen 0: the head is its network alone, its term reported beside it as at a fixed 0
    assert list(chosen.variants()) == ["term alone"]
    assert chosen.describe() == {"name": "hybrid", "item_mix": 0.0, "item_decay": 1.0, "item_term": "ease"}
    unfitted = make(build=False)[1].head  # no term built: nothing beside the network
    assert unfitted.variants() == {} and unfitted.describe() == {"name": "hybrid"}


def test_recency_weights_count_the_newest_id_most():
    _, model = make()
    head = model.head
    head.values.copy_(torch.randn(len(head.values)))
    ctx = torch.tensor([[-1, 3, 5, 7, -1], [2, -1, -1, -1, -1], [-1, -1, -1, -1, -1]])
    assert head.age_weights(ctx) is None  # decay 1: every id alike
    head.decay.fill_(0.5)
    w = head.age_weights(ctx)
    assert torch.allclose(w[0, 1:4], torch.tensor([0.25, 0.5, 1.0])) and float(w[1, 0]) == 1.0
    want = torch.stack([sum((float(w[r, i]) * head.item_item(ctx[r:r + 1, i:i + 1])[0]
                             for i in range(5) if ctx[r, i] >= 0), torch.zeros(N)) for r in range(3)])
    assert torch.allclose(head.item_item(ctx, w), want, atol=1e-6)


def test_eval_reports_the_hybrid_beside_its_network_alone(wiki_data, tmp_path):
    from superbloom.evaluation.evaluate import EvalConfig, evaluate
    out = tmp_path / "hybrid"
    cfg = sb.TrainConfig(data=str(wiki_data.path), out=str(out), hash=sb.HashConfig(alpha=1, m=1),
                         model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1),
                         head=head_config("hybrid", neighbours=20, term="cooccurrence"),
                         loop=sb.LoopConfig(steps=4, batch_size=32, eval_every=0))
    sb.train(cfg, progress=False)
    pred = sb.load(out)
    pred.model.head.mix.fill_(10.0)  # as if a validation had chosen it
    res = evaluate(pred, wiki_data, EvalConfig(max_sets=40, baselines=()), progress=False)
    assert res.head == {"name": "hybrid", "item_mix": 10.0, "item_decay": 1.0, "item_term": "cooccurrence"}
    assert float(pred.model.head.mix) == 10.0
    ranks = res.ranks
    assert not np.array_equal(ranks["model"], ranks["network_only"])  # the term changes the ranking
    report = res.report()
    assert " x 10, decay 1)" in report and "network only" in report  # the head's label: its term and weight
    pred.model.head.mix.fill_(0.0)
    again = evaluate(pred, wiki_data, EvalConfig(max_sets=40, baselines=()), progress=False)
    assert np.array_equal(again.ranks["model"], ranks["network_only"]) and "network_only" not in again.to_dict()


def test_the_transition_term_scores_what_comes_next(tmp_path):
    """On walks i -> i + 1 the directed term alone ranks the next item first; the model trains with it."""
    data = walks(tmp_path)
    cfg = sb.TrainConfig(data=str(data), out=str(tmp_path / "m"), hash=sb.HashConfig(alpha=1, m=1),
                         model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1, positions=12, causal=True),
                         mask=MaskConfig(n=12, p_mask=0.8, p_random=0.1, element_dropout=0.0),
                         head=head_config("hybrid", neighbours=4, term="transition", window=3), objective="next-item",
                         loop=sb.LoopConfig(steps=30, batch_size=32, eval_every=30, checkpoint_every=1e9))
    out = sb.train(cfg, progress=False)
    built = json.loads((out / "config.json").read_text())["head_built"]
    assert built["term"] == "transition" and built["item_item_values"] == 20 * 3  # 3 successors of each item
    head = sb.load(out).model.head
    ids = {s: i for i, s in enumerate(sb.load(out).vocab.strings)}
    ctx = torch.tensor([[ids["i4"], ids["i5"]]])
    scores = head.item_item(ctx)[0]
    assert int(scores.argmax()) == ids["i6"]  # after i5 comes i6 (and i6 also follows i4 at gap 2)
    assert float(scores[ids["i3"]]) == 0.0  # nothing before the context is scored: directed


def _queries(seed=0, q=9, t=5):
    """Random hidden states and contexts (q, t) of ids, -1 padded, for ranking by hand."""
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(q, 1, MODEL.d, generator=g)
    ctx = torch.randint(0, N, (q, t), generator=g)
    ctx[torch.rand(q, t, generator=g) < 0.3] = -1
    ctx[0] = -1  # an empty context: the term scores every id 0
    return hidden, ctx


def test_the_network_alone_variant_is_the_hybrid_at_mix_0():
    _, model = make()
    head = model.head.eval()
    head.values.copy_(torch.randn(len(head.values)) * 3)
    head.mix.fill_(10.0), head.decay.fill_(0.7)
    hidden, ctx = _queries()
    with head.variants()["network alone"]:
        alone = head.topk(hidden, 8, exclude=ctx, context=ctx)
    assert float(head.mix) == 10.0 and float(head.decay) == pytest.approx(0.7)
    mixed = head.topk(hidden, 8, exclude=ctx, context=ctx)
    head.mix.fill_(0.0)
    pure = head.topk(hidden, 8, exclude=ctx, context=ctx)
    assert torch.equal(alone.ids, pure.ids) and torch.equal(alone.scores, pure.scores)
    assert not torch.equal(alone.ids, mixed.ids)  # the term changes the ranking at mix 10
    assert list(head.variants()) == ["term alone"]  # mix 0: the head is its network; its term beside it


def test_the_network_alone_ranked_alongside_is_its_own_pass():
    """ranked_alongside (evaluate: one network pass for the hybrid and its network alone) gives the
    hybrid's own ranking and the network alone's, each equal to its separate pass; mix 0 or the term
    alone: nothing alongside (the variant's own pass ranks it)."""
    _, model = make()
    head = model.head.eval()
    head.values.copy_(torch.randn(len(head.values)) * 3)
    head.mix.fill_(10.0), head.decay.fill_(0.7)
    hidden, ctx = _queries()
    hybrid = head.topk(hidden, 8, exclude=ctx, context=ctx)
    with head.variants()["network alone"]:
        alone = head.topk(hidden, 8, exclude=ctx, context=ctx)
    with head.ranked_alongside() as extra:
        first = head.topk(hidden[:4], 8, exclude=ctx[:4], context=ctx[:4])  # two batches, in query order
        second = head.topk(hidden[4:], 8, exclude=ctx[4:], context=ctx[4:])
    assert list(extra) == ["network alone"] and head._grid is None
    both = Ranking.concat([first, second])
    assert torch.equal(both.ids, hybrid.ids) and torch.equal(both.scores, hybrid.scores)
    assert torch.equal(extra["network alone"].ids, alone.ids) and torch.equal(extra["network alone"].scores, alone.scores)
    with head.variants()["term alone"], head.ranked_alongside() as extra:
        head.topk(hidden, 8, exclude=ctx, context=ctx)
    assert extra == {}
    head.mix.fill_(0.0)
    with head.ranked_alongside() as extra:
        head.topk(hidden, 8, exclude=ctx, context=ctx)
    assert extra == {}


def test_the_term_alone_variant_ranks_by_the_chosen_term_only():
    """The term alone is the hybrid at a mix so large that the network only breaks ties: the same
    order over the ids the term scores (distinct sums); the ids it does not reach (all 0) follow in
    id order; context and excluded ids never. The chosen term (slot 1 here) and decay are used."""
    _, model = make(build=False)
    head = model.head.eval()
    head.fit(sets_of(), ordered=True)  # two terms: transition (slot 0) and EASE (slot 1)
    g = torch.Generator().manual_seed(1)
    head.values.copy_(torch.rand(len(head.values), generator=g) + 0.1)
    head.alt_values.copy_(torch.rand(len(head.alt_values), generator=g) + 0.1)  # no negative weights
    head.mix.fill_(3.0), head.decay.fill_(0.5), head.alt.fill_(1)
    hidden, ctx = _queries()
    exclude = torch.cat([ctx, torch.tensor([[4]] * len(ctx))], 1)  # and id 4 for every query
    with head.variants()["term alone"]:
        alone = head.topk(hidden, N, exclude=exclude, context=ctx)
        only4 = head.topk(hidden, N, exclude=exclude[:, -1:], context=ctx)  # the context: never, excluded or not
    assert torch.equal(only4.ids, alone.ids) and torch.equal(only4.scores, alone.scores)
    assert float(head.mix) == 3.0 and float(head.decay) == 0.5 and int(head.alt) == 1
    term = head.item_item(ctx, head.age_weights(ctx), slot=1)  # (q, N) the chosen term, decay 0.5
    head.mix.fill_(1e5)
    big = head.topk(hidden, N, exclude=exclude, context=ctx)
    assert alone.exact.all()
    for q in range(len(ctx)):
        never = set(exclude[q].tolist()) - {-1}
        ids = [j for j in alone.ids[q].tolist() if j >= 0]
        assert ids and not never & set(ids) and len(ids) == N - len(never)
        reached = [j for j in range(N) if term[q, j] > 0 and j not in never]
        by_term = sorted(reached, key=lambda j: -float(term[q, j]))
        assert len(set(term[q, reached].tolist())) == len(reached)  # distinct sums: one order
        assert ids[:len(reached)] == by_term == big.ids[q, :len(reached)].tolist()
        assert ids[len(reached):] == sorted(j for j in range(N) if j not in never and j not in reached)  # ties: by id
        assert torch.equal(alone.scores[q, :len(ids)], term[q, ids])  # the term's own sums, no network
    assert (alone.ids[0, :N - 1] == torch.tensor([j for j in range(N) if j != 4])).all()  # empty context: by id


def test_the_variants_restore_the_head_even_when_the_block_raises():
    _, model = make()
    head = model.head.eval()
    head.values.copy_(torch.randn(len(head.values)))
    head.mix.fill_(30.0), head.decay.fill_(0.4)
    hidden, ctx = _queries(2)
    before = head.topk(hidden, 6, exclude=ctx, context=ctx)
    assert list(head.variants()) == ["network alone", "term alone"]
    for name in head.variants():
        with pytest.raises(RuntimeError, match="inside"):
            with head.variants()[name]:
                assert not torch.equal(head.topk(hidden, 6, exclude=ctx, context=ctx).scores, before.scores)
                raise RuntimeError("inside the variant")
        assert float(head.mix) == 30.0 and float(head.decay) == pytest.approx(0.4)
        after = head.topk(hidden, 6, exclude=ctx, context=ctx)
        assert torch.equal(after.ids, before.ids) and torch.equal(after.scores, before.scores)
