"""Training, decoding and serving on a GPU (`--device cuda`), and models moving between devices.

Skipped, saying so, where torch sees no CUDA GPU. The head contract table (test_heads.py) and the
decoding property tests (test_decode.py) also run on CUDA there, through conftest.DEVICES. The
last test runs everywhere: asking for CUDA without one is a clear error, and `auto` falls back.
"""
import json
import logging

import pytest
import torch

import superbloom as sb
from superbloom.storage.checkpoint import latest_checkpoint
from superbloom.cli import main
from superbloom.model.device import resolve_device

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA GPU: torch.cuda.is_available() is False on this machine")

TINY = ["--d", "32", "--heads", "2", "--d-ff", "64", "--layers", "1", "--batch-size", "32", "--eval-every", "3",
        "--val-fraction", "0.01", "--quiet"]


@needs_cuda
def test_train_on_cuda_then_load_on_cpu_and_cuda(wiki_data, tmp_path, caplog):
    out = tmp_path / "gpu"
    with caplog.at_level(logging.INFO, logger="superbloom"):  # the model line is logged (_log.py), not printed
        assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(out), "--steps", "6", "--device", "cuda",
                     *TINY]) == 0
    assert "device cuda:0" in caplog.text
    on_cpu, on_gpu = sb.load(out, device="cpu"), sb.load(out, device="cuda")
    assert next(on_gpu.model.parameters()).is_cuda and not next(on_cpu.model.parameters()).is_cuda
    a = on_cpu.predict(["Jazz", "Miles_Davis"], k=10, decode=sb.DecodeConfig(exact=True))
    b = on_gpu.predict(["Jazz", "Miles_Davis"], k=10, decode=sb.DecodeConfig(exact=True))
    assert [s for _, s in a.items] == pytest.approx([s for _, s in b.items], abs=1e-4)


@needs_cuda
def test_resume_a_cpu_run_on_cuda(wiki_data, tmp_path):
    out = tmp_path / "moved"
    assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(out), "--steps", "3", "--device", "cpu", *TINY]) == 0
    assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(out), "--steps", "6", "--device", "cuda", "--resume",
                 *TINY]) == 0
    assert json.loads((latest_checkpoint(out) / "state.json").read_text())["step"] == 6


@needs_cuda
@pytest.mark.parametrize("head", ["superbloom", "full", "hierarchical"])
def test_eval_on_cuda_matches_cpu(wiki_data, tmp_path, head, capsys):
    out = tmp_path / head
    extra = ["--alpha", "1", "--m", "1"] if head == "full" else []
    assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(out), "--steps", "4", "--head", head, *extra, *TINY]) == 0
    results = {}
    for device in ("cpu", "cuda"):
        capsys.readouterr()
        assert main(["eval", str(out), str(wiki_data.path), "--json", "--max-sets", "40", "--baselines", "none",
                     "--device", device, "--exact"]) == 0
        results[device] = json.loads(capsys.readouterr().out)
    for key in ("rec@1", "rec@10", "rec@20"):
        assert results["cpu"][key] == pytest.approx(results["cuda"][key], abs=0.03)


def test_more_processes_than_gpus(monkeypatch):
    """torchrun with more processes on a machine than it has GPUs (found on a one-GPU machine: rank 1
    asked for cuda:1 and died): auto puts every rank on the CPU, cuda says what to do. Faked GPUs, so
    this runs everywhere."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("auto", local_rank=1, local_world=2) == torch.device("cpu")
    assert resolve_device("auto", local_rank=0, local_world=1) == torch.device("cuda", 0)
    assert resolve_device("cuda", local_rank=0, local_world=1) == torch.device("cuda", 0)
    with pytest.raises(ValueError, match=r"2 processes on this machine but torch sees 1 CUDA GPU\(s\).*"
                                         r"--nproc_per_node\) or use --device cpu"):
        resolve_device("cuda", local_rank=1, local_world=2)


def test_device_choice_without_a_gpu_is_explained(wiki_data, tmp_path, capsys):
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="device must be auto, cpu, cuda or cuda:N"):
        resolve_device("tpu")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the no-GPU message cannot be shown")
    assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(tmp_path / "m"), "--steps", "2", "--device", "cuda",
                 *TINY]) == 2
    assert "torch sees no CUDA GPU here; use --device cpu (or auto)" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()
    assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(tmp_path / "m"), "--steps", "2", "--device", "auto",
                 *TINY]) == 0
    assert "device cpu" in capsys.readouterr().err  # the run's lines are log lines (stderr)
