"""One code path for 1 and N processes: two gloo ranks under torchrun train, rank 0 writes, and a
run stopped and resumed on two ranks equals the uninterrupted one (per-rank RNG state)."""
import pytest
import subprocess
import sys

import torch

import superbloom as sb


@pytest.mark.slow
def test_torchrun_two_ranks(wiki_data, tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29561",
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
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29562",
           "-m", "superbloom", "--", "train", "--preset", "none", str(data.path), "--out", str(out), "--batch-size", "16", "--d", "16",
           "--heads", "2", "--d-ff", "32", "--layers", "1", "--quiet", "--eval-every", "0", "--dropout", "0.1",
           "--checkpoint-every", "100000", "--threads", "1", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


@pytest.mark.slow
def test_two_ranks_kill_and_resume_give_the_same_run(wiki_data, tmp_path):
    """Each rank's RNG streams are checkpointed: stopping at step 3 and resuming to step 6 gives the
    very weights of an uninterrupted 6-step run (same data order, masks and dropout on every rank)."""
    from safetensors.torch import load_file

    from superbloom.storage.checkpoint import latest_checkpoint
    from superbloom.storage.files import load_json

    _ranks_run(wiki_data, tmp_path / "whole", "--steps", "6")
    _ranks_run(wiki_data, tmp_path / "split", "--steps", "3")
    state = load_json(latest_checkpoint(tmp_path / "split") / "state.json")
    assert state["world"] == 2 and set(state["rng"]) == {"0", "1"} and state["rng"]["0"] != state["rng"]["1"]
    r = _ranks_run(wiki_data, tmp_path / "split", "--steps", "6", "--resume")
    assert "resuming from step-000000003" in r.stderr
    whole = load_file(str(latest_checkpoint(tmp_path / "whole") / "model.safetensors"))
    split = load_file(str(latest_checkpoint(tmp_path / "split") / "model.safetensors"))
    assert whole.keys() == split.keys()
    for name in whole:
        assert torch.equal(whole[name], split[name]), name
