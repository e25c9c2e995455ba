"""Memory-mapped weights (mapped.py) and `serve --workers N` (serve.py), issue 14."""
import re
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import superbloom as sb
from superbloom.storage.checkpoint import inference_checkpoint
from superbloom.heads.beam import DecodeConfig
from superbloom.storage.mapped import is_mapped, map_safetensors

from conftest import _free_port


def test_map_safetensors_round_trip(tmp_path):
    tensors = {"a": torch.randn(3, 5), "b": torch.arange(7, dtype=torch.int64), "c": torch.tensor(2.5),
               "d": torch.randn(4, dtype=torch.float64), "e": torch.tensor([True, False]),
               "f": torch.randn(2, 3).to(torch.bfloat16)}
    save_file(tensors, str(tmp_path / "t.safetensors"))
    got = map_safetensors(tmp_path / "t.safetensors")
    assert set(got) == set(tensors)
    for k, v in tensors.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape and torch.equal(got[k], v), k
    assert is_mapped(got["a"], tmp_path / "t.safetensors") and not is_mapped(torch.randn(100), tmp_path / "t.safetensors")
    got["a"] += 1  # copy-on-write: the process' own page, never the file
    assert torch.equal(map_safetensors(tmp_path / "t.safetensors")["a"], tensors["a"])


def test_predictor_weights_are_mapped_and_rank_the_same(tiny_model):
    mapped, copied = sb.load(tiny_model, device="cpu"), sb.load(tiny_model, device="cpu", mmap=False)
    path = inference_checkpoint(tiny_model) / "model.safetensors"
    params = dict(mapped.model.named_parameters())
    assert params and all(is_mapped(p, path) for p in params.values())
    assert not any(is_mapped(p, path) for p in copied.model.parameters())
    # the tie of the token embedding and the output layer survives the assignment
    assert mapped.model.head.embedding.weight is mapped.model.encoder.embed.weight
    ctx = np.array([[0, 5, 9, -1], [3, -1, -1, -1]])
    a, b = mapped.rank(ctx, 10), copied.rank(ctx, 10)
    assert np.array_equal(a.ids, b.ids) and np.allclose(a.scores, b.scores)
    ex_a, ex_b = (m.rank(ctx, 10, sb.DecodeConfig(exact=True)) for m in (mapped, copied))
    assert np.array_equal(ex_a.ids, ex_b.ids)


def test_hash_maps_are_mapped_and_the_head_shares_them(tiny_model):
    """The hash maps come from hashing.safetensors' pages (shared by serve's workers); the superbloom
    head's decoding tables are int32 views of them, not int64 copies; ranking is unchanged."""
    path = tiny_model / "hashing.safetensors"
    mapped, copied = sb.load(tiny_model, device="cpu"), sb.load(tiny_model, device="cpu", mmap=False)
    for name in ("buckets", "inverse"):
        a, b = getattr(mapped.hashing, name), getattr(copied.hashing, name)
        assert np.array_equal(a, b) and a.dtype == b.dtype == np.int32
        assert is_mapped(torch.from_numpy(a), path) and not is_mapped(torch.from_numpy(b), path)
        table = getattr(mapped.model.head, name)
        assert table.dtype == torch.int32 and table.data_ptr() == a.ctypes.data  # a view, no copy
    assert mapped.hashing.alpha == copied.hashing.alpha == 8 and mapped.hashing.n_tokens == copied.hashing.n_tokens
    for decode in (DecodeConfig(), DecodeConfig(exact=True), DecodeConfig(exhaustive=True)):
        a = mapped.predict(["Copenhagen", "Aarhus"], 10, decode)
        b = copied.predict(["Copenhagen", "Aarhus"], 10, decode)
        assert a == b


def _pss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Pss:"))


@pytest.mark.slow
def test_serve_workers_share_one_port(tiny_model, tmp_path):
    port = _free_port()
    log = tmp_path / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "superbloom", "serve", str(tiny_model), "--port", str(port),
                                 "--workers", "2", "--no-access-log"], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline, up = time.time() + 120, 0
        while time.time() < deadline and up < 2:  # until both workers report (one view of their metrics)
            try:
                r = httpx.post(url + "/v1/predict", json={"context": ["Jazz"], "k": 3}, timeout=5)
                assert r.status_code == 200, r.text
                assert len(r.json()["predictions"]) == 3
                up = int(float(re.search(r"^superbloom_workers (\S+)$", httpx.get(url + "/metrics").text, re.M)[1]))
            except httpx.HTTPError:
                if proc.poll() is not None:
                    pytest.fail(f"server exited: {log.read_text()}")
                time.sleep(0.2)
        assert up == 2, log.read_text()
        children = open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()
        seen = {p for p in children if b"spawn_main" in open(f"/proc/{p}/cmdline", "rb").read()}
        assert len(seen) == 2  # the supervisor's two worker processes (it answers nothing itself)
        r = httpx.post(url + "/v1/predict", json={"context": ["Nope_nope"], "k": 3}, timeout=5)
        assert r.status_code == 422 and "none of the 1 ids" in r.json()["message"]  # the one app's errors
        path = str((inference_checkpoint(tiny_model) / "model.safetensors").resolve())
        for pid in seen:
            assert path in open(f"/proc/{pid}/maps").read()  # each worker maps the checkpoint
            assert _pss_kb(int(pid)) > 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_serve_workers_no_model(tmp_path, capsys):
    from superbloom.cli import main

    try:
        code = main(["serve", str(tmp_path / "missing"), "--workers", "2"])
    except SystemExit as e:
        code = e.code
    assert code == 2 and "no complete checkpoint" in capsys.readouterr().err
