"""`superbloom demo` end to end with a tiny training budget: the hybrid head's report shows the network
alone beside it and the baselines (--pure trains the default head: the path the rest of the suite covers);
`demo --quick` (a smaller network, two baselines) prints predictions, the serve command and writes its card."""
import json

import pytest
import torch

from superbloom.cli import main
from superbloom.storage.checkpoint import latest_checkpoint


@pytest.fixture(autouse=True)
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.slow
def test_demo_runs_the_hybrid_head_and_reports_its_network_beside_it(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "demo"), "--time-budget", "4", "--threads", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    res = json.loads((tmp_path / "demo" / "model" / "eval.json").read_text())
    assert set(res["baselines"]) == {"popularity", "cooccurrence", "ease"}
    cfg = json.loads((tmp_path / "demo" / "model" / "config.json").read_text())
    assert cfg["head"]["name"] == "hybrid" and cfg["hash"]["alpha"] == 1
    vals = [json.loads(line) for line in (tmp_path / "demo" / "model" / "metrics.jsonl").read_text().splitlines()
            if "val_item_mix" in line]
    best = json.loads((latest_checkpoint(tmp_path / "demo" / "model", "BEST") / "state.json").read_text())["step"]
    mix = [v for v in vals if v["step"] == best][-1]["val_item_mix"]  # chosen at the BEST checkpoint's validation
    if mix > 0:  # both rows in the report: the hybrid and its network alone
        assert res["head"] == {"name": "hybrid", "item_mix": mix, "item_decay": 1.0, "item_term": "ease"}
        assert "network only" in out
        assert 0 <= res["network_only"]["rec@10"] <= 1
    else:
        assert "network_only" not in res
    assert "{Copenhagen + Aarhus} ->" in out and res["certified_exact"] == 1.0



def test_demo_quick_predicts_prints_the_serve_command_and_writes_its_card(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--quick", "--out", str(out), "--time-budget", "2", "--threads", "1", "--quiet"]) == 0
    printed = capsys.readouterr().out
    cfg = json.loads((out / "model" / "config.json").read_text())
    assert cfg["kind"] == "set-model" and cfg["head"]["name"] == "hybrid"
    assert cfg["model"]["layers"] == 1 and cfg["model"]["d"] == 64 and cfg["train"]["loop"]["time_budget"] == 2
    res = json.loads((out / "model" / "eval.json").read_text())
    assert set(res["baselines"]) == {"popularity", "cooccurrence"}
    assert "{Miles_Davis + Jazz} ->" in printed and f"superbloom serve {out / 'model'}" in printed
    card = (out / "model" / "README.md").read_text()
    assert "Kind `set-model`" in card and f"| this model | {res['rec@1']:.4f} |" in card
    assert f"| cooccurrence | {res['baselines']['cooccurrence']['rec@1']:.4f} |" in card
