"""docs/results.md is generated from docs/results.template.md and the result files that
benchmarks/manifest.py lists (benchmarks/results_page.py): the page and benchmarks/README.md's table of
result files must be current, and every listed file must exist."""
import re
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


def test_a_let_line_names_a_row_once():
    data = {"rows": [{"dataset": "a", "rec@10": 0.34612, "n": 7}]}
    text = "{{let:A=q|rows|[dataset=a]}}\n| {{A|rec@10|:.4f}} | {{A|n}} |\n"
    assert results_page.fill(text, {}, loader=lambda name: data) == "| 0.3461 | 7 |\n"


def test_every_result_file_is_listed_and_there_are_few():
    """Each file under benchmarks/results/ is in a manifest entry (so docs/results.md and
    benchmarks/README.md list it with its command), and there are at most MAX_FILES."""
    assert not results_page.problems(), "\n".join(results_page.problems())


def test_the_problems_check_sees_an_unlisted_file(tmp_path, monkeypatch):
    (tmp_path / "old_probe.json").write_text("{}")
    monkeypatch.setattr(results_page, "RESULTS", tmp_path)
    found = results_page.problems()
    assert any("old_probe.json is not in benchmarks/manifest.py" in p for p in found)
    assert any("quality.json does not exist" in p for p in found)


CITED = re.compile(r"\bresults/([\w./-]+\.(?:json|md|png))")


@pytest.mark.parametrize("page", ["benchmarks/README.md", "benchmarks/PAPER.md", "benchmarks/paper/PAPER.template.md",
                                  "benchmarks/sequence/README.md", "benchmarks/setembed/README.md"])
def test_the_benchmark_pages_cite_only_kept_files(page):
    text = (REPO / page).read_text()
    missing = sorted({m.group(1) for m in CITED.finditer(text) if not (results_page.RESULTS / m.group(1)).exists()})
    assert not missing, f"{page} cites result files that do not exist: {missing}"


def test_the_one_writer_stamps_the_machine_load_date_and_command(tmp_path):
    from benchmarks.machine import read_results, write_results
    path = write_results(tmp_path, "scale/x", {"rows": [1, 2]}, ["| a |", "|---|"])
    saved = read_results(tmp_path / "scale", "x")
    assert path == tmp_path / "scale" / "x.json" and saved["rows"] == [1, 2]
    m = saved["machine"]
    assert m["cores"] >= 1 and m["date"] and "load_average" in m and saved["command"].startswith("python")
    md = (tmp_path / "scale" / "x.md").read_text().splitlines()
    assert md[:2] == ["| a |", "|---|"] and md[-1].startswith("Machine: ") and "load average" in md[-1]
    assert not list(tmp_path.rglob("*.tmp"))  # written through a temporary file, renamed
    # written again from its JSON: its own machine and command stay, nothing of this moment is added
    old = dict(saved, machine=dict(m, date="2020-01-01T00:00:00"), command="python -m old")
    write_results(tmp_path, "y", old, None, rewrite=True)
    again = read_results(tmp_path, "y")
    assert again["machine"]["date"] == "2020-01-01T00:00:00" and again["command"] == "python -m old"
    assert not (tmp_path / "y.md").exists()  # markdown None: the JSON only
