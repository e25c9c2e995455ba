"""One code path for 1 and N processes: two gloo ranks under torchrun train, rank 0 writes, and a
run stopped and resumed on two ranks equals the uninterrupted one (per-rank RNG state), with dense
and with row-sparse gradients (which DDP leaves to the loop: averaged over the ranks by
training/gradients.py, so every rank holds the same gradient and the same weights); two torchrun
agents on one host, one per node rank, meet by a c10d rendezvous as two machines would."""
import os
import socket
import pytest
import subprocess
import sys

import torch

import superbloom as sb


@pytest.mark.slow
def test_torchrun_two_ranks(wiki_data, tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()),
           "-m", "superbloom", "--", "train", "--preset", "none", str(wiki_data.path), "--out", str(tmp_path / "m"), "--steps", "4",
           "--batch-size", "16", "--d", "16", "--heads", "2", "--d-ff", "32", "--layers", "1", "--quiet",
           "--eval-every", "0"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr.count(" parameters (") == 1  # rank 0 alone reports (logging, on stderr) and writes
    assert (tmp_path / "m" / "LATEST").read_text().strip().endswith("step-000000004")
    model = sb.load(tmp_path / "m")
    assert len(model.predict(["Jazz"], k=5).items) == 5


def _ranks_run(data, out, *extra):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()),
           "-m", "superbloom", "--", "train", "--preset", "none", str(data.path), "--out", str(out), "--batch-size", "16", "--d", "16",
           "--heads", "2", "--d-ff", "32", "--layers", "1", "--quiet", "--eval-every", "0", "--dropout", "0.1",
           "--checkpoint-every", "100000", "--threads", "1", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# the superbloom head with a sampled softmax over tokens: row-sparse gradients, validated
# (the weight average's rows brought up to date per row)
SPARSE = ("--head", "superbloom", "--alpha", "4", "--samples", "64", "--eval-every", "3")


@pytest.mark.slow
@pytest.mark.parametrize("head", [(), SPARSE], ids=["dense", "row-sparse"])
def test_two_ranks_kill_and_resume_give_the_same_run(wiki_data, tmp_path, head):
    """Each rank's RNG streams are checkpointed: stopping at step 3 and resuming to step 6 gives the
    very weights of an uninterrupted 6-step run (same data order, masks and dropout on every rank)."""
    from safetensors.torch import load_file

    from superbloom.storage.checkpoint import latest_checkpoint, load_extra
    from superbloom.storage.files import load_json

    _ranks_run(wiki_data, tmp_path / "whole", "--steps", "6", *head)
    _ranks_run(wiki_data, tmp_path / "split", "--steps", "3", *head)
    state = load_json(latest_checkpoint(tmp_path / "split") / "state.json")
    assert state["world"] == 2 and set(state["rng"]) == {"0", "1"} and state["rng"]["0"] != state["rng"]["1"]
    r = _ranks_run(wiki_data, tmp_path / "split", "--steps", "6", "--resume", *head)
    assert "resuming from step-000000003" in r.stderr
    whole = load_file(str(latest_checkpoint(tmp_path / "whole") / "model.safetensors"))
    split = load_file(str(latest_checkpoint(tmp_path / "split") / "model.safetensors"))
    assert whole.keys() == split.keys()
    for name in whole:
        assert torch.equal(whole[name], split[name]), name
    if head:
        a, b = (load_extra(latest_checkpoint(tmp_path / n), "ema") for n in ("whole", "split"))
        assert "kept" in a and a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _sync_worker(rank: int, world: int, port: int, out: str) -> None:
    """Two gloo ranks train a model with sampled softmax under DDP for a few steps, each on its own
    rows: the row tables' gradients (sparse, different rows on each rank) are averaged by the loop
    (StepGradients), so both ranks end with the same weights; rank 0 also checks one reduced
    gradient against the mean of the ranks' dense gradients."""
    import numpy as np
    import torch.distributed as dist

    from superbloom.data.dataset import SetArray
    from superbloom.heads import head_config
    from superbloom.heads.rows import sparse_rows
    from superbloom.model.batches import MaskConfig, training_batch
    from superbloom.model.device import Dist
    from superbloom.model.encoder import build_model
    from superbloom.training.gradients import StepGradients
    from superbloom.training.optim import OptimConfig, make_optimizer

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    hashing = sb.BloomHash.build(200, sb.HashConfig(alpha=4, m=2))
    sets = SetArray(np.arange(0, 401, 10, dtype=np.int64), np.random.default_rng(0).integers(0, 200, 400).astype(np.int32))
    torch.manual_seed(0)
    model = build_model(sb.ModelConfig(d=8, heads=2, d_ff=16, layers=1, dropout=0.0),
                        head_config("superbloom", samples=16), hashing, np.bincount(sets.ids, minlength=200))
    opt = make_optimizer(OptimConfig(lr=0.01, warmup=1), model.parameters())
    tables = sparse_rows(model)
    ignored = [n for n, p in model.named_parameters() if any(p is t for t in tables)]
    torch.nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, ignored)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    grads = StepGradients(model, tables, Dist(rank, world, torch.device("cpu")))
    rng = np.random.default_rng([1, rank])
    for step in range(4):
        batch = training_batch(sets, rng.choice(len(sets), 4, replace=False), hashing, MaskConfig(), rng)
        torch.manual_seed(100 * step + rank)  # each rank draws its own negatives: different rows
        opt.zero_grad(set_to_none=True)
        ddp(batch).backward()
        emb = model.encoder.embed.weight
        mine = emb.grad.coalesce().to_dense()
        grads.reduce()
        every = [torch.zeros_like(mine) for _ in range(world)]
        dist.all_gather(every, mine)
        assert emb.grad.is_sparse and torch.allclose(emb.grad.to_dense(), sum(every) / world, atol=1e-7)
        grads.clip(1.0)
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    every = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(every, flat)
    assert all(torch.equal(every[0], e) for e in every)
    dist.destroy_process_group()
    if rank == 0:
        open(out, "w").write("ok")


def test_row_sparse_gradients_are_averaged_over_ranks_and_the_ranks_stay_equal(tmp_path):
    import torch.multiprocessing as mp

    out = tmp_path / "ok"
    mp.spawn(_sync_worker, args=(2, _free_port(), str(out)), nprocs=2, join=True)
    assert out.read_text() == "ok"


@pytest.mark.slow
def test_two_node_ranks_meet_by_a_c10d_rendezvous(wiki_data, tmp_path):
    """The multi-node launch of docs/guides/millions.md, as two node ranks on one host: each torchrun
    agent starts one process; they meet at the c10d rendezvous endpoint, train as ranks 0 and 1
    (gloo), and rank 0 writes the model."""
    from superbloom.storage.checkpoint import latest_checkpoint
    from superbloom.storage.files import load_json

    port = _free_port()
    agents = [subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node), "--nproc-per-node",
         "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "step-test",
         "-m", "superbloom", "--", "train", "--preset", "none", str(wiki_data.path), "--out", str(tmp_path / "m"),
         "--steps", "4", "--batch-size", "16", "--d", "16", "--heads", "2", "--d-ff", "32", "--layers", "1",
         "--quiet", "--eval-every", "0", "--threads", "1", *SPARSE[:-2]],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for node in (0, 1)]
    outs = [a.communicate(timeout=600) for a in agents]
    for a, (_, err) in zip(agents, outs):
        assert a.returncode == 0, err[-3000:]
    state = load_json(latest_checkpoint(tmp_path / "m") / "state.json")
    assert state["step"] == 4 and state["world"] == 2 and set(state["rng"]) == {"0", "1"}
    assert len(sb.load(tmp_path / "m").predict(["Jazz"], k=5).items) == 5
