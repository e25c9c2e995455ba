"""Every marker a test uses is registered in pyproject.toml (an unregistered one would only warn), and
every test module that drives a benchmark script carries the `benchmarks` marker, so that
`-m 'not benchmarks'` leaves exactly the benchmark scripts' tests out."""
from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
BUILTIN = {"parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings"}
# the docs' checks import the page generators, not a benchmark: they stay in the fast run
PAGES = ("benchmarks.results_page", "benchmarks.manifest", "benchmarks.machine")
IMPORT = re.compile(r"^\s*(?:from (benchmarks(?:\.[\w.]+)?) import ([\w, ]+)|import (benchmarks[\w.]*))", re.M)


def benchmark_modules(text: str) -> set[str]:
    """The benchmarks.* modules a test module imports."""
    out = set()
    for frm, names, plain in IMPORT.findall(text):
        if plain:
            out.add(plain)
        elif frm == "benchmarks":
            out |= {f"benchmarks.{n.strip()}" for n in names.split(",") if n.strip()}
        else:
            out.add(frm)
    return out


def test_every_marker_is_registered(pytestconfig):
    registered = {m.split(":")[0] for m in pytestconfig.getini("markers")}  # pyproject.toml's, and pytest's own
    used = {m for f in TESTS.glob("test_*.py") for m in re.findall(r"pytest\.mark\.(\w+)", f.read_text())}
    assert {"slow", "benchmarks"} <= registered
    assert used - BUILTIN <= registered, f"unregistered markers: {sorted(used - BUILTIN - registered)}"


def test_the_benchmark_scripts_tests_carry_the_marker():
    unmarked = []
    for f in sorted(TESTS.glob("test_*.py")):
        text = f.read_text()
        if benchmark_modules(text) - set(PAGES) and "pytestmark = pytest.mark.benchmarks" not in text:
            unmarked.append(f.name)
    assert not unmarked, f"test modules importing a benchmark script without the benchmarks marker: {unmarked}"


def test_the_import_check_sees_benchmark_modules():
    assert benchmark_modules("from benchmarks.quality import harness\n") == {"benchmarks.quality"}
    assert benchmark_modules("    from benchmarks import results_page, machine\n") == {"benchmarks.results_page",
                                                                                      "benchmarks.machine"}
    assert benchmark_modules("import benchmarks.load\nfrom superbloom import benchmarks\n") == {"benchmarks.load"}
