"""The training loop takes any objective (train.fit): here a linear regression that is not a set
model at all, through the same checkpoints, BEST selection, metrics log and resume as train()."""
import json

import numpy as np
import torch
import torch.nn as nn

from superbloom.heads.base import Validation
from superbloom.storage.checkpoint import latest_checkpoint
from superbloom.model.device import Dist
from superbloom.training.optim import OptimConfig
from superbloom.training.loop import LoopConfig, Objective, fit

CPU = Dist(0, 1, torch.device("cpu"))


class Regression(nn.Module):
    """forward(batch) -> the loss: all the loop asks of a model."""

    def __init__(self):
        super().__init__()
        self.w = nn.Linear(3, 1)

    def forward(self, batch):
        x, y = batch
        return ((self.w(x).squeeze(1) - y) ** 2).mean()


def objective(model: Regression) -> Objective:
    g = np.random.default_rng(0)
    x = g.normal(size=(256, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5], np.float32) + 0.3).astype(np.float32)
    rows = np.arange(256)

    def validate():
        with torch.no_grad():
            return Validation({"neg_mse": -float(model((torch.from_numpy(x), torch.from_numpy(y))))})

    return Objective(model=model, n_examples=256,
                     epoch=lambda e: list(np.random.default_rng([0, e]).permutation(rows).reshape(-1, 32)),
                     batch=lambda r, rng: (torch.from_numpy(x[r]), torch.from_numpy(y[r])),
                     validate=validate, select="neg_mse")


def test_fit_trains_checkpoints_and_resumes_any_objective(tmp_path):
    loop = LoopConfig(batch_size=32, steps=40, eval_every=10, checkpoint_every=0.0)
    optim = OptimConfig(lr=0.3, warmup=5)
    torch.manual_seed(0)
    model = Regression()
    state = fit(objective(model), loop, optim, tmp_path, CPU, progress=False)
    assert state.step == 40 and state.epoch == 4  # 8 batches of 32 per epoch
    assert state.best["neg_mse"] > -0.05  # it learned (the data are noiseless; the untrained mse is ~6)
    assert latest_checkpoint(tmp_path).name.startswith("step-000000040")
    assert (tmp_path / "BEST").exists()
    vals = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines() if "val_neg_mse" in x]
    assert [v["step"] for v in vals] == [10, 20, 30, 40, 40]  # every 10 steps, and the final one

    # resume to 60 steps = an uninterrupted 60-step run, bit for bit
    torch.manual_seed(0)
    fit(objective(Regression()), LoopConfig(batch_size=32, steps=60, eval_every=0, checkpoint_every=1e9),
        optim, tmp_path / "whole", CPU, progress=False)
    torch.manual_seed(0)
    resumed = Regression()
    fit(objective(resumed), LoopConfig(batch_size=32, steps=60, eval_every=0, checkpoint_every=1e9), optim,
        tmp_path, CPU, resume_from=latest_checkpoint(tmp_path), progress=False)
    whole = Regression()
    from superbloom.storage.checkpoint import load_weights

    load_weights(whole, latest_checkpoint(tmp_path / "whole"))
    assert torch.equal(whole.w.weight, resumed.w.weight) and torch.equal(whole.w.bias, resumed.w.bias)


def test_weight_average_is_validated_kept_and_resumed(tmp_path):
    """LoopConfig.ema: BEST holds the averaged weights (not the trained ones), and a resumed run
    continues the average: its weights and average equal an uninterrupted run's, bit for bit."""
    from superbloom.storage.checkpoint import inference_checkpoint, load_extra, load_weights

    optim = OptimConfig(lr=0.3, warmup=5)
    runs = {}
    for name, stops in (("whole", [30]), ("split", [12, 30])):
        torch.manual_seed(0)
        for steps in stops:
            model = Regression()
            ckpt = latest_checkpoint(tmp_path / name)
            fit(objective(model), LoopConfig(batch_size=32, steps=steps, eval_every=6, checkpoint_every=1e9, ema=0.9),
                optim, tmp_path / name, CPU, resume_from=ckpt, progress=False)
        runs[name] = (model, load_extra(latest_checkpoint(tmp_path / name), "ema"))
    (whole, whole_avg), (split, split_avg) = runs["whole"], runs["split"]
    assert torch.equal(whole.w.weight, split.w.weight)
    assert whole_avg.keys() == split_avg.keys() and all(torch.equal(whole_avg[k], split_avg[k]) for k in whole_avg)
    best = Regression()
    load_weights(best, inference_checkpoint(tmp_path / "whole"))
    assert not torch.equal(best.w.weight, whole.w.weight)  # the average, not the last weights


def test_train_uses_the_registered_objective(tmp_path, monkeypatch):
    """train() builds its objective from the entry objectives.OBJECTIVES[cfg.objective]: a registered one
    is used, with the model and data train() built; an unknown name is refused before anything is written."""
    import pytest

    import superbloom as sb
    import importlib

    train_mod = importlib.import_module("superbloom.training.train")  # (superbloom.train is also the function)
    from superbloom.model.encoder import ModelConfig
    from superbloom.data.prepare import PrepareConfig, prepare
    from superbloom.data.readers import ReadConfig

    prepare(PrepareConfig(input=str(sb.embedded_dataset()), out=str(tmp_path / "data"),
                          read=ReadConfig(format="edges")), progress=False)
    seen = {}

    def counting(x):
        seen["inputs"] = x
        obj = train_mod.masked(x)
        seen["batches"] = 0

        def batch(rows, rng):
            seen["batches"] += 1
            return obj.batch(rows, rng)
        return train_mod.Objective(obj.model, obj.n_examples, obj.epoch, batch, obj.validate, obj.select)

    monkeypatch.setitem(train_mod.OBJECTIVES, "counting", train_mod.ObjectiveEntry("counting", counting))
    cfg = train_mod.TrainConfig(data=str(tmp_path / "data"), out=str(tmp_path / "model"), objective="counting",
                                model=ModelConfig(d=16, heads=2, d_ff=32, layers=1),
                                loop=train_mod.LoopConfig(steps=3, batch_size=16, eval_every=0))
    train_mod.train(cfg, progress=False)
    assert seen["batches"] == 3 and seen["inputs"].cfg is cfg
    assert json.loads((tmp_path / "model" / "config.json").read_text())["train"]["objective"] == "counting"
    with pytest.raises(ValueError, match="unknown objective 'nope'"):
        train_mod.TrainConfig(data="d", out="o", objective="nope")
