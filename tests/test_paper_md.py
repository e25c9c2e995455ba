"""benchmarks/PAPER.md is generated from the result files (its numbers and tables are drawn from their
JSON): it must match them."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_paper_md_matches_the_result_files():
    out = subprocess.run([sys.executable, "-m", "benchmarks.paper.make_paper_md", "--check"], cwd=REPO,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
