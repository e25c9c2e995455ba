"""Packaging: a missing optional extra names its pip command; a model directory's config.json records
the versions that wrote it and no path of the machine."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from superbloom._extras import EXTRAS, MissingExtra, require_extra
from superbloom.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_a_missing_extra_names_its_pip_command(extra, monkeypatch):
    require_extra(extra, "this test")  # installed here (the test extra pulls every one)
    monkeypatch.setitem(sys.modules, EXTRAS[extra][0], None)  # as if not installed
    with pytest.raises(MissingExtra, match=rf"this test needs {EXTRAS[extra][0]} .*pip install 'superbloom\[{extra}\]'"):
        require_extra(extra, "this test")


def test_the_server_without_the_serve_extra_says_how_to_install_it():
    """Importing the app in a fresh interpreter where fastapi cannot be imported: the error names the extra."""
    code = "import sys; sys.modules['fastapi'] = None; import superbloom.serving.app"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert "MissingExtra: the HTTP server (superbloom serve) needs fastapi" in r.stderr
    assert "pip install 'superbloom[serve]'" in r.stderr


def test_config_json_records_versions_and_no_machine_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = __import__("numpy").random.default_rng(0)
    Path("links.tsv").write_text("".join(f"s{s}\tid{j}\n" for s in range(120) for j in rng.choice(30, 5, replace=False)))
    assert main(["prepare", "links.tsv", "--format", "edges", "--out", "data/wiki"]) == 0
    assert main(["train", "data/wiki", "--out", "runs/wiki", "--steps", "2", "--batch-size", "8", "--d", "16",
                 "--layers", "1", "--heads", "2", "--quiet"]) == 0
    text = (tmp_path / "runs/wiki/config.json").read_text()
    config = json.loads(text)
    import torch

    import superbloom
    assert config["versions"] == {"superbloom": superbloom.__version__, "torch": torch.__version__, "format": 1}
    assert config["dataset"]["name"] == "wiki" and len(config["dataset"]["meta_sha256"]) == 64
    assert str(tmp_path) not in text and str(tmp_path.resolve()) not in text
    # a resume takes the data path from the command line, the absolute one too
    assert main(["train", str(tmp_path / "data/wiki"), "--out", "runs/wiki", "--steps", "3", "--resume", "--quiet"]) == 0
    assert str(tmp_path.resolve()) not in (tmp_path / "runs/wiki/config.json").read_text()
