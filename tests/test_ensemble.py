"""sb.Ensemble (inference/ensemble.py): several models of the same ids ranked as one, the mean of their
networks' log p + mix x a hybrid member's item-item term."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import superbloom as sb
from superbloom.heads import head_config
from superbloom.heads.parts import mixed

HASH = sb.HashConfig(alpha=1, m=1)


def train(data, out, head, seed=0, steps=8):
    sb.train(sb.TrainConfig(data=str(data.path), out=str(out), hash=HASH, head=head,
                            model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1),
                            loop=sb.LoopConfig(steps=steps, batch_size=32, eval_every=4, seed=seed)), progress=False)
    return out


@pytest.fixture(scope="module")
def members(wiki_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("ensemble")
    return {"full0": train(wiki_data, root / "f0", head_config("full")),
            "full1": train(wiki_data, root / "f1", head_config("full"), seed=1),
            "hybrid": train(wiki_data, root / "h", head_config("hybrid", neighbours=20, term="cooccurrence"))}


@pytest.fixture(scope="module")
def contexts(wiki_data):
    sets = wiki_data.test
    rows = [np.asarray(sets[i])[:6] for i in range(40)]
    out = np.full((len(rows), 6), -1, np.int64)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def test_one_model_twice_ranks_as_that_model(members, contexts):
    one = sb.load(members["full0"], mmap=False)
    ens = sb.Ensemble.load([members["full0"], members["full0"]], mmap=False)
    a, b = one.rank(contexts, 10), ens.rank(contexts, 10)
    assert torch.equal(a.ids, b.ids) and torch.allclose(a.scores, b.scores, atol=1e-5)
    assert bool(b.exact.all()) and ens.mix == 0 and ens.info()["members"] == 2


def test_a_hybrid_member_at_its_own_mix_ranks_as_the_hybrid(members, contexts):
    """One hybrid member: the ensemble's default weight is the hybrid's validated one, and the ranking is
    the hybrid's; mix 0 is its network alone."""
    hyb = sb.load(members["hybrid"], mmap=False)
    head = hyb.model.head
    with mixed(head, 3.0):  # a weight the validation may not have picked: set it on both
        want = hyb.rank(contexts, 10)
        ens = sb.Ensemble([hyb], mix=3.0)
        got = ens.rank(contexts, 10)
    assert torch.equal(want.ids, got.ids)
    with mixed(head, 0.0):
        want0 = hyb.rank(contexts, 10)
    assert torch.equal(want0.ids, ens.rank(contexts, 10, mix=0.0).ids)
    assert sb.Ensemble([hyb]).mix == float(head.describe().get("item_mix", 0.0))


def test_the_mean_of_two_networks_plus_the_term(members, contexts):
    ens = sb.Ensemble.load([members["full0"], members["full1"], members["hybrid"]], mix=10.0, mmap=False)
    nets = [sb.load(members[k], mmap=False) for k in ("full0", "full1", "hybrid")]
    from superbloom.model.sequence_batches import ordered_query_batch

    logps = []
    for p in nets:
        qb = ordered_query_batch(contexts, p.hashing, p.model.encoder.cfg)
        logps.append(p.model.head.network_scores(p.model.target_hidden(qb)))
    want = torch.stack(logps).mean(0) + 10.0 * nets[2].model.head.term_scores(torch.from_numpy(contexts))
    assert torch.allclose(ens.scores(contexts), want, atol=1e-5)
    r = ens.rank(contexts, 5)
    ctx = torch.from_numpy(contexts)
    assert not bool(((r.ids[:, :, None] == ctx[:, None, :]) & (ctx[:, None, :] >= 0)).any())  # context excluded
    top = want.clone()
    top[torch.arange(len(ctx))[:, None].expand_as(ctx)[ctx >= 0], ctx[ctx >= 0]] = -torch.inf
    assert torch.equal(r.ids, torch.topk(top, 5).indices)


def test_allow_deny_and_predict(members, contexts):
    ens = sb.Ensemble.load([members["full0"], members["hybrid"]], mix=3.0, mmap=False)
    allow = np.arange(50, 80)
    r = ens.rank(contexts, 5, allow=allow)
    assert bool(((r.ids >= 50) & (r.ids < 80)).all())
    ids = [ens.vocab.strings[int(i)] for i in contexts[0] if i >= 0]
    pred = ens.predict(ids, k=5)
    assert len(pred.items) == 5 and pred.exact and not {i for i, _ in pred.items} & set(ids)
    denied = ens.predict(ids, k=5, deny=[pred.items[0][0]])
    assert [i for i, _ in denied.items][:4] == [i for i, _ in pred.items][1:]


def test_choose_mix_picks_the_best_weight_on_held_out_examples(members, contexts):
    ens = sb.Ensemble.load([members["full0"], members["hybrid"]], mmap=False)
    targets = contexts[:, 0].copy()
    ctx = contexts.copy()
    ctx[:, 0] = -1
    ctx = np.sort(ctx, 1)[:, ::-1].copy()  # ids first, -1 padding last
    got = ens.choose_mix(ctx, targets, mixes=(0.0, 3.0, 1000.0), batch_size=16)
    assert set(got) == {0.0, 3.0, 1000.0} and ens.mix == max(got, key=lambda w: (got[w], -w))
    for w in got:  # one network pass for every weight: the recall of each weight's own ranking
        ids = ens.rank(ctx, 10, mix=w).ids.numpy()
        assert got[w] == pytest.approx(float((ids == targets[:, None]).any(1).mean()))


def test_refusals(members, tiny_model):
    with pytest.raises(ValueError, match="at least one model"):
        sb.Ensemble([])
    with pytest.raises(ValueError, match="no model of the ensemble has an item-item term"):
        sb.Ensemble.load([members["full0"]], mix=3.0, mmap=False)
    with pytest.raises(ValueError, match="does not score every id"):  # the superbloom head: beam search
        sb.Ensemble.load([tiny_model], mmap=False)


def test_evaluate_reports_the_networks_alone_and_the_term_alone(members, wiki_data):
    """sb.evaluate on an ensemble with a term: its variants are the networks alone (mix 0) and the hybrid
    member's term alone (that member's own term-alone ranking)."""
    cfg = sb.EvalConfig(max_sets=60, baselines=())
    ens = sb.Ensemble.load([members["full0"], members["hybrid"]], mix=3.0, mmap=False)
    res = sb.evaluate(ens, wiki_data, cfg, progress=False)
    assert set(res.variants) == {"network_only", "term_only"} and res.head["members"] == 2
    alone = sb.evaluate(sb.Ensemble.load([members["full0"], members["hybrid"]], mix=0.0, mmap=False), wiki_data, cfg,
                        progress=False)
    # at weight 0 the ensemble is its networks alone: its term alone beside it, the same as at weight 3
    assert set(alone.variants) == {"term_only"} and res.variants["network_only"] == alone.model
    assert alone.variants["term_only"] == res.variants["term_only"]
    plain = sb.Ensemble.load([members["full0"]], mix=0.0, mmap=False)  # no member with a term: nothing beside it
    assert plain.variants() == {}
    hyb = sb.load(members["hybrid"], mmap=False)
    with mixed(hyb.model.head, 3.0):
        own = sb.evaluate(hyb, wiki_data, cfg, progress=False)
    assert res.variants["term_only"] == own.variants["term_only"]


def test_the_command_line_with_other_models(members, wiki_data, capsys):
    """`superbloom predict / eval MODEL --with OTHER [--item-mix W]`: the ensemble's answers; --item-mix
    alone is refused (exit 2, one line)."""
    from superbloom.cli import main

    ens = sb.Ensemble.load([members["hybrid"], members["full0"]], mix=3.0, mmap=False)
    ids = ["Jazz", "Miles_Davis"]
    want = [i for i, _ in ens.predict(ids, k=5).items]
    assert main(["predict", str(members["hybrid"]), *ids, "--with", str(members["full0"]), "--item-mix", "3",
                 "--k", "5", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [p["id"] for p in got["predictions"]] == want
    assert main(["eval", str(members["hybrid"]), str(wiki_data.path), "--with", str(members["full0"]),
                 "--item-mix", "3", "--max-sets", "30", "--baselines", "none", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"network_only", "term_only"} <= set(out) and out["head"]["members"] == 2
    assert main(["predict", str(members["full0"]), *ids, "--item-mix", "3"]) == 2
    assert "--item-mix weighs an ensemble's term" in capsys.readouterr().err


def test_sequence_models_keep_their_order(tmp_path):
    """Next-item (causal) models: each member reads the history oldest first, so one model twice ranks as
    that model, and a learned i -> i + 1 order survives the ensemble."""
    from tests.test_sequence_train import cycles, small

    data = cycles(tmp_path)
    a = sb.train(small(data, tmp_path / "a", "next-item"), progress=False)
    one = sb.load(a, mmap=False)
    ens = sb.Ensemble([one, one])
    hist = np.array([[one.vocab.get(f"i{j}") for j in (3, 4, 5)]], np.int64)
    assert torch.equal(ens.rank(hist, 5).ids, one.rank(hist, 5).ids)
    assert ens.vocab.strings[int(ens.rank(hist, 1).ids[0, 0])] == "i6"
