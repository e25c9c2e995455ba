"""Row-sparse gradients (heads/rows.py) and what a step does with them: the lazy AdamW rows
(optim.RowAdamW), the weight average brought up to date per row (average.py), the norm and the
clipping (gradients.py), and a training run that resumes bit for bit."""
import numpy as np
import pytest
import torch
import torch.nn as nn

import superbloom as sb
from superbloom.heads import HybridConfig
from superbloom.heads.rows import declare_rows, gather_rows, sparse_rows
from superbloom.model.embeddings import TokenEmbedding
from superbloom.training.average import WeightAverage
from superbloom.training.gradients import StepGradients
from superbloom.training.optim import RowAdamW


class Table(nn.Module):
    """A table read by rows (and a dense weight beside it), as the model's embedding and heads are."""

    def __init__(self, n=40, d=3):
        super().__init__()
        self.rows = nn.Parameter(torch.randn(n, d))
        self.bias = nn.Parameter(torch.randn(n))
        self.dense = nn.Parameter(torch.randn(d))
        declare_rows(self, ("rows", "bias"))

    def forward(self, idx, y):
        r = gather_rows(self.rows, idx, self.sparse_rows)  # (K, d)
        b = gather_rows(self.bias, idx, self.sparse_rows)  # (K,)
        return (((r * self.dense).sum(-1) + b - y) ** 2).mean()


def _step_data(seed, n=40, k=12):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, n, (k,), generator=g), torch.randn(k, generator=g)  # rows repeat


def test_gather_rows_gives_the_dense_gradient_as_rows():
    dense, sparse = Table(), Table()
    sparse.load_state_dict(dense.state_dict())
    assert [id(t) for t in sparse_rows(sparse)] == [id(sparse.rows), id(sparse.bias)]
    idx, y = _step_data(0)
    dense(idx, y).backward()
    sparse(idx, y).backward()
    assert not dense.rows.grad.is_sparse and sparse.rows.grad.is_sparse and sparse.bias.grad.is_sparse
    assert torch.allclose(sparse.rows.grad.to_dense(), dense.rows.grad, atol=1e-6)
    assert torch.allclose(sparse.bias.grad.to_dense(), dense.bias.grad, atol=1e-6)
    with torch.no_grad():  # no gradient: plain indexing
        assert torch.equal(gather_rows(sparse.rows, idx, True), sparse.rows[idx])


def test_token_embedding_is_an_embedding_with_row_gradients():
    emb = TokenEmbedding(30, 4)
    tokens = torch.tensor([[1, 2, 2], [5, 0, 1]])
    emb(tokens).sum().backward()
    dense = emb.weight.grad.clone()
    emb.weight.grad = None
    sparse_rows(emb)
    emb(tokens).sum().backward()
    assert emb.weight.grad.is_sparse and torch.equal(emb.weight.grad.to_dense(), dense)
    assert list(emb.state_dict()) == ["weight"]


@pytest.mark.parametrize("fused", [False, True])
def test_one_lazy_step_is_adamw_on_the_rows_read_and_leaves_the_others(fused):
    """From a fresh state a step of dense AdamW moves only the rows with a gradient: the lazy step is that step."""
    dense, lazy = Table(), Table()
    lazy.load_state_dict(dense.state_dict())
    sparse_rows(lazy)
    kw = dict(lr=0.01, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.0, fused=fused or None)
    ref = torch.optim.AdamW(dense.parameters(), foreach=False, **kw) if not fused else torch.optim.AdamW(
        dense.parameters(), **kw)
    opt = RowAdamW(lazy.parameters(), **kw)
    idx, y = _step_data(1)
    dense(idx, y).backward()
    lazy(idx, y).backward()
    for p in lazy.parameters():
        if p.grad.is_sparse:
            p.grad = p.grad.coalesce()
    before = lazy.rows.detach().clone()
    ref.step()
    opt.step()
    read = torch.unique(idx)
    other = torch.tensor([i for i in range(40) if i not in set(read.tolist())])
    assert torch.allclose(lazy.rows[read], dense.rows[read], rtol=0, atol=1e-7)
    assert torch.allclose(lazy.bias, dense.bias, rtol=0, atol=1e-7)
    assert torch.equal(lazy.rows[other], before[other])  # untouched rows unchanged
    assert torch.equal(lazy.dense, dense.dense)  # a dense gradient: AdamW's own kernel
    st, ref_st = opt.state[lazy.rows], ref.state[dense.rows]
    assert torch.allclose(st["exp_avg"], ref_st["exp_avg"], atol=1e-8)
    assert torch.allclose(st["exp_avg_sq"], ref_st["exp_avg_sq"], atol=1e-10)
    assert float(st["step"]) == float(ref_st["step"]) == 1.0


def test_rows_read_every_step_follow_adamw_and_dense_gradients_are_adamw_bit_for_bit():
    dense, lazy, plain = Table(), Table(), Table()
    lazy.load_state_dict(dense.state_dict())
    plain.load_state_dict(dense.state_dict())
    sparse_rows(lazy)
    kw = dict(lr=0.01, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.01)
    ref, opt = torch.optim.AdamW(dense.parameters(), foreach=False, **kw), RowAdamW(lazy.parameters(), **kw)
    ref_plain, opt_plain = torch.optim.AdamW(plain.parameters(), **kw), None
    twin = Table()
    twin.load_state_dict(dense.state_dict())
    opt_plain = RowAdamW(twin.parameters(), **kw)  # no sparse rows: the dense gradients AdamW takes
    every = torch.arange(40).repeat(2)
    for s in range(5):
        y = torch.randn(80, generator=torch.Generator().manual_seed(s))
        for model, o in ((dense, ref), (lazy, opt), (plain, ref_plain), (twin, opt_plain)):
            o.zero_grad(set_to_none=True)
            model(every, y).backward()
            for p in model.parameters():
                if p.grad.is_sparse:
                    p.grad = p.grad.coalesce()
            o.step()
    for a, b in zip(lazy.parameters(), dense.parameters()):
        assert torch.allclose(a, b, rtol=0, atol=1e-6)
    for a, b in zip(twin.parameters(), plain.parameters()):
        assert torch.equal(a, b)


def test_a_checkpointed_row_adamw_resumes_and_reads_adamw_state():
    """RowAdamW keeps AdamW's state layout: a state dict of one loads into the other."""
    a = Table()
    sparse_rows(a)
    opt = RowAdamW(a.parameters(), lr=0.01)
    idx, y = _step_data(2)
    a(idx, y).backward()
    a.rows.grad = a.rows.grad.coalesce()
    a.bias.grad = a.bias.grad.coalesce()
    opt.step()
    other = torch.optim.AdamW(Table().parameters(), lr=0.01)
    other.load_state_dict(opt.state_dict())
    assert set(other.state_dict()["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}


def test_clip_of_row_gradients_is_the_clip_of_their_dense_form():
    sparse, dense = Table(), Table()
    dense.load_state_dict(sparse.state_dict())
    tables = sparse_rows(sparse)
    idx, y = _step_data(3)
    sparse(idx, y).backward()
    dense(idx, y).backward()
    grads = StepGradients(sparse, tables)
    grads.reduce()
    norm = grads.clip(0.05)
    ref = float(torch.nn.utils.clip_grad_norm_(dense.parameters(), 0.05))
    assert norm == pytest.approx(ref, rel=1e-6)
    for a, b in zip(sparse.parameters(), dense.parameters()):
        g = a.grad.to_dense() if a.grad.is_sparse else a.grad
        assert torch.allclose(g, b.grad, atol=1e-7)
    assert set(grads.touched()) == {sparse.rows, sparse.bias}
    assert torch.equal(grads.touched()[sparse.rows], torch.unique(idx))


def test_lazy_average_is_the_dense_average():
    """Rows brought up to date only when they change equal an average of every row at every step."""
    lazy_model, dense_model = Table(), Table()
    dense_model.load_state_dict(lazy_model.state_dict())
    tables = sparse_rows(lazy_model)
    lazy, dense = WeightAverage(lazy_model, 0.9, tables), WeightAverage(dense_model, 0.9)
    g = torch.Generator().manual_seed(0)
    for step in range(40):
        rows = torch.unique(torch.randint(0, 40, (5,), generator=g))
        delta, bias, dd = torch.randn(len(rows), 3, generator=g), torch.randn(len(rows), generator=g), torch.randn(3, generator=g)
        lazy.before_step({lazy_model.rows: rows, lazy_model.bias: rows})
        with torch.no_grad():
            for m in (lazy_model, dense_model):
                m.rows[rows] += delta
                m.bias[rows] += bias
                m.dense += dd
        lazy.update(step)
        dense.update(step)
        if step == 20:  # a checkpoint's state goes on as the uninterrupted one
            again = WeightAverage(lazy_model, 0.9, tables)
            again.load({k: v.clone() for k, v in lazy.tensors().items()})
            lazy = again
    for a, b in zip(lazy.averaged(), dense.shadow):
        assert torch.allclose(a, b, atol=1e-5)
    with lazy.swapped():
        assert torch.allclose(lazy_model.rows, dense.shadow[0], atol=1e-5)
    assert not torch.allclose(lazy_model.rows, dense.shadow[0], atol=1e-5)  # the trained weights back


def test_sparse_training_resumes_bit_for_bit(wiki_data, tmp_path):
    """Sampled negatives (row-sparse gradients on), the weight average validated: stopping at step 4
    and resuming to 8 gives the weights and the average of an uninterrupted 8-step run."""
    from safetensors.torch import load_file

    from superbloom.storage.checkpoint import latest_checkpoint, load_extra

    def run(out, steps, resume):
        cfg = sb.TrainConfig(data=str(wiki_data.path), out=str(out), hash=sb.HashConfig(alpha=1, m=1),
                             model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1),
                             head=HybridConfig(samples=64, neighbours=10),
                             loop=sb.LoopConfig(steps=steps, batch_size=16, eval_every=3, checkpoint_every=1e9))
        sb.train(cfg, progress=False, resume=resume)

    run(tmp_path / "whole", 8, False)
    run(tmp_path / "split", 4, False)
    run(tmp_path / "split", 8, True)
    whole, split = (latest_checkpoint(tmp_path / n) for n in ("whole", "split"))
    a, b = load_file(str(whole / "model.safetensors")), load_file(str(split / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ea, eb = load_extra(whole, "ema"), load_extra(split, "ema")
    assert "kept" in ea and ea.keys() == eb.keys() and all(torch.equal(ea[k], eb[k]) for k in ea)


def test_models_are_built_with_dense_gradients():
    """Outside the training loop nothing is sparse: any torch optimizer trains a built model."""
    from superbloom.data.dataset import SetArray
    from superbloom.model.batches import MaskConfig, training_batch
    from superbloom.model.encoder import build_model

    hashing = sb.BloomHash.build(50, sb.HashConfig(alpha=1, m=1))
    model = build_model(sb.ModelConfig(d=8, heads=2, d_ff=16, layers=1), HybridConfig(samples=8), hashing)
    rng = np.random.default_rng(0)
    sets = SetArray(np.arange(0, 61, 6, dtype=np.int64), rng.integers(0, 50, 60).astype(np.int32))

    model.train()
    model(training_batch(sets, np.arange(10), hashing, MaskConfig(), rng)).backward()
    assert not any(p.grad.is_sparse for p in model.parameters() if p.grad is not None)
