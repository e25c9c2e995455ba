"""benchmarks/scale/terms.py: the terms side by side on one dataset, each setting in its own process,
the validation's choice reported on the test examples with paired intervals; --report joins datasets."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmarks  # a benchmark script's test: -m 'not benchmarks' leaves it out

ROOT = Path(__file__).resolve().parents[1]


def test_the_terms_benchmark_chooses_on_validation_and_pairs_on_test(wiki_data, tmp_path, monkeypatch):
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "benchmarks.scale.terms", str(wiki_data.path), "--name", "t", "--results", str(out),
           "--methods", "local-ease,cooc-term", "--local-grid", "8:50:count,16:50:cosine:32", "--eval-sets", "200"]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    result = json.loads((out / "t.json").read_text())
    rows = {t["method"]: t for t in result["table"]}
    assert set(rows) == {"local-ease", "cooc-term"} and result["test_examples"] > 100
    tried = [r for r in result["tried"] if r["method"] == "local-ease"]
    best = max(tried, key=lambda r: r["val_rec@10"]["local-ease"])  # the first best on a tie
    assert rows["local-ease"]["setting"] == best["setting"] and len(tried) == 2
    d = rows["cooc-term"]["local-ease_minus"]
    assert d["lo"] <= d["diff"] <= d["hi"]
    assert abs(d["diff"] - (rows["local-ease"]["rec@10"] - rows["cooc-term"]["rec@10"])) < 1e-3
    assert all(t["fit_s"] > 0 and t["peak_rss_gb"] > 0 for t in result["table"])
    assert "machine" in result and (out / "t.md").read_text().startswith("# Closed-form")

    import benchmarks.scale.terms as terms
    monkeypatch.setattr(terms, "ROOT", tmp_path)
    terms.report(out, "joined")
    joined = json.loads((tmp_path / "benchmarks" / "results" / "scale" / "joined.json").read_text())
    assert joined["datasets"][0]["dataset"] == Path(wiki_data.path).name
