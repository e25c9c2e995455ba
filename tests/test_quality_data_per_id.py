"""benchmarks/quality/data_per_id.py: fewer training sets, the same held-out sets (so the same examples)."""
from __future__ import annotations

import numpy as np
import pytest

import superbloom as sb
from benchmarks.quality import data_per_id, harness

pytestmark = pytest.mark.benchmarks  # a benchmark script's test: -m 'not benchmarks' leaves it out


def test_thinned_keeps_a_fraction_of_the_training_sets_and_every_test_set(wiki_data, tmp_path):
    thin = data_per_id.thinned(wiki_data, tmp_path / "thin", 0.3)
    n = len(wiki_data.train)
    assert len(thin.train) == round(0.3 * n) and thin.n_ids == wiki_data.n_ids
    assert np.array_equal(thin.test.ids, wiki_data.test.ids)
    assert np.array_equal(thin.test.offsets, wiki_data.test.offsets)
    kept = {tuple(thin.train[i]) for i in range(len(thin.train))}
    assert kept <= {tuple(wiki_data.train[i]) for i in range(n)}  # sets of the training part, none invented
    assert np.array_equal(np.asarray(thin.counts), np.bincount(np.asarray(thin.train.ids), minlength=thin.n_ids))
    ex, ex_thin = harness.examples(wiki_data), harness.examples(thin)  # the same examples at every fraction
    assert np.array_equal(ex.targets, ex_thin.targets) and np.array_equal(ex.contexts, ex_thin.contexts)
    assert len(sb.Dataset(tmp_path / "thin").train) == len(thin.train)  # written once, read back as it is


@pytest.mark.parametrize("fractions", ["0", "1.5", "x", ""])
def test_fractions_outside_0_1_are_a_usage_error(fractions, capsys):
    with pytest.raises(SystemExit) as e:
        data_per_id.main(["--fractions", fractions])
    assert e.value.code == 2
