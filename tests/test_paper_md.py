"""benchmarks/PAPER.md is generated from benchmarks/results/paper/: it must match those files."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_paper_md_matches_the_result_files():
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "paper" / "make_paper_md.py"), "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
