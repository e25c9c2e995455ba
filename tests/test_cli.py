"""End to end through the command line on the embedded (real) Wikispeedia links:
prepare, train a few steps, eval --json, predict; plus resume and bad-input errors."""
import json
import subprocess
import sys

import pytest

import superbloom as sb
from superbloom.cli import main


def run(*args):
    return subprocess.run([sys.executable, "-m", "superbloom", *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    r = run("prepare", sb.embedded_dataset(), "--format", "edges", "--out", d / "data", "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["links"] == 119_882
    r = run("train", "--preset", "none", d / "data", "--out", d / "model", "--steps", "6", "--batch-size", "32", "--d", "32",
            "--heads", "2", "--d-ff", "64", "--layers", "1", "--eval-every", "3", "--quiet", "--alpha", "8")
    assert r.returncode == 0, r.stderr
    assert "parameters" in r.stderr  # the library's messages: logging, on stderr
    return d


def test_eval_json(trained):
    r = run("eval", trained / "model", trained / "data", "--json", "--max-sets", "60")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("rec@1", "rec@10", "rec@20", "mrr", "ndcg@10", "examples"):
        assert key in out
    assert set(out["baselines"]) == {"popularity", "cooccurrence"}
    for b in out["baselines"].values():
        assert {"rec@1", "rec@10", "rec@20", "mrr", "ndcg@10"} <= set(b)
    assert out["examples"] == 60
    assert 0 <= out["rec@1"] <= out["rec@10"] <= out["rec@20"] <= 1


def test_eval_exact_and_table(trained):
    r = run("eval", trained / "model", trained / "data", "--max-sets", "30", "--exact", "--baselines", "none")
    assert r.returncode == 0, r.stderr
    assert "superbloom model" in r.stdout and "100.0% of top-20 answers certified exact" in r.stdout


def test_predict(trained):
    r = run("predict", trained / "model", "Copenhagen", "Not_A_Page", "--k", "5", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out["predictions"]) == 5 and out["unknown"] == ["Not_A_Page"] and out["context"] == ["Copenhagen"]
    assert "Copenhagen" not in [p["id"] for p in out["predictions"]]
    r = run("predict", trained / "model", "Nope")
    assert r.returncode == 2 and "none of the 1 ids is in the model's vocabulary" in r.stderr


def test_cli_json_and_http_api_give_the_same_answer(trained, capsys):
    """predict / expand --json print exactly what POST /v1/predict and /v1/expand answer."""
    from fastapi.testclient import TestClient

    from superbloom.serving.app import create_app

    model = sb.load(trained / "model")
    with TestClient(create_app(model)) as client:
        for cmd, body in [(["predict", "Copenhagen", "Nope", "--k", "4"], ("/v1/predict", {"context": ["Copenhagen", "Nope"], "k": 4})),
                          (["expand", "Jazz", "--steps", "3"], ("/v1/expand", {"seed": ["Jazz"], "steps": 3}))]:
            assert main([cmd[0], str(trained / "model"), *cmd[1:], "--json"]) == 0
            cli = json.loads(capsys.readouterr().out)
            api = client.post(body[0], json=body[1]).json()
            assert cli == api


def test_library_api(trained):
    model = sb.load(trained / "model")
    p = model.predict(["Miles_Davis", "Jazz"], k=3)
    assert len(p.items) == 3 and p.context == ["Miles_Davis", "Jazz"]
    p = model.predict(["People's_Republic_of_China"], k=2)  # display (URL-decoded) names are accepted
    assert p.context == ["People%27s_Republic_of_China"]


def test_resume_continues(trained, tmp_path):
    args = ["train", "--preset", "none", trained / "data", "--out", tmp_path / "m", "--batch-size", "32", "--d", "32", "--heads", "2",
            "--d-ff", "64", "--layers", "1", "--quiet", "--eval-every", "0"]
    assert run(*args, "--steps", "3").returncode == 0
    r = run(*args, "--steps", "5", "--resume")
    assert r.returncode == 0, r.stderr
    assert "resuming from step-000000003" in r.stderr
    assert (tmp_path / "m" / "LATEST").read_text().strip().endswith("step-000000005")


def test_a_resumed_hybrid_reports_the_parameters_of_its_first_run(trained, tmp_path):
    """The fitted term's weights count among the parameters; a resume loads them with its weights (in
    fit), after its "model: N parameters" line, which gives the first run's count."""
    import re

    args = ["train", "--preset", "none", "--head", "hybrid", "--alpha", "1", "--m", "1", trained / "data", "--out",
            tmp_path / "m", "--batch-size", "32", "--d", "16", "--heads", "2", "--d-ff", "32", "--layers", "1",
            "--quiet", "--eval-every", "0"]
    counts = []
    for extra in (("--steps", "2"), ("--steps", "3", "--resume")):
        r = run(*args, *extra)
        assert r.returncode == 0, r.stderr
        counts += re.findall(r"model: ([\d,]+) parameters", r.stderr)
    assert len(counts) == 2 and counts[0] == counts[1], counts


def test_best_checkpoint_is_served(trained):
    """Validation every 3 of 6 steps: BEST points at the better one, and inference loads it."""
    import json as _json

    rows = [_json.loads(x) for x in (trained / "model" / "metrics.jsonl").read_text().splitlines()]
    val = [r for r in rows if "val_rec@10" in r]
    best = max(val, key=lambda r: (r["val_rec@10"], -r["step"]))
    assert (trained / "model" / "BEST").read_text().strip() == f"checkpoints/best-{best['step']:09d}"
    assert sb.load(trained / "model").config["checkpoint"] == f"best-{best['step']:09d}"


def test_bad_input_errors(tmp_path, capsys):
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\nno-tab-here\n")
    assert main(["prepare", str(bad), "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert "bad.tsv:2: expected 2 tab-separated fields, got 1" in err
    assert main(["eval", str(tmp_path / "nomodel"), str(tmp_path / "nodata")]) == 2
    assert "no complete checkpoint" in capsys.readouterr().err
