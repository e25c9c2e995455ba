"""`superbloom demo` end to end with a tiny training budget: the hybrid head's report shows the network
alone beside it and the baselines (--pure trains the default head: the path the rest of the suite covers)."""
import json

import pytest
import torch

from superbloom.cli import main


@pytest.fixture(autouse=True)
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.slow
def test_demo_runs_the_hybrid_head_and_reports_its_network_beside_it(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "demo"), "--time-budget", "4", "--threads", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    res = json.loads((tmp_path / "demo" / "eval.json").read_text())
    assert set(res["baselines"]) == {"popularity", "cooccurrence", "ease"}
    cfg = json.loads((tmp_path / "demo" / "model" / "config.json").read_text())
    assert cfg["head"]["name"] == "hybrid" and cfg["hash"]["alpha"] == 1
    vals = [json.loads(line) for line in (tmp_path / "demo" / "model" / "metrics.jsonl").read_text().splitlines()
            if "val_item_mix" in line]
    mix = vals[-1]["val_item_mix"]  # chosen at the final validation (the BEST checkpoint's, with one validation)
    if mix > 0:  # both rows in the report: the hybrid and its network alone
        assert res["head"] == {"name": "hybrid", "item_mix": mix, "item_decay": 1.0, "item_term": "ease"}
        assert "network only" in out
        assert 0 <= res["network_only"]["rec@10"] <= 1
    else:
        assert "network_only" not in res
    assert "{Copenhagen + Aarhus} ->" in out and res["certified_exact"] == 1.0

