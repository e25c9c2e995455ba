"""The dynamic input of the id model (embeddings.DynamicIdInput, ModelConfig.dynamic, train
--dynamic-embedding): each element's input is its m token rows + the dynamic embedding of its id's
string; special tokens keep their plain embedding; the setting survives save / load / resume."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import superbloom as sb
from superbloom.model.batches import query_batch
from superbloom.storage.checkpoint import latest_checkpoint
from superbloom.cli import main
from superbloom.model.dynamic import trits
from superbloom.model.embeddings import DynamicIdInput
from superbloom.storage.files import load_json
from superbloom.hashing.bloom import MASK_ELEM, PAD_ELEM, BloomHash, HashConfig
from superbloom.heads import SuperbloomConfig
from superbloom.model.encoder import ModelConfig, build_model, count_parameters

STRINGS = [f"id_{i}" for i in range(40)]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([(1, 1), (1, 2), (4, 2), (5, 3), (2, 3)]), st.integers(0, 2**31))
def test_ids_are_read_back_from_tokens(hash_cfg, seed):
    alpha, m = hash_cfg
    h = BloomHash.build(40, HashConfig(alpha=alpha, m=m, seed=seed % 100))
    mod = DynamicIdInput(h, STRINGS, 8)
    rng = np.random.default_rng(seed)
    elems = rng.integers(-2, 40, (3, 7))  # ids and [PAD] / [MASK] markers
    got = mod.ids(torch.from_numpy(h.encode(elems)))
    assert torch.equal(got, torch.from_numpy(np.where(elems < 0, -1, elems)))


def test_output_shape_specials_and_determinism():
    h = BloomHash.build(40, HashConfig(alpha=4, m=2))
    torch.manual_seed(0)
    mod = DynamicIdInput(h, STRINGS, 8)
    elems = np.array([[3, 17, MASK_ELEM, PAD_ELEM]])
    tok = torch.from_numpy(h.encode(elems))
    x = mod(tok)
    assert x.shape == (1, 8, 8)
    assert torch.equal(x[0, 4:], torch.zeros(4, 8))  # [MASK] and [PAD]: nothing added
    assert torch.equal(x[0, 0], x[0, 1]) and not torch.equal(x[0, 0], x[0, 2])  # one vector per element
    expect = torch.from_numpy(trits(["id_3"])).float() @ mod.embed.proj.weight.T
    assert torch.allclose(x[0, 0], expect[0])
    assert torch.equal(mod(tok), x)  # a pure function of the tokens


def test_model_with_dynamic_input_adds_64_d_parameters_and_needs_the_strings():
    h = BloomHash.build(40, HashConfig(alpha=4, m=2))
    cfg = ModelConfig(d=16, heads=2, d_ff=32, layers=1, dropout=0.0)
    plain = build_model(cfg, SuperbloomConfig(), h)
    dyn = build_model(ModelConfig(d=16, heads=2, d_ff=32, layers=1, dropout=0.0, dynamic=True), SuperbloomConfig(),
                      h, vocab=STRINGS)
    assert count_parameters(dyn) - count_parameters(plain) == 64 * 16
    with pytest.raises(ValueError, match="dynamic input embedding"):
        build_model(ModelConfig(d=16, heads=2, d_ff=32, layers=1, dynamic=True), SuperbloomConfig(), h)
    with pytest.raises(ValueError, match="one string per id"):
        DynamicIdInput(h, STRINGS[:5], 16)
    batch = query_batch(np.array([[1, 2, 3]]), h)
    loss = dyn.head.loss(dyn.target_hidden(batch), torch.tensor([4]))
    loss.backward()
    assert dyn.encoder.dynamic.embed.proj.weight.grad.abs().sum() > 0  # it learns
    assert "encoder.dynamic.embed.proj.weight" in dyn.state_dict()
    assert not any("table" in k or "first" in k for k in dyn.state_dict())  # buffers rebuilt, not saved


def test_dynamic_setting_round_trips_through_save_load_and_resume(wiki_data, tmp_path, capsys):
    out = tmp_path / "m"
    tiny = ["--d", "32", "--heads", "2", "--d-ff", "64", "--layers", "1", "--batch-size", "32", "--eval-every", "0",
            "--quiet", "--alpha", "8"]
    assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(out), "--steps", "3", "--dynamic-embedding", *tiny]) == 0
    cfg = load_json(out / "config.json")
    assert cfg["model"]["dynamic"] is True and ModelConfig.from_dict(cfg["model"]).dynamic
    p = sb.load(out)
    assert p.model.encoder.dynamic is not None
    a = p.predict(["Jazz", "Miles_Davis"], k=5)
    assert sb.load(out, mmap=False).predict(["Jazz", "Miles_Davis"], k=5).items == a.items
    capsys.readouterr()
    assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(out), "--steps", "5", "--resume", "--quiet"]) == 0
    assert load_json(latest_checkpoint(out) / "state.json")["step"] == 5
    assert load_json(out / "config.json")["model"]["dynamic"] is True
    # a model trained without it cannot gain it on resume (the architecture is fixed)
    plain = tmp_path / "p"
    assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(plain), "--steps", "2", *tiny]) == 0
    capsys.readouterr()
    assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(plain), "--steps", "4", "--resume",
                 "--dynamic-embedding", "--quiet"]) == 2
    assert "model.dynamic False -> True" in capsys.readouterr().err


def test_config_json_of_older_models_reads_as_not_dynamic():
    assert ModelConfig.from_dict({"d": 32, "heads": 2, "d_ff": 64, "layers": 1}).dynamic is False
