"""The quality harness's decomposition (issue 33): a hybrid's row, its network alone and its term alone
on the same examples, the paired intervals, and the summary table (benchmarks/quality/)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.quality import decomposition, harness
from benchmarks.sequence.run import paired_hr10, terms_table

pytestmark = pytest.mark.benchmarks  # a benchmark script's test: -m 'not benchmarks' leaves it out


@pytest.fixture(scope="module")
def harness_rows(wiki_data, tmp_path_factory):
    work = tmp_path_factory.mktemp("quality")
    mp = pytest.MonkeyPatch()
    mp.setattr(harness, "WORK", work)
    mp.setattr(harness, "REPO", work)
    mp.setattr(harness, "RESULTS", work / "results")
    mp.setattr(decomposition, "RESULTS", work / "results")
    (work / "results").mkdir()
    mp.setattr(harness, "split_dataset", lambda name, split: wiki_data)
    mp.setitem(harness.RECIPES, "tiny", harness.Recipe(alpha=1, m=1, d=16, heads=2, d_ff=32, layers=1, head="hybrid",
                                                        item_term="cooccurrence", neighbours=20, eval_every=4,
                                                        val_fraction=0.1, warmup=1))
    rows = harness.run(["wikispeedia"], ["tiny"], 4, "test", baselines=("popularity", "cooccurrence"))
    harness.save(rows, "decomposition_test")
    yield rows, work
    mp.undo()


def test_a_hybrid_row_has_its_network_alone_and_its_term_alone_beside_it(harness_rows):
    rows, _ = harness_rows
    model = {r["recipe"]: r for r in rows if r["method"] == "superbloom"}
    assert list(model) == ["tiny", "tiny network only", "tiny term only"]  # (mix > 0 chosen on the tiny data)
    hybrid, net, term = model.values()
    assert hybrid["examples"] == net["examples"] == term["examples"]
    # the paired difference is the difference of the means, its interval around it
    d = hybrid["vs_term_only_rec@10"]
    assert d["diff"] == pytest.approx(hybrid["rec@10"] - term["rec@10"], abs=1e-4) and d["lo"] <= d["diff"] <= d["hi"]
    assert net["vs_term_only_rec@10"]["diff"] == pytest.approx(net["rec@10"] - term["rec@10"], abs=1e-4)
    assert hybrid["vs_network_only_rec@10"]["diff"] == pytest.approx(hybrid["rec@10"] - net["rec@10"], abs=1e-4)
    assert "vs_cooccurrence_rec@10" in term and "vs_term_only_rec@10" not in term


def test_the_summary_table_has_one_row_per_hybrid_with_the_bar(harness_rows):
    _, work = harness_rows
    assert "term alone" in (work / "results" / "decomposition_test.md").read_text()  # the harness's table
    decomposition.render("decomposition_test")
    text = (work / "results" / "decomposition_test_summary.md").read_text()
    table = [x for x in text.splitlines() if x.startswith("| wikispeedia |")]
    assert len(table) == 1 and "tiny (cooccurrence," in table[0]
    assert text.splitlines()[-1].startswith("Machine: ")  # the one writer's machine line
    cooc = next(r["rec@10"] for r in harness_rows[0] if r["method"] == "cooccurrence")
    assert f"| {cooc:.4f} |" in table[0]  # co-occurrence beside the hybrid, same examples
    summary = json.loads((work / "results" / "decomposition_test_summary.json").read_text())
    assert [(e["dataset"], e["recipe"], e["cooccurrence"]) for e in summary["entries"]] == [("wikispeedia", "tiny", cooc)]
    assert summary["machine"]["load_average"] and summary["machine"]["date"]


def test_paired_hr10_of_the_sequence_benchmark():
    ranks = {"transition": np.array([1, 3, 0, 12]), "popularity": np.array([0, 11, 2, 5])}
    d = paired_hr10(ranks, "transition")
    assert list(d) == ["popularity"] and d["popularity"]["diff"] == pytest.approx((2 - 2) / 4)
    ranks["popularity"] = np.array([0, 0, 0, 0])
    assert paired_hr10(ranks, "transition")["popularity"]["diff"] == pytest.approx(0.5)
    entry = {"dataset": "x", "users": 4, "transition_decay": 0.7, "skipped": {"ease": "too big"},
             "methods": {"transition": {"hr@10": 0.5, "hr@10_lo": 0.0, "hr@10_hi": 1.0, "ndcg@10": 0.3},
                         "popularity": {"hr@10": 0.0}},
             "paired_hr@10": paired_hr10(ranks, "transition"), "published_hr@10": {"SASRec": 0.1},
             "load_average_before": [1.0], "load_average_after": [2.0]}
    row = terms_table([entry])[2]
    assert "0.5000 [0.0000, 1.0000] (0.7)" in row and "too big" in row
