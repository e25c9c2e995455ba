"""The model-quality additions (issue 16): element dropout (batches.py), weight averaging (train.py),
alpha chosen from the vocabulary size (hashing.py)."""
from __future__ import annotations

import numpy as np
import torch
from safetensors.torch import load_file

import superbloom as sb
from superbloom.model.batches import MaskConfig, drop_elements
from superbloom.storage.checkpoint import latest_checkpoint
from superbloom.hashing.bloom import MASK_ELEM, PAD_ELEM


def test_drop_elements_never_touches_targets_or_padding():
    elems = np.array([[5, MASK_ELEM, 7, 9, PAD_ELEM], [3, 4, 2, MASK_ELEM, 8]])
    targets = np.array([[-1, 6, -1, 9, -1], [-1, -1, -1, 1, -1]])
    rng = np.random.default_rng(0)
    assert np.array_equal(drop_elements(elems, targets, 0.0, rng), elems)
    out = drop_elements(elems, targets, 1.0, rng)
    # every non-target id is dropped; targets (fed as [MASK] or unchanged) and padding stay
    assert out.tolist() == [[PAD_ELEM, MASK_ELEM, PAD_ELEM, 9, PAD_ELEM], [PAD_ELEM] * 3 + [MASK_ELEM, PAD_ELEM]]
    half = drop_elements(np.tile(elems, (500, 1)), np.tile(targets, (500, 1)), 0.5, rng)
    ctx = (np.tile(targets, (500, 1)) < 0) & (np.tile(elems, (500, 1)) >= 0)
    assert 0.45 < (half[ctx] == PAD_ELEM).mean() < 0.55


def test_ema_keeps_the_averaged_weights(wiki_data, tmp_path):
    """With ema, the BEST checkpoint holds the running average, not the last raw weights."""
    model = sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1)
    common = dict(data=str(wiki_data.path), hash=sb.HashConfig(alpha=8), model=model, val_fraction=0.05,
                  mask=MaskConfig(element_dropout=0.2))
    loop = dict(steps=8, batch_size=16, eval_every=0)
    sb.train(sb.TrainConfig(out=str(tmp_path / "raw"), loop=sb.LoopConfig(**loop), **common), progress=False)
    sb.train(sb.TrainConfig(out=str(tmp_path / "ema"), loop=sb.LoopConfig(ema=0.9, **loop), **common), progress=False)
    raw_last = load_file(str(latest_checkpoint(tmp_path / "raw") / "model.safetensors"))
    ema_last = load_file(str(latest_checkpoint(tmp_path / "ema") / "model.safetensors"))
    ema_best = load_file(str(latest_checkpoint(tmp_path / "ema", "BEST") / "model.safetensors"))
    key = "encoder.embed.weight"
    assert torch.equal(raw_last[key], ema_last[key])  # same seed, same raw trajectory
    assert not torch.equal(ema_best[key], ema_last[key])  # BEST is the average
    assert sb.load(tmp_path / "ema").predict(["Jazz"], k=5).items


def test_auto_alpha_resolves_from_the_vocabulary_size():
    from superbloom.hashing.bloom import UNHASHED_MAX_IDS, BloomHash, HashConfig

    auto = HashConfig(alpha=0)
    assert auto.resolve(UNHASHED_MAX_IDS) == HashConfig(alpha=1, m=1)
    assert auto.resolve(UNHASHED_MAX_IDS + 1) == HashConfig(alpha=4, m=2)
    assert HashConfig(alpha=2, m=2).resolve(10) == HashConfig(alpha=2, m=2)  # explicit alpha untouched
    h = BloomHash.build(100, auto)
    assert (h.alpha, h.m) == (1, 1) and np.array_equal(h.buckets[0], np.arange(100))
