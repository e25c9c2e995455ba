"""Paired comparison of models on the same examples (superbloom/compare.py, `eval --compare`)."""
import json
import subprocess
import sys

import numpy as np
import pytest

import superbloom as sb
from superbloom.evaluation.compare import paired, per_example
from superbloom.data.dataset import Dataset
from superbloom.evaluation.evaluate import EvalConfig
from superbloom.evaluation.metrics import bootstrap_ci


def run(*args):
    return subprocess.run([sys.executable, "-m", "superbloom", *map(str, args)], capture_output=True, text=True)


def test_per_example_values_by_hand():
    v = per_example(np.array([1, 0, 5, 12]))
    assert v[1].tolist() == [1, 0, 0, 0] and v[10].tolist() == [1, 0, 1, 0] and v[20].tolist() == [1, 0, 1, 1]
    assert v["mrr"] == pytest.approx([1, 0, 0.2, 1 / 12])


def test_paired_is_the_mean_difference_with_the_interval_of_the_difference():
    a, b = np.array([1, 0, 5, 12, 3, 0]), np.array([0, 0, 5, 1, 30, 2])
    groups = np.array([0, 0, 1, 1, 2, 2])
    p = paired(a, b, groups)
    assert set(p) == {"rec@1", "rec@10", "rec@20", "mrr"}
    assert p["rec@1"]["diff"] == pytest.approx((1 - 1) / 6)
    assert p["rec@10"]["diff"] == pytest.approx((3 - 3) / 6)
    assert p["rec@20"]["diff"] == pytest.approx((4 - 3) / 6)
    mrr_a, mrr_b = 1 + 0.2 + 1 / 12 + 1 / 3, 0.2 + 1 + 1 / 30 + 0.5
    assert p["mrr"]["diff"] == pytest.approx((mrr_a - mrr_b) / 6)
    lo, hi = bootstrap_ci(per_example(a)[20] - per_example(b)[20], groups=groups)
    assert (p["rec@20"]["lo"], p["rec@20"]["hi"]) == (lo, hi)
    assert list(paired(a, b, None, recall="hr")) == ["hr@1", "hr@10", "hr@20", "mrr"]


def test_pairing_narrows_the_interval_of_correlated_methods():
    """Two methods that agree on all but a few examples: the paired interval is far narrower than
    the two separate intervals' overlap suggests, and it excludes 0 when one method is better."""
    rng = np.random.default_rng(0)
    b = np.where(rng.random(2000) < 0.3, rng.integers(1, 11, 2000), 0)
    a = b.copy()
    a[np.flatnonzero(b == 0)[:60]] = 1  # a finds 60 targets b misses, 3% of the examples
    p = paired(a, b, None)["rec@10"]
    assert p["diff"] == pytest.approx(60 / 2000)
    assert 0 < p["lo"] <= p["diff"] <= p["hi"]
    lo_a, _ = bootstrap_ci(per_example(a)[10])
    _, hi_b = bootstrap_ci(per_example(b)[10])
    assert lo_a < hi_b  # the separate intervals overlap: they alone would not separate the two


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    d = tmp_path_factory.mktemp("compare")
    assert run("prepare", sb.embedded_dataset(), "--format", "edges", "--out", d / "data").returncode == 0
    tiny = ["--batch-size", "32", "--d", "32", "--heads", "2", "--d-ff", "64", "--layers", "1", "--quiet",
            "--eval-every", "0", "--alpha", "8"]
    for name, steps in (("a", "12"), ("b", "2")):
        r = run("train", "--preset", "none", d / "data", "--out", d / name, "--steps", steps, *tiny)
        assert r.returncode == 0, r.stderr
    return d


def test_compare_sets_protocol_library(two_models):
    d = two_models
    cfg = EvalConfig(max_sets=80, baselines=("popularity",))
    c = sb.compare(sb.load(d / "a"), {"b": lambda: sb.load(d / "b"), "a again": sb.load(d / "a")},
                   Dataset(d / "data"), cfg, progress=False)
    r = c.to_dict()
    assert 70 <= r["examples"] <= 80 and not any(k.startswith("_") for k in r)  # sets with < 2 ids skipped
    assert np.array_equal(c.compared["a again"].ranks["model"], c.result.ranks["model"])
    assert np.array_equal(c.compared["b"].targets, c.result.targets)  # paired: the same examples
    same = r["compared"]["a again"]["paired"]
    assert all(v == {"diff": 0.0, "lo": 0.0, "hi": 0.0} for v in same.values())  # same examples, same ranks
    b = r["compared"]["b"]
    assert "baselines" not in b["metrics"] and b["metrics"]["examples"] == r["examples"]
    for k in ("rec@1", "rec@10", "rec@20", "mrr"):
        assert b["paired"][k]["diff"] == pytest.approx(r[k] - b["metrics"][k])
        assert b["paired"][k]["lo"] <= b["paired"][k]["diff"] <= b["paired"][k]["hi"]
        pop = r["paired_vs_baselines"]["popularity"][k]
        assert pop["diff"] == pytest.approx(r[k] - r["baselines"]["popularity"][k])
    text = c.report()
    assert "vs b " in text and "vs popularity baseline" in text and "whole held-out sets resampled" in text


def test_compare_cli_json_and_table(two_models):
    d = two_models
    r = run("eval", d / "a", d / "data", "--max-sets", "50", "--compare", d / "b", "--json", "--threads", "1")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert list(out["compared"]) == [str(d / "b")]
    assert set(out["paired_vs_baselines"]) == {"popularity", "cooccurrence"}
    r = run("eval", d / "a", d / "data", "--max-sets", "50", "--compare", d / "b", "--baselines", "none")
    assert r.returncode == 0, r.stderr
    assert "paired differences, this model minus each" in r.stdout and f"vs {d / 'b'}" in r.stdout
    # a small test split: the report says how to get more examples, unless it already holds out several ids per set
    assert "(1 held-out id per set" in r.stdout and "few examples: the intervals are wide; --targets-per-set 5" in r.stdout
    r = run("eval", d / "a", d / "data", "--max-sets", "50", "--targets-per-set", "2", "--baselines", "none")
    assert r.returncode == 0, r.stderr
    assert "(2 held-out ids per set" in r.stdout and "few examples" not in r.stdout


def test_compare_errors_name_the_model(two_models, tmp_path):
    d = two_models
    r = run("eval", d / "a", d / "data", "--compare", tmp_path / "nothing")
    assert r.returncode != 0 and "nothing" in r.stderr and "Traceback" not in r.stderr
    assert "ranking" not in r.stderr  # checked before any evaluation
    small = tmp_path / "small"
    small.mkdir()
    (small / "links.tsv").write_text("".join(f"s{i}\tx{(i * 7 + j) % 40}\n" for i in range(60) for j in range(5)))
    assert run("prepare", small / "links.tsv", "--format", "edges", "--out", small / "data").returncode == 0
    other = small / "model"
    r = run("train", "--preset", "none", small / "data", "--out", other, "--steps", "1", "--batch-size", "4", "--d", "16", "--heads", "2",
            "--d-ff", "32", "--layers", "1", "--quiet", "--eval-every", "0", "--alpha", "2")
    assert r.returncode == 0, r.stderr
    r = run("eval", d / "a", d / "data", "--compare", other)
    assert r.returncode == 2 and "trained on a dataset of" in r.stderr and str(other) in r.stderr
    assert "ranking" not in r.stderr
