"""The SANSA baseline (evaluation/sansa.py, the [sansa] extra): checked before any work; close to EASE."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from superbloom._extras import MissingExtra, installed
from superbloom.data.dataset import SetArray
from superbloom.evaluation.baselines import BASELINES, Ease, Sansa


def sets(seed=0, n=50, n_sets=300):
    rng = np.random.default_rng(seed)
    return SetArray.from_lists([rng.choice(n, rng.integers(2, 8), replace=False) for _ in range(n_sets)])


def test_a_missing_extra_names_it_and_the_install_commands(monkeypatch):
    monkeypatch.setitem(sys.modules, "sansa", None)  # as if not installed
    with pytest.raises(MissingExtra, match=r"superbloom\[sansa\].*libsuitesparse-dev.*scikit-sparse==0.4.16"):
        BASELINES["sansa"].fit(sets(), 50)


@pytest.mark.skipif(not (installed("sansa") and installed("sksparse")), reason="the [sansa] extra is not installed")
@pytest.mark.parametrize("ordering", ["colamd", "count"])
def test_dense_enough_it_is_close_to_ease(ordering):
    s = sets()
    model = Sansa(s, 50, l2=5.0, density=0.5, ordering=ordering)
    w, b = (model.a @ model.b).toarray(), Ease(s, 50, 5.0).b
    off = ~np.eye(50, dtype=bool)
    assert np.corrcoef(w[off], b[off])[0, 1] > 0.85
    ctx = np.array([[1, 2, -1], [3, -1, -1]])
    ranked = model.rank(ctx, ctx, 5)
    assert ranked.shape == (2, 5) and not np.isin(ranked[0], [1, 2]).any() and 3 not in ranked[1]
    with pytest.raises(ValueError, match="ordering"):
        Sansa(s, 50, ordering="amd")
