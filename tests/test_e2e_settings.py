import pytest
"""benchmarks/scale/e2e.py: a later invocation of the same run (same --name and --work) keeps the
run's recorded settings, so that an oracle stage or a rewritten report describes that run."""
import argparse
import json

import benchmarks.scale.e2e as e2e

pytestmark = pytest.mark.benchmarks  # a benchmark script's test: -m 'not benchmarks' leaves it out


def parser():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/w")
    ap.add_argument("--stages", default="all")
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--eval-sets", type=int, default=1000)
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--note", default="")
    ap.add_argument("--name", default="e2e")
    return ap


def test_same_run_keeps_recorded_settings(tmp_path, monkeypatch):
    monkeypatch.setattr(e2e, "RESULTS", tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"settings": {
        "work": "/w/run", "stages": "train,eval", "zipf": 0.8, "eval_sets": 300, "report": True, "note": "kept"}}))
    ap = parser()
    args = e2e.same_run_settings(ap, ap.parse_args(["--work", "/w/run", "--name", "run", "--stages", "oracle"]))
    assert (args.zipf, args.eval_sets, args.note) == (0.8, 300, "kept")  # the run's own settings
    assert args.stages == "oracle" and args.report is False  # what this invocation does is its own
    args = e2e.same_run_settings(ap, ap.parse_args(["--work", "/w/run", "--name", "run", "--eval-sets", "50"]))
    assert args.eval_sets == 50 and args.zipf == 0.8  # a flag given on the command line wins
    args = e2e.same_run_settings(ap, ap.parse_args(["--work", "/w/other", "--name", "run"]))
    assert args.zipf == 1.1 and args.eval_sets == 1000  # another work directory: another run
    args = e2e.same_run_settings(ap, ap.parse_args(["--work", "/w/run", "--name", "new"]))
    assert args.zipf == 1.1  # no results under that name yet
