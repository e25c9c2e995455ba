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
NOT_IN_TEST = {"sansa"}  # needs SuiteSparse's system library first (docs/install.md), so [test] leaves it out


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_a_missing_extra_names_its_pip_command(extra, monkeypatch):
    if extra in NOT_IN_TEST:
        try:
            require_extra(extra, "this test")
        except MissingExtra:
            pytest.skip(f"the [{extra}] extra is not part of [test] and is not installed here")
    require_extra(extra, "this test")  # installed here (the test extra pulls every other one)
    monkeypatch.setitem(sys.modules, EXTRAS[extra][0], None)  # as if not installed
    with pytest.raises(MissingExtra, match=rf"this test needs {EXTRAS[extra][0]} .*pip install -e '\.\[{extra}\]' "
                                           rf"from a clone, pip install 'superbloom\[{extra}\]' from a wheel"):
        require_extra(extra, "this test")


WITHOUT_EXTRAS = """
import importlib, json, pkgutil, sys
for m in ("fastapi", "pydantic", "uvicorn", "fastapi_offline", "duckdb", "starlette", "h11", "prometheus_client",
          "tensorboard", "mlflow"):
    sys.modules[m] = None  # as if only the base install were there
import superbloom
from superbloom.cli import main
failed = {}
for info in pkgutil.walk_packages(superbloom.__path__, "superbloom."):
    if not info.name.endswith("__main__"):  # (it runs the command line)
        try:
            importlib.import_module(info.name)
        except Exception as e:
            failed[info.name] = f"{type(e).__name__}: {e}"
open(sys.argv[1], "w").write("x\\ty\\n")
codes = [main(["serve", "nowhere"]), main(["prepare", sys.argv[1], "--out", sys.argv[2], "--memory-limit", "1GB"])]
print(json.dumps({"failed": failed, "codes": codes}))
"""


def test_the_base_install_imports_all_but_the_server_and_says_how_to_install_extras(tmp_path):
    """A fresh interpreter where the extras cannot be imported: every module but the server's imports;
    serve and prepare --memory-limit exit 2 with one line naming the pip command."""
    r = subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS, str(tmp_path / "links.tsv"), str(tmp_path / "data")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    server = {"superbloom.serving.app", "superbloom.serving.fill_route", "superbloom.serving.guards",
              "superbloom.serving.telemetry", "superbloom.serving.lanes",
              "superbloom.serving.similar_route", "superbloom.setembed.http"}
    assert set(out["failed"]) == server, out["failed"]
    assert all("MissingExtra" in e and "pip install 'superbloom[serve]'" in e for e in out["failed"].values())
    assert out["codes"] == [2, 2]
    errors = r.stderr.strip().splitlines()
    assert "superbloom serve: error: the HTTP server (superbloom serve) needs fastapi" in errors[0]
    assert errors[1].startswith("superbloom prepare: error: prepare --memory-limit (out-of-core prepare) needs duckdb")
    assert errors[1].endswith("pip install 'superbloom[outofcore]' from a wheel") and len(errors) == 2
    assert not (tmp_path / "data").exists()  # nothing written


def test_config_json_records_versions_and_no_machine_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = __import__("numpy").random.default_rng(0)
    Path("links.tsv").write_text("".join(f"s{s}\tid{j}\n" for s in range(120) for j in rng.choice(30, 5, replace=False)))
    assert main(["prepare", "links.tsv", "--format", "edges", "--out", "data/wiki"]) == 0
    assert main(["train", "--preset", "none", "data/wiki", "--out", "runs/wiki", "--steps", "2", "--batch-size", "8", "--d", "16",
                 "--layers", "1", "--heads", "2", "--quiet"]) == 0
    text = (tmp_path / "runs/wiki/config.json").read_text()
    config = json.loads(text)
    import torch

    import superbloom
    assert config["versions"] == {"superbloom": superbloom.__version__, "torch": torch.__version__, "format": 1}
    assert config["dataset"]["name"] == "wiki" and len(config["dataset"]["meta_sha256"]) == 64
    assert str(tmp_path) not in text and str(tmp_path.resolve()) not in text
    # a resume takes the data path from the command line, the absolute one too
    assert main(["train", "--preset", "none", str(tmp_path / "data/wiki"), "--out", "runs/wiki", "--steps", "3", "--resume", "--quiet"]) == 0
    assert str(tmp_path.resolve()) not in (tmp_path / "runs/wiki/config.json").read_text()
