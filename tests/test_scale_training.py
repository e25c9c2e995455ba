"""The large-vocabulary fixes of issue 14: fused AdamW from optim.FUSED_MIN_PARAMS parameters (the
same update), no weight average kept when nothing validates it, and the popularity baseline
without dense score rows (the same ranking)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from superbloom.heads.base import Validation
from superbloom.training import optim as optim_mod
from superbloom.evaluation.baselines import Baseline, Popularity
from superbloom.storage.checkpoint import latest_checkpoint, load_extra, load_optimizer, load_weights, save_checkpoint
from superbloom.data.dataset import SetArray
from superbloom.model.device import Dist
from superbloom.training.optim import OptimConfig, make_optimizer
from superbloom.training.loop import LoopConfig, Objective, fit

CPU = Dist(0, 1, torch.device("cpu"))


def _steps(params, opt, grads):
    for g in grads:
        for p, gp in zip(params, g):
            p.grad = gp.clone()
        opt.step()


def test_fused_adamw_only_for_large_models_and_the_same_update(monkeypatch):
    torch.manual_seed(0)
    small = [torch.nn.Parameter(torch.randn(30, 4))]
    assert make_optimizer(OptimConfig(), small).param_groups[0]["fused"] is None  # below the bar: as before
    monkeypatch.setattr(optim_mod, "FUSED_MIN_PARAMS", 100)
    ref = [torch.nn.Parameter(torch.randn(40, 8)), torch.nn.Parameter(torch.randn(8))]
    fused = [torch.nn.Parameter(p.detach().clone()) for p in ref]
    o_ref = torch.optim.AdamW(ref, lr=3e-3, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.0)
    o_fused = make_optimizer(OptimConfig(), fused)
    assert o_fused.param_groups[0]["fused"] is True
    grads = [[torch.randn_like(p) for p in ref] for _ in range(40)]
    _steps(ref, o_ref, grads)
    _steps(fused, o_fused, grads)
    for a, b in zip(ref, fused):
        assert torch.allclose(a, b, rtol=0, atol=1e-6)
        assert not torch.equal(a, torch.zeros_like(a))


def test_resume_keeps_this_runs_kernel(tmp_path, monkeypatch):
    """A checkpoint written by the reference kernel, loaded by a run that chose the fused one (and the
    reverse), keeps the loading run's kernel and the saved moments."""
    model = torch.nn.Linear(20, 10)
    opt = make_optimizer(OptimConfig(), model.parameters())
    model(torch.randn(3, 20)).sum().backward()
    opt.step()
    save_checkpoint(tmp_path, 1, model, opt, {"step": 1})
    monkeypatch.setattr(optim_mod, "FUSED_MIN_PARAMS", 100)
    opt2 = make_optimizer(OptimConfig(), model.parameters())
    load_optimizer(opt2, latest_checkpoint(tmp_path))
    assert opt2.param_groups[0]["fused"] is True
    assert torch.equal(opt2.state[model.weight]["exp_avg"], opt.state[model.weight]["exp_avg"])


class Regression(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Linear(4, 1)

    def forward(self, batch):
        x, y = batch
        return ((self.w(x).squeeze(1) - y) ** 2).mean()


def _objective(model, validate):
    g = np.random.default_rng(0)
    x = torch.from_numpy(g.normal(size=(256, 4)).astype(np.float32))
    y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0])
    return Objective(model, 256, lambda e: list(np.random.default_rng(e).permutation(256).reshape(-1, 32)),
                     lambda rows, rng: (x[rows], y[rows]), validate, "score")


def test_no_weight_average_without_validation(tmp_path):
    """Without a validation the average is never read: it is not kept (no per-step pass), and the
    trained weights are those of a run with ema=0."""
    runs = {}
    for name, ema in (("ema", 0.9), ("none", 0.0)):
        torch.manual_seed(0)
        model = Regression()
        fit(_objective(model, None), LoopConfig(batch_size=32, steps=20, eval_every=0, checkpoint_every=1e9, ema=ema),
            OptimConfig(lr=0.1, warmup=2), tmp_path / name, CPU, progress=False)
        runs[name] = model
        assert load_extra(latest_checkpoint(tmp_path / name), "ema") is None
    assert torch.equal(runs["ema"].w.weight, runs["none"].w.weight)
    torch.manual_seed(0)
    fit(_objective(Regression(), lambda: Validation({"score": 0.0})),
        LoopConfig(batch_size=32, steps=20, eval_every=10, checkpoint_every=1e9, ema=0.9),
        OptimConfig(lr=0.1, warmup=2), tmp_path / "validated", CPU, progress=False)
    assert load_extra(latest_checkpoint(tmp_path / "validated"), "ema") is not None  # with validation: kept
    load_weights(Regression(), latest_checkpoint(tmp_path / "validated"))


def _sets(seed: int, n_ids: int) -> SetArray:
    """Id i appears i + 1 times (distinct counts: no ties, whose order the dense path leaves arbitrary)."""
    g = np.random.default_rng(seed)
    ids = g.permutation(np.repeat(np.arange(n_ids), np.arange(1, n_ids + 1)))
    cuts = np.sort(g.choice(np.arange(1, len(ids)), 80, replace=False))
    return SetArray(np.concatenate([[0], cuts, [len(ids)]]).astype(np.int64), ids.astype(np.int32))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_popularity_without_dense_scores_equals_the_dense_path(seed):
    n_ids = 40
    train = _sets(seed, n_ids)
    pop = Popularity(train, n_ids)
    g = np.random.default_rng(seed + 10)
    # contexts heavy in popular ids (so exclusion matters), -1 padded
    contexts = np.where(g.random((25, 6)) < 0.8, pop.order[g.integers(0, 8, (25, 6))], -1)
    fast = pop.rank(contexts, contexts, 10)
    dense = Baseline.rank(pop, contexts, contexts, 10)  # the generic path: dense scores + tie-break
    assert np.array_equal(fast, dense)
    for row, ctx in zip(fast, contexts):
        assert not set(row) & set(ctx[ctx >= 0])


def test_popularity_ties_go_to_the_lower_id_and_short_vocabularies():
    train = SetArray(np.array([0, 2, 4], np.int64), np.array([3, 1, 3, 1], np.int32))  # ids 1 and 3 tie
    pop = Popularity(train, 5)
    none, ctx = np.array([[-1]]), np.array([[1, 3, 0, 2]])
    assert pop.rank(none, none, 3).tolist() == [[1, 3, 0]]
    assert pop.rank(ctx, ctx, 5).tolist() == [[4, 1, 3, 0, 2]]  # excluded ids come last


def test_dense_baselines_score_in_bounded_chunks(monkeypatch):
    from superbloom.evaluation import baselines

    pop = Popularity(_sets(0, 40), 40)
    assert pop.batch == 256
    monkeypatch.setattr(baselines, "SCORE_BYTES", 8 * 40 * 3)
    assert pop.batch == 3
    contexts = np.random.default_rng(0).integers(0, 40, (10, 4))
    assert np.array_equal(Baseline.rank(pop, contexts, contexts, 5), pop.rank(contexts, contexts, 5))
