"""The sequence diagnosis (benchmarks/sequence/diagnose.py): a hybrid's test users by target
popularity and history length, the three parts' HR@10 and their paired differences per bucket."""
from __future__ import annotations

import numpy as np
import pytest

import superbloom as sb
from benchmarks.sequence import diagnose
from superbloom.heads import head_config
from superbloom.model.batches import MaskConfig

from conftest import walking_sequences

pytestmark = pytest.mark.benchmarks  # a benchmark script's test: -m 'not benchmarks' leaves it out


@pytest.fixture(scope="module")
def diagnosis(tmp_path_factory):
    root = tmp_path_factory.mktemp("diag")
    (root / "data").mkdir()
    data = walking_sequences(root / "data", 120, name="walk")
    cfg = sb.TrainConfig(data=str(data), out=str(root / "m"), objective="next-item",
                         head=head_config("hybrid", samples=0, term="transition"),
                         model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1, positions=12, causal=True),
                         mask=MaskConfig(n=12), val_fraction=0.2,
                         loop=sb.LoopConfig(batch_size=8, steps=6, eval_every=3, checkpoint_every=1e9))
    sb.train(cfg, progress=False)
    mp = pytest.MonkeyPatch()
    mp.setattr(diagnose, "WORK", root)
    mp.setattr(diagnose, "WINDOW", 12)
    yield diagnose.diagnose("walk", root / "m"), sb.Dataset(data)
    mp.undo()


def test_every_user_is_in_one_bucket_and_the_buckets_add_up(diagnosis):
    e, data = diagnosis
    for by in ("by_target_popularity", "by_history_length"):
        rows = e[by]
        assert sum(r["examples"] for r in rows) == e["users"] == len(data.test.lengths)
        for part in ("hybrid", "network", "term"):  # the buckets' means weigh back to the whole
            total = sum(r[part] * r["examples"] for r in rows) / e["users"]
            assert total == pytest.approx(e["all"][part], abs=1e-3)
        for r in rows:
            d = r["network_vs_term"]
            assert d["diff"] == pytest.approx(r["network"] - r["term"], abs=2e-4) and d["lo"] <= d["diff"] <= d["hi"]


def test_the_report_has_both_tables_per_dataset(diagnosis):
    e, _ = diagnosis
    md = "\n".join(diagnose.render([e]))
    assert "## walk" in md and "| target popularity (decile) |" in md and "| history ids seen |" in md
    assert md.count("| D") == len(e["by_target_popularity"])
    assert np.isfinite(e["all"]["hybrid"])
