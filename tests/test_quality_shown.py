"""benchmarks/quality/shown.py: the training softmax without the ids a row shows (a probe of issue 33)."""
from __future__ import annotations

import pytest

import numpy as np
import torch
import torch.nn.functional as F

import superbloom as sb
from benchmarks.quality.shown import loss_without_shown, shown_excluded, shown_mask
from superbloom.hashing.bloom import BloomHash
from superbloom.model.batches import MaskConfig, training_batch
from superbloom.model.encoder import SetModel

pytestmark = pytest.mark.benchmarks  # a benchmark script's test: -m 'not benchmarks' leaves it out


def test_the_mask_holds_the_shown_ids_but_never_a_rows_target():
    shown = torch.tensor([[1, 2, -1], [3, -1, 7]])  # 7: not an id of a 6-id vocabulary (ignored)
    rows, targets = torch.tensor([0, 0, 1]), torch.tensor([2, 4, 5])  # row 0 shows its own target 2
    mask = shown_mask(torch.zeros(2, 6), shown, rows, targets)
    assert mask.int().tolist() == [[0, 1, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0]]


def test_the_probe_trains_with_the_masked_loss_and_restores_the_model(tmp_path):
    """Inside the block the training loss is the NLL over the ids the row does not show (below the
    full softmax's NLL, which also spends mass on them); outside, and in eval mode, it is the library's."""
    rng = np.random.default_rng(0)
    sets = [[f"i{x}" for x in rng.choice(40, rng.integers(6, 14), replace=False)] for _ in range(200)]
    sb.prepare(sb.PrepareConfig(sets, str(tmp_path / "data")), progress=False)
    cfg = sb.TrainConfig(data=str(tmp_path / "data"), out=str(tmp_path / "m"), head=sb.FullConfig(),
                         hash=sb.HashConfig(alpha=1, m=1), model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1,
                                                                                 dropout=0.0),
                         loop=sb.LoopConfig(steps=3, batch_size=8, eval_every=0))
    library = SetModel.forward
    with shown_excluded():
        assert SetModel.forward is not library
        sb.train(cfg, progress=False)
    assert SetModel.forward is library
    model, data = sb.load(tmp_path / "m").model, sb.Dataset(tmp_path / "data")
    model.train()
    batch = training_batch(data.train, np.arange(16), BloomHash.build(data.n_ids, sb.HashConfig(alpha=1, m=1)),
                           MaskConfig(n=32), np.random.default_rng(1))
    elements, rows = torch.unique(batch.target_elem, return_inverse=True)
    logits = model.head.logits(model.element_hidden(batch)[elements])
    mask = shown_mask(logits, batch.context(elements), rows, batch.target_ids)
    assert mask.any() and not mask[rows, batch.target_ids].any()
    want = -F.log_softmax(logits.masked_fill(mask, float("-inf")), -1)[rows, batch.target_ids].mean()
    with torch.no_grad():
        assert torch.allclose(loss_without_shown(model, batch), want)
        assert loss_without_shown(model, batch) < model(batch)  # the library's loss: the full softmax
        with shown_excluded():
            assert torch.allclose(model(batch), want)
