"""docs/results.md is generated from docs/results.template.md and the result files that
benchmarks/manifest.py lists (benchmarks/results_page.py): the page and benchmarks/README.md's table of
result files must be current, and every listed file must exist."""
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import results_page
from benchmarks.manifest import RESULT_FILES

REPO = Path(__file__).resolve().parents[1]


def test_the_results_page_is_current():
    out = subprocess.run([sys.executable, "-m", "benchmarks.results_page", "--check"], cwd=REPO,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_listed_file_exists():
    missing = [f for r in RESULT_FILES for f in r.files if not (results_page.RESULTS / f).exists()]
    assert not missing, missing


@pytest.mark.parametrize("body,want", [
    ("q|rows|[dataset=a,split=test]|rec@10|:.4f", "0.3461"),
    ("ci:q|rows|[dataset=a,split=test]|rec@10|:.4f,.3f", "0.3461 [0.323, 0.369]"),
    ("q|rows|[dataset=a,split=test]|vs", "+0.014 [+0.004, +0.025]"),
    ("verdict:q|rows|[dataset=a,split=test]|vs", "higher (95% CI above 0)"),
    ("q|rows|[dataset=b,split=]|n", "1,005,296"),
])
def test_placeholders(body, want):
    data = {"rows": [{"dataset": "a", "split": "test", "rec@10": 0.34612, "rec@10_lo": 0.3231, "rec@10_hi": 0.3694,
                      "vs": {"diff": 0.0141, "lo": 0.0037, "hi": 0.0247}},
                     {"dataset": "b", "n": 1005296}]}
    assert results_page.value(body, loader=lambda name: data) == want


@pytest.mark.parametrize("body,error", [
    ("q|rows|[dataset=c]|rec@10", "0 rows match"),
    ("q|rows|[dataset=a]|nope", "no key 'nope'"),
    ("q|rows", "cannot print list"),
])
def test_a_wrong_placeholder_says_what_is_wrong(body, error):
    data = {"rows": [{"dataset": "a", "rec@10": 0.3}]}
    with pytest.raises(SystemExit, match=error):
        results_page.value(body, loader=lambda name: data)
