"""benchmarks/PAPER.md is generated from benchmarks/results/paper/: it must match those files, and so must
the table fragments (NAME.md) that the scripts draw from their NAME.json."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_paper_md_matches_the_result_files():
    out = subprocess.run([sys.executable, "-m", "benchmarks.paper.make_paper_md", "--check"], cwd=REPO,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
