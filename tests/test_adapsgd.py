"""AdapSGD (superbloom/adapsgd.py): convergence without a learning rate, state, checkpoints, SDPA."""
from __future__ import annotations


import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from superbloom.training.adapsgd import STATE, AdapSGD

pytestmark = pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")


def train(params, loss_fn, opt, steps):
    for _ in range(steps):
        with opt.forward_context():
            loss = loss_fn()
        loss.backward(create_graph=opt.create_graph)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return loss_fn().item()


@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_converges_on_an_ill_conditioned_quadratic(wd):
    # f(x) = 1/2 x'Ax - b'x, curvatures 0.1 .. 100 (condition 1000), some off-diagonal coupling;
    # the minimiser of f + wd/2 |x|^2 solves (A + wd I) x = b.
    g = torch.Generator().manual_seed(0)
    n = 20
    d = torch.logspace(-1, 2, n, dtype=torch.float64)
    noise = torch.randn(n, n, generator=g, dtype=torch.float64)
    a = torch.diag(d) + 0.05 * (noise + noise.T) / 2 * d.sqrt()[:, None] * d.sqrt()[None, :]
    assert torch.linalg.eigvalsh(a).min() > 0
    b = torch.randn(n, generator=g, dtype=torch.float64)
    x_star = torch.linalg.solve(a + wd * torch.eye(n, dtype=torch.float64), b)
    x = nn.Parameter(torch.zeros(n, dtype=torch.float64))
    opt = AdapSGD([x], weight_decay=wd)
    train([x], lambda: 0.5 * x @ a @ x - b @ x, opt, 600)
    assert (x.detach() - x_star).norm() / x_star.norm() < 1e-4


def test_converges_on_logistic_regression():
    # full-batch L2-regularised logistic regression: compare with L-BFGS on the same objective
    g = torch.Generator().manual_seed(1)
    n, dim, wd = 400, 8, 0.05
    X = torch.randn(n, dim, generator=g, dtype=torch.float64) * torch.linspace(0.2, 3, dim, dtype=torch.float64)
    w_true = torch.randn(dim, generator=g, dtype=torch.float64)
    y = (torch.rand(n, generator=g, dtype=torch.float64) < torch.sigmoid(X @ w_true)).double()

    def objective(w):
        return F.binary_cross_entropy_with_logits(X @ w, y)

    ref = nn.Parameter(torch.zeros(dim, dtype=torch.float64))
    lbfgs = torch.optim.LBFGS([ref], max_iter=200, tolerance_grad=1e-12, tolerance_change=1e-15)

    def closure():
        lbfgs.zero_grad()
        loss = objective(ref) + wd / 2 * ref.pow(2).sum()
        loss.backward()
        return loss

    lbfgs.step(closure)
    w = nn.Parameter(torch.zeros(dim, dtype=torch.float64))
    opt = AdapSGD([w], weight_decay=wd)
    train([w], lambda: objective(w), opt, 400)
    assert (w.detach() - ref.detach()).norm() / ref.detach().norm() < 1e-3


def test_minibatch_logistic_regression_learns():
    # stochastic gradients (batches of 32): the noisy regime vSGD's memory is for
    g = torch.Generator().manual_seed(2)
    X = torch.randn(2048, 10, generator=g)
    y = (X @ torch.randn(10, generator=g) > 0).long()
    model = nn.Linear(10, 2)
    opt = AdapSGD(model.parameters(), weight_decay=0.05)
    for step in range(300):
        idx = torch.randint(0, 2048, (32,), generator=g)
        with opt.forward_context():
            loss = F.cross_entropy(model(X[idx]), y[idx])
        loss.backward(create_graph=opt.create_graph)
        opt.step()
        opt.zero_grad(set_to_none=True)
    acc = (model(X).argmax(1) == y).float().mean().item()
    assert acc > 0.95
    mem = opt.state[model.weight]["mem"]
    assert mem.mean() > 2  # noisy gradients lengthened the memory


def test_four_state_tensors_per_parameter_and_no_lr():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = AdapSGD(model.parameters())
    x = torch.randn(16, 4)
    train(None, lambda: model(x).pow(2).mean(), opt, 3)
    for p in model.parameters():
        st = opt.state[p]
        assert sorted(st) == sorted(STATE) and len(st) == 4
        assert all(torch.is_tensor(v) and v.shape == p.shape for v in st.values())
    assert "lr" not in opt.param_groups[0]
    assert opt.param_groups[0]["step"] == 3


def test_hessian_schedule_and_missing_graph_error():
    p = nn.Parameter(torch.ones(3))
    opt = AdapSGD([p], hessian_every=5)
    flags = []
    for _ in range(11):
        flags.append(opt.create_graph)
        (p ** 4).sum().backward(create_graph=opt.create_graph)
        opt.step()
        opt.zero_grad(set_to_none=True)
    assert flags == [True, False, False, False, False, True, False, False, False, False, True]
    q = nn.Parameter(torch.ones(3))
    opt = AdapSGD([q])
    (q ** 2).sum().backward()  # no create_graph on a Hessian step
    with pytest.raises(RuntimeError, match="create_graph=optimizer.create_graph"):
        opt.step()


def test_hessian_estimate_is_exact_for_a_diagonal_hessian():
    # f = sum c_i p_i^2 / 2: H = diag(c), and z * Hz = c exactly for any Rademacher z
    c = torch.tensor([0.5, 2.0, 8.0])
    p = nn.Parameter(torch.ones(3))
    opt = AdapSGD([p], weight_decay=0.0, max_grad_norm=None)
    (0.5 * c * p ** 2).sum().backward(create_graph=True)
    opt.step()
    # first step: the first curvature estimate is taken as is; t = 1/2 from mem = 2, so
    # avg_g = g / 2, avg_g2 = g^2 / 2 and x = avg_g^2 / (avg_h avg_g2) = 1 / (2 c)
    assert torch.allclose(opt.state[p]["avg_h"], c)
    x = 1 / (2 * c)
    assert torch.allclose(p.detach(), 1 - x / torch.sqrt(1 + x * x) * c)


def test_untouched_elements_stay_put():
    emb = nn.Embedding(10, 4)
    before = emb.weight.detach().clone()
    opt = AdapSGD(emb.parameters(), weight_decay=0.1)
    for _ in range(6):
        emb(torch.tensor([1, 3])).pow(2).sum().backward(create_graph=opt.create_graph)
        opt.step()
        opt.zero_grad(set_to_none=True)
    rest = [i for i in range(10) if i not in (1, 3)]
    assert torch.equal(emb.weight.detach()[rest], before[rest])
    assert not torch.equal(emb.weight.detach()[[1, 3]], before[[1, 3]])
    assert (opt.state[emb.weight]["mem"][rest] == 2).all()


def test_no_step_before_a_curvature_estimate():
    # row 2 first appears on step 1 (no Hessian): it waits for step 5, then moves
    emb = nn.Embedding(4, 3)
    opt = AdapSGD(emb.parameters(), weight_decay=0.0)
    rows = [[0], [0, 2], [0, 2], [0, 2], [0, 2], [0, 2]]
    history = []
    for r in rows:
        emb(torch.tensor(r)).pow(2).sum().backward(create_graph=opt.create_graph)
        opt.step()
        opt.zero_grad(set_to_none=True)
        history.append(emb.weight.detach()[2].clone())
    assert all(torch.equal(h, history[0]) for h in history[:5])
    assert not torch.equal(history[5], history[4])


def test_state_dict_round_trip_through_the_checkpoint_format(tmp_path):
    from superbloom.storage.checkpoint import _optimizer_state, load_optimizer
    from safetensors.torch import save_file
    from superbloom.storage.files import save_json

    torch.manual_seed(0)
    model = nn.Linear(5, 3)
    x, y = torch.randn(32, 5), torch.randint(0, 3, (32,))
    loss_fn = lambda: F.cross_entropy(model(x), y)  # noqa: E731
    opt = AdapSGD(model.parameters())
    train(None, loss_fn, opt, 7)
    tensors, meta = _optimizer_state(opt)
    assert meta["scalars"] == {}  # every state entry is a tensor
    save_file(tensors, str(tmp_path / "optimizer.safetensors"))
    save_json(tmp_path / "optimizer.json", meta)
    # continue twice: the original, and a copy restored from the files
    model2 = nn.Linear(5, 3)
    model2.load_state_dict(model.state_dict())
    opt2 = AdapSGD(model2.parameters())
    load_optimizer(opt2, tmp_path)
    assert opt2.param_groups[0]["step"] == 7
    train(None, loss_fn, opt, 6)
    train(None, lambda: F.cross_entropy(model2(x), y), opt2, 6)  # crosses a Hessian step (10)
    for a, b in zip(model.parameters(), model2.parameters()):
        assert torch.equal(a, b)


class TinyAttention(nn.Module):
    def __init__(self, d=8, heads=2, n_out=3):
        super().__init__()
        self.heads = heads
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, n_out)

    def forward(self, x, keep):  # x (B, T, d), keep (B, T)
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])  # (B, h, T, dh)
        y = y.transpose(1, 2).reshape(b, t, d)
        return self.out((y * keep[..., None]).sum(1) / keep.sum(1, keepdim=True))


def test_works_with_scaled_dot_product_attention():
    torch.manual_seed(0)
    model = TinyAttention()
    x = torch.randn(64, 6, 8)
    keep = torch.rand(64, 6) > 0.3
    keep[:, 0] = True
    y = (x[..., 0] * keep).sum(1).gt(0).long() + (x[..., 1] * keep).sum(1).gt(0).long()  # 3 classes
    opt = AdapSGD(model.parameters(), weight_decay=0.05)
    first = F.cross_entropy(model(x, keep), y).item()
    last = train(None, lambda: F.cross_entropy(model(x, keep), y), opt, 60)
    assert last < 0.7 * first
    # without the math backend the fused CPU kernel has no double backward
    opt.param_groups[0]["step"] = 0
    with pytest.raises(RuntimeError, match="not implemented"):
        F.cross_entropy(model(x, keep), y).backward(create_graph=True)
        opt.step()


def test_trains_the_library_set_model_through_the_loop_contract(wiki_data):
    # the encoder's fused SDPA needs forward_context() on Hessian steps; loss falls on a fixed batch
    import numpy as np

    import superbloom as sb
    from superbloom.model.batches import MaskConfig, training_batch
    from superbloom.hashing.bloom import BloomHash
    from superbloom.model.encoder import build_model

    torch.manual_seed(0)
    hashing = BloomHash.build(wiki_data.n_ids, sb.HashConfig(alpha=8, m=2))
    model = build_model(sb.ModelConfig(d=32, heads=2, d_ff=64, layers=1, dropout=0.0),
                        sb.SuperbloomConfig(), hashing).train()
    rng = np.random.default_rng(0)
    batch = training_batch(wiki_data.train, rng.choice(len(wiki_data.train.lengths), 16), hashing, MaskConfig(), rng)
    opt = AdapSGD(model.parameters())
    first = model(batch).item()
    last = train(None, lambda: model(batch), opt, 11)
    assert np.isfinite(last) and last < first
    assert all(len(opt.state[p]) == 4 for p in model.parameters())


def test_the_training_loops_train_step_drives_it(wiki_data):
    # superbloom.training.loop.train_step: forward_context, backward(create_graph), its own clip, opt.step()
    import numpy as np

    import superbloom as sb
    from superbloom.model.batches import MaskConfig, training_batch
    from superbloom.hashing.bloom import BloomHash
    from superbloom.model.encoder import build_model
    from superbloom.training.optim import OptimConfig
    from superbloom.training.loop import train_step

    torch.manual_seed(0)
    hashing = BloomHash.build(wiki_data.n_ids, sb.HashConfig(alpha=8, m=2))
    model = build_model(sb.ModelConfig(d=32, heads=2, d_ff=64, layers=1, dropout=0.0),
                        sb.SuperbloomConfig(), hashing).train()
    rng = np.random.default_rng(0)
    batch = training_batch(wiki_data.train, rng.choice(len(wiki_data.train.lengths), 16), hashing, MaskConfig(), rng)
    opt = AdapSGD(model.parameters(), weight_decay=0.0)
    losses = [train_step(model, model, opt, batch, OptimConfig(name="adapsgd"), step)[0] for step in range(1, 12)]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    assert opt.param_groups[0]["step"] == 11 and "lr" not in opt.param_groups[0]


def test_cli_trains_with_adapsgd_and_kernel_attention(wiki_data, tmp_path, capsys):
    """The optimizer factory and the attention option through `superbloom train`, end to end:
    6 steps (a Hessian step at 0 and 5), checkpoints, and a model that loads and predicts."""
    import superbloom as sb
    from superbloom.cli import main
    from superbloom.storage.files import load_json

    out = tmp_path / "m"
    assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(out), "--steps", "6", "--optimizer", "adapsgd",
                 "--attention", "kernel", "--d", "16", "--heads", "4", "--d-ff", "32", "--layers", "1",
                 "--batch-size", "16", "--eval-every", "0", "--val-fraction", "0.01", "--quiet", "--threads", "1"]) == 0
    cfg = load_json(out / "config.json")
    assert cfg["model"]["attention"] == "kernel" and cfg["train"]["optim"]["name"] == "adapsgd"
    assert len(sb.load(out).predict(["Jazz"], k=5).items) == 5
