"""The learning-rate schedules (training/optim.py SCHEDULES, OptimConfig.schedule, train --schedule):
the same warm-up, then the paper's inverse square root or a linear / cosine decay to 0 at the run's
last step, which the training loop takes from --steps or --epochs."""
import json
import math

import pytest
import torch

from superbloom.model.device import Dist
from superbloom.training.config import SCHEDULE_NAMES, TO_ZERO, LoopConfig, OptimConfig, TrainConfig
from superbloom.training.loop import fit
from superbloom.training.optim import SCHEDULES, lr_factor

from test_fit import Regression, objective

CPU = Dist(0, 1, torch.device("cpu"))


def test_the_names_list_is_the_registry():
    assert set(SCHEDULE_NAMES) == set(SCHEDULES) and set(TO_ZERO) <= set(SCHEDULES)


@pytest.mark.parametrize("schedule", SCHEDULE_NAMES)
def test_every_schedule_warms_up_the_same_way(schedule):
    for step in (1, 50, 99):
        assert lr_factor(step, 100, schedule, 1000) == pytest.approx(step / 100)
    assert lr_factor(100, 100, schedule, 1000) == pytest.approx(1.0)


def test_the_decays_after_the_warm_up():
    assert lr_factor(400, 100, "rsqrt", 1000) == pytest.approx(0.5)  # sqrt(100 / 400), the paper's
    assert lr_factor(400, 100, "rsqrt") == pytest.approx(0.5)  # needs no step count
    assert lr_factor(550, 100, "linear", 1000) == pytest.approx(0.5)  # half way from step 100 to 1000
    assert lr_factor(550, 100, "cosine", 1000) == pytest.approx(0.5)
    assert lr_factor(325, 100, "cosine", 1000) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    for schedule in TO_ZERO:
        assert lr_factor(1000, 100, schedule, 1000) == pytest.approx(0.0)
        assert lr_factor(1200, 100, schedule, 1000) == pytest.approx(0.0)  # never below 0 (a resumed, longer run)
        factors = [lr_factor(s, 100, schedule, 1000) for s in range(100, 1001)]
        assert all(a >= b for a, b in zip(factors, factors[1:]))


def test_a_decay_to_zero_needs_a_step_count():
    with pytest.raises(ValueError, match="--steps or --epochs"):
        lr_factor(500, 100, "cosine", 0)
    with pytest.raises(ValueError, match="--steps or --epochs"):
        TrainConfig(data="d", out="o", optim=OptimConfig(schedule="linear"), loop=LoopConfig(time_budget=60))
    TrainConfig(data="d", out="o", optim=OptimConfig(schedule="linear"), loop=LoopConfig(epochs=2))
    with pytest.raises(ValueError, match="schedule must be one of"):
        OptimConfig(schedule="step")


@pytest.mark.parametrize("loop", [LoopConfig(steps=200, eval_every=100),
                                  LoopConfig(epochs=25, batch_size=32, eval_every=100)])
def test_the_loop_decays_to_zero_at_its_last_step(tmp_path, loop):
    """200 steps (or 25 epochs of 8 batches of 32): the learning rate, logged every 50 steps, falls
    to 0 at step 200."""
    model = Regression()
    optim = OptimConfig(lr=0.05, warmup=10, schedule="linear")
    fit(objective(model), loop, optim, tmp_path, CPU, progress=False)
    lrs = {r["step"]: r["lr"] for r in map(json.loads, (tmp_path / "metrics.jsonl").read_text().splitlines())
           if "lr" in r}
    assert lrs, "the metrics log holds no learning rate"
    assert sorted(lrs) == [50, 100, 150, 200] and lrs[200] == pytest.approx(0.0, abs=1e-12)
    for step, lr in lrs.items():
        assert lr == pytest.approx(0.05 * (200 - step) / 190)


def test_train_takes_schedule_from_the_command_line(tmp_path):
    from superbloom.cli import main

    with pytest.raises(SystemExit) as e:
        main(["train", str(tmp_path), "--out", str(tmp_path / "m"), "--schedule", "step", "--steps", "5"])
    assert e.value.code == 2
