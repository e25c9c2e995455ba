"""The term in the hybrid head's training (heads/hybrid.py; issue 33): residual (the term x `residual`
inside the training loss) and distill (a share of the loss is the cross-entropy to the term's softmax),
the term built for each training set from the other folds' sets."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import superbloom as sb
from superbloom.data.dataset import SetArray
from superbloom.hashing.bloom import BloomHash, HashConfig
from superbloom.heads import head_config
from superbloom.heads.hybrid import build_term
from superbloom.model.batches import MaskConfig, training_batch
from superbloom.model.encoder import ModelConfig, build_model

N = 30
MODEL = ModelConfig(d=16, heads=2, d_ff=32, layers=1, dropout=0.0)


def sets_of(seed=0, n_sets=60):
    rng = np.random.default_rng(seed)
    return SetArray.from_lists([rng.choice(N, rng.integers(2, 8), replace=False) for _ in range(n_sets)])


def make(residual=10.0, folds=2, term="ease", seed=0, sets=None, distill=0.0):
    h = BloomHash.build(N, HashConfig(1, 1, 0))
    torch.manual_seed(seed)
    model = build_model(MODEL, head_config("hybrid", neighbours=8, term=term, residual=residual,
                                           distill=distill, term_folds=folds), h)
    sets = sets_of() if sets is None else sets
    model.head.fit(sets)
    return h, model, sets


def dense(indptr, cols, values) -> torch.Tensor:
    a = torch.zeros(N, N)
    for i in range(N):
        lo, hi = int(indptr[i]), int(indptr[i + 1])
        a[i, torch.as_tensor(cols[lo:hi])] = torch.as_tensor(values[lo:hi], dtype=torch.float32)
    return a


def test_settings_are_checked():
    for bad, match in (({"residual": -1.0}, "finite weight >= 0"), ({"residual": float("nan")}, "finite weight"),
                       ({"residual": float("inf")}, "finite weight"), ({"residual": 1.0, "samples": 8}, "full softmax"),
                       ({"term_folds": 0}, "term_folds must be >= 1"), ({"distill": 1.0}, r"distill must be in \[0, 1\)"),
                       ({"distill": 0.5, "residual": 1.0}, "residual 0"), ({"distill_scale": 0.0}, "distill_scale")):
        with pytest.raises(ValueError, match=match):
            head_config("hybrid", **bad)
    _, model, sets = make()
    with pytest.raises(ValueError, match="masked set objective"):
        model.head.prepare(sets, np.arange(len(sets)), ordered=True)


def test_without_a_residual_nothing_changes():
    _, model, sets = make(residual=0.0)
    assert not model.head.trains_with_context
    assert model.head.prepare(sets, np.arange(len(sets))) is None


@pytest.mark.parametrize("term", ["ease", "cooccurrence"])
def test_each_fold_meets_the_term_of_the_other_folds_sets(term):
    _, model, sets = make(folds=3, term=term)
    rows = np.arange(len(sets))
    info = model.head.prepare(sets, rows)
    assert info["term_folds"] == 3 and info["term"] == term
    for f, arrays in enumerate(model.head._folds):
        want = build_term(term, sets.subset(rows[rows % 3 != f]), N, model.head.cfg)
        for got, w in zip(arrays, want):
            assert np.allclose(got.numpy(), w)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([1, 2, 3]), st.sampled_from([1.0, 30.0]))
def test_the_loss_is_the_softmax_of_the_logits_plus_the_folds_term(seed, folds, residual):
    """The model's loss on a training batch = the mean NLL of log_softmax(network logits + residual x
    the term of the fold of each row's set over the ids its row shows), computed here by hand."""
    h, model, sets = make(residual=residual, folds=folds, seed=seed % 7)
    rows = np.arange(len(sets))
    model.head.prepare(sets, rows)
    model.eval()  # no dropout; the head's loss still takes the training path below
    model.head.train()
    rng = np.random.default_rng(seed)
    picked = rng.choice(rows, 12, replace=False)
    b = training_batch(sets, picked, h, MaskConfig(mask_rate=0.4), rng)
    got = model(b)

    elements, inv = torch.unique(b.target_elem, return_inverse=True)
    hidden = model.element_hidden(b)[elements]
    logits = model.head.logits(hidden)
    ids = b.context(elements)
    set_rows = b.set_rows[elements // b.mult.shape[1]]
    terms = []
    for u in range(len(elements)):
        f = int(set_rows[u]) % folds
        a = (dense(model.head.indptr, model.head.cols, model.head.values) if folds == 1
             else dense(*(t.numpy() for t in model.head._folds[f])))
        seen = ids[u][ids[u] >= 0]
        terms.append(a[seen].sum(0))
    logp = torch.log_softmax(logits + residual * torch.stack(terms), -1)
    want = -logp[inv, b.target_ids].mean()
    assert torch.allclose(got, want, atol=1e-5)
    assert set(b.set_rows.tolist()) == set(picked.tolist())


def test_a_row_never_meets_a_term_fitted_on_its_own_set():
    """Two folds: an id pair held by one training set only is absent from its fold's term."""
    sets = SetArray.from_lists([[0, 1]] + [[2 + (i % 20), 2 + ((i + 1) % 20)] for i in range(59)])
    _, model, sets = make(folds=2, term="cooccurrence", sets=sets)
    model.head.prepare(sets, np.arange(len(sets)))
    own = dense(*(t.numpy() for t in model.head._folds[0]))  # row 0 is in fold 0
    other = dense(*(t.numpy() for t in model.head._folds[1]))
    assert own[0, 1] == 0 and other[0, 1] > 0


def test_the_loss_without_prepare_says_what_to_do():
    h, model, sets = make()
    rng = np.random.default_rng(0)
    b = training_batch(sets, np.arange(8), h, MaskConfig(mask_rate=0.4), rng)
    model.train()
    with pytest.raises(RuntimeError, match="prepare"):
        model(b)


def test_trains_resumes_and_evaluates_end_to_end(wiki_data, tmp_path):
    out = tmp_path / "res"
    cfg = sb.TrainConfig(data=str(wiki_data.path), out=str(out), hash=sb.HashConfig(alpha=1, m=1),
                         model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1),
                         head=head_config("hybrid", neighbours=20, residual=10.0),
                         loop=sb.LoopConfig(steps=6, batch_size=32, eval_every=3, keep_best=False))
    sb.train(cfg, progress=False)
    saved = json.loads((out / "config.json").read_text())
    assert saved["head"]["residual"] == 10.0 and saved["head_prepared"]["term_folds"] == 2
    sb.train(dataclasses.replace(cfg, loop=dataclasses.replace(cfg.loop, steps=9)), progress=False, resume=True)
    vals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert vals[-1]["step"] == 9 and all(np.isfinite(v["val_rec@10"]) for v in vals)  # resumed: prepare ran again
    model = sb.load(out)
    assert float(model.model.head.mix) in (0.0, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)
    pred = model.predict(["Copenhagen", "Aarhus"], k=5)
    assert len(pred.items) == 5 and pred.exact


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([1, 2]), st.sampled_from([0.3, 0.9]))
def test_the_distilled_loss_mixes_the_nll_and_the_cross_entropy_to_the_terms_softmax(seed, folds, share):
    """(1 - distill) x mean NLL of the network + distill x mean over the targets whose row shows an id
    of -sum_j q_j log p_j, q = softmax(scale x the fold's term) over the ids the row does not show."""
    h, model, sets = make(residual=0.0, distill=share, folds=folds, seed=seed % 5)
    rows = np.arange(len(sets))
    model.head.prepare(sets, rows)
    model.eval()
    model.head.train()
    rng = np.random.default_rng(seed)
    b = training_batch(sets, rng.choice(rows, 10, replace=False), h, MaskConfig(mask_rate=0.5), rng)
    got = model(b)

    elements, inv = torch.unique(b.target_elem, return_inverse=True)
    logp = torch.log_softmax(model.head.logits(model.element_hidden(b)[elements]), -1)
    ids = b.context(elements)
    set_rows = b.set_rows[elements // b.mult.shape[1]]
    ce, shows = [], []
    for u in range(len(elements)):
        f = int(set_rows[u]) % folds
        a = (dense(model.head.indptr, model.head.cols, model.head.values) if folds == 1
             else dense(*(t.numpy() for t in model.head._folds[f])))
        seen = ids[u][ids[u] >= 0]
        t = 30.0 * a[seen].sum(0)
        t[seen] = float("-inf")
        q = torch.softmax(t, -1)
        ce.append(-(q[q > 0] * logp[u][q > 0]).sum())
        shows.append(float(len(seen) > 0))
    ce, shows = torch.stack(ce)[inv], torch.tensor(shows)[inv]
    nll = -logp[inv, b.target_ids].mean()
    kd = (ce * shows).sum() / shows.sum().clamp(min=1)
    assert torch.allclose(got, (1 - share) * nll + share * kd, atol=1e-5)
