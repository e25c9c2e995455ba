"""Shared fixtures: tiny hand-made inputs, the embedded Wikispeedia links, ../shared/data, a tiny model
trained on the links, and `superbloom serve` running it on a loopback port."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

import superbloom as sb

# ../shared/data beside the checkout; SUPERBLOOM_SHARED_DATA points elsewhere (a worktree in /work/wt/NAME)
SHARED_DATA = Path(os.environ.get("SUPERBLOOM_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")

# The devices the contract tables and property tests run on: always the CPU, and CUDA where torch
# sees a GPU (tests/test_cuda.py holds the tests that need one and skips, saying so, without it).
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

# Test tensors are tiny: one thread is as fast, and OpenMP threads stall badly when the cores are shared.
torch.set_num_threads(1)


def shared_file(*parts: str) -> Path:
    """A file from ../shared/data, or skip the test with the reason."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"needs {path} (the shared datasets are not beside this checkout)")
    return path


def walking_sequences(root: Path, users: int, seed: int = 0, name: str = "d") -> Path:
    """A tiny leave-one-out dataset where order is everything: each user walks item i -> i + 1 (mod 20)
    for 4-9 steps from a random start. -> the prepared directory root/name."""
    rng = np.random.default_rng(seed)
    lines = [f"u{u} " + " ".join(f"i{(s + j) % 20}" for j in range(n))
             for u, (s, n) in enumerate(zip(rng.integers(0, 20, users), rng.integers(4, 10, users)))]
    (root / "seq.txt").write_text("\n".join(lines) + "\n")
    sb.prepare(sb.PrepareConfig(str(root / "seq.txt"), str(root / name), read=sb.ReadConfig(format="lines"),
                                split="leave-one-out"), progress=False)
    return root / name


@pytest.fixture(scope="session")
def wiki_data(tmp_path_factory) -> sb.Dataset:
    """The embedded Wikispeedia links, prepared once per session."""
    out = tmp_path_factory.mktemp("wiki") / "data"
    sb.prepare(sb.PrepareConfig(str(sb.embedded_dataset()), str(out)), progress=False)
    return sb.Dataset(out)


@pytest.fixture(scope="session")
def wiki_small(tmp_path_factory) -> sb.Dataset:
    """About 200 pages of the embedded Wikispeedia links (every 20th page, all its links), prepared once
    per session: real sets for the tests that train end to end, at a twentieth of the full cost."""
    import gzip

    root = tmp_path_factory.mktemp("wiki_small")
    with gzip.open(sb.embedded_dataset(), "rt", encoding="utf-8") as f:
        links = [line for line in f if line.strip() and not line.startswith("#")]
    pages = sorted({line.split("\t", 1)[0] for line in links})[::20]
    keep = set(pages)
    (root / "links.tsv").write_text("".join(line for line in links if line.split("\t", 1)[0] in keep))
    sb.prepare(sb.PrepareConfig(str(root / "links.tsv"), str(root / "data"), read=sb.ReadConfig(format="edges")),
               progress=False)
    return sb.Dataset(root / "data")


@pytest.fixture()
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def tiny_model(wiki_data, tmp_path_factory) -> Path:
    """A tiny model trained for a few steps on the embedded Wikispeedia links (seconds)."""
    out = tmp_path_factory.mktemp("tiny") / "model"
    model = sb.ModelConfig(d=32, heads=2, d_ff=64, layers=1)
    cfg = sb.TrainConfig(data=str(wiki_data.path), out=str(out), hash=sb.HashConfig(alpha=8), model=model,
                         loop=sb.LoopConfig(steps=6, batch_size=32, eval_every=0))
    sb.train(cfg, progress=False)
    return out


@pytest.fixture(scope="session")
def tiny_predictor(tiny_model) -> sb.Predictor:
    return sb.load(tiny_model)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(argv: list[str], log: Path, port: int):
    """A server process (`python ARGV...`, listening on `port`) that answers /health -> its base URL;
    stopped after the block. Its output goes to `log`, shown if it exits or never answers."""
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, *argv], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    try:
        while time.time() < deadline:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                if proc.poll() is not None:
                    pytest.fail(f"server exited: {log.read_text()}")
                time.sleep(0.2)
        else:
            pytest.fail(f"server did not answer /health within 120 s: {log.read_text()}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def server(tiny_model, tmp_path_factory):
    """`superbloom serve` in a subprocess on a free loopback port -> base URL."""
    port = _free_port()
    with serving(["-m", "superbloom", "serve", str(tiny_model), "--port", str(port), "--max-context", "16",
                  "--no-access-log"], tmp_path_factory.mktemp("serve") / "server.log", port) as url:
        yield url


@pytest.fixture(scope="module")
def tiny_hybrid(wiki_data, tmp_path_factory):
    """A tiny hybrid model (unhashed network + co-occurrence term), its mix set as a validation would; one per
    test module (a module may change it)."""
    from superbloom.heads.config import head_config

    out = tmp_path_factory.mktemp("hybrid") / "model"
    sb.train(sb.TrainConfig(data=str(wiki_data.path), out=str(out), hash=sb.HashConfig(alpha=1, m=1),
                            model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1),
                            head=head_config("hybrid", neighbours=20, term="cooccurrence"),
                            loop=sb.LoopConfig(steps=3, batch_size=32, eval_every=0)), progress=False)
    pred = sb.load(out)
    pred.model.head.mix.fill_(10.0)
    return pred
