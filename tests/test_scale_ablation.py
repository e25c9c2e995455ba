"""benchmarks/scale/ablation.py: runs are put side by side only when they ranked the same examples."""
import numpy as np
import pytest

from benchmarks.scale import ablation

pytestmark = pytest.mark.benchmarks  # a benchmark script's test: -m 'not benchmarks' leaves it out


def _ranks(path, targets, set_rows, model):
    np.savez(path, targets=targets, set_rows=set_rows, model=model, popularity=np.zeros_like(model))
    return path


def test_same_examples_load_and_others_are_refused(tmp_path):
    t, g = np.arange(6), np.array([0, 0, 1, 2, 2, 3])
    a = _ranks(tmp_path / "a.npz", t, g, np.array([1, 5, 0, 12, 3, 0]))
    b = _ranks(tmp_path / "b.npz", t, g, np.array([0, 0, 2, 0, 0, 30]))
    ranks, groups = ablation.load_runs([f"A={a}", f"B={b}", f"pop={a}:popularity"])
    assert list(ranks) == ["A", "B", "pop"] and np.array_equal(groups, g)
    assert np.array_equal(ranks["B"], [0, 0, 2, 0, 0, 30])
    c = _ranks(tmp_path / "c.npz", t[::-1], g, np.zeros(6, int))
    with pytest.raises(SystemExit, match="other examples"):
        ablation.load_runs([f"A={a}", f"C={c}"])
    with pytest.raises(SystemExit, match="no array 'nope'"):
        ablation.load_runs([f"A={a}:nope"])
    with pytest.raises(SystemExit, match="LABEL=PATH"):
        ablation.load_runs([str(a)])
