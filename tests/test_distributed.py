"""One code path for 1 and N processes: two gloo ranks under torchrun train, rank 0 writes."""
import subprocess
import sys

import superbloom as sb


def test_torchrun_two_ranks(wiki_data, tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29561",
           "-m", "superbloom", "--", "train", str(wiki_data.path), "--out", str(tmp_path / "m"), "--steps", "4",
           "--batch-size", "16", "--d", "16", "--heads", "2", "--d-ff", "32", "--layers", "1", "--quiet",
           "--eval-every", "0"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("parameters") == 1  # rank 0 alone reports and writes
    assert (tmp_path / "m" / "LATEST").read_text().strip().endswith("step-000000004")
    model = sb.load(tmp_path / "m")
    assert len(model.predict(["Jazz"], k=5).items) == 5
