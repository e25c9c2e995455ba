"""The exported network (inference/export.py: TorchScript) scores as the PyTorch model does, on inputs
of other shapes than the trace's, and the library decodes its scores into the model's own rankings:
the superbloom head's per-map log-probabilities (Algorithm 1) and a hybrid's network scores."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import superbloom as sb
from superbloom.heads.beam import decode_topk
from superbloom.heads.decode_config import DecodeConfig
from superbloom.inference.export import check_export, network_input


def contexts(n_ids, q=7, width=5, seed=0):
    rng = np.random.default_rng(seed)
    ctx = rng.integers(0, n_ids, (q, width))
    ctx[rng.random((q, width)) < 0.3] = -1  # padded rows of other lengths than the trace's
    ctx[:, 0] = rng.integers(0, n_ids, q)
    return ctx


def test_the_superbloom_heads_export_decodes_to_the_models_ranking(tiny_predictor, tmp_path):
    model = tiny_predictor
    path = model.export(tmp_path / "net.ts")
    ctx = contexts(len(model.vocab))
    assert check_export(model, path, ctx) <= 1e-5  # other batch size and width than the trace's
    scores = torch.jit.load(str(path))(*network_input(model, ctx))  # (Q, m, n_buckets)
    buckets, inverse = model.model.head.buckets, model.model.head.inverse
    mine = decode_topk(scores, buckets, inverse, 10, torch.from_numpy(ctx), DecodeConfig(exact=True))
    theirs = model.rank(ctx, 10, DecodeConfig(exact=True))
    assert torch.equal(mine.ids, theirs.ids) and torch.allclose(mine.scores, theirs.scores, atol=1e-5)
    assert mine.exact.all()


def test_a_hybrids_network_exports_and_its_term_stays_in_the_library(tmp_path):
    rng = np.random.default_rng(1)
    sets = [sorted((t * 8 + rng.choice(8, 4, replace=False)).tolist()) for t in rng.integers(0, 5, 200)]
    model = sb.fit([[f"i{j}" for j in s] for s in sets], steps=3, d=16, heads=2, d_ff=32, layers=1, batch_size=16,
                   progress=False)
    assert model.config["head"]["name"] == "hybrid"
    path = model.export(tmp_path / "hybrid.ts")
    ctx = contexts(len(model.vocab), q=4, width=3, seed=2)
    assert check_export(model, path, ctx) <= 1e-5
    net = torch.jit.load(str(path))(*network_input(model, ctx))  # (Q, N): the network's log p of every id
    assert net.shape == (4, len(model.vocab))
    alone = sb.load(model.path, part="network").rank(ctx, 5, DecodeConfig(exact=True))
    masked = net.clone()
    for q, row in enumerate(ctx):
        masked[q, row[row >= 0]] = float("-inf")
    assert torch.allclose(masked.topk(5).values, alone.scores, atol=1e-5)


def test_an_export_is_a_guarded_file(tiny_predictor, tmp_path):
    mine = tmp_path / "mine.ts"
    mine.write_text("the user's")
    with pytest.raises(ValueError, match="was not written by superbloom"):
        tiny_predictor.export(mine)
    assert mine.read_text() == "the user's"
    path = tiny_predictor.export(tmp_path / "net.ts")
    assert tiny_predictor.export(path) == path  # ours: replaced
