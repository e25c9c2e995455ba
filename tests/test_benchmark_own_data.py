"""The benchmarks on your own data: a dataset named by a path is a folder `superbloom prepare` wrote
(benchmarks/datasets.py: own_folder, key), run by the quality harness and the sequence benchmark."""
from __future__ import annotations

import json
import shutil

import pytest

from benchmarks import datasets
from benchmarks.quality import harness
from benchmarks.sequence import run as sequence_run

from conftest import walking_sequences

pytestmark = pytest.mark.benchmarks  # a benchmark script's test: -m 'not benchmarks' leaves it out


def test_a_registry_name_is_not_a_folder_and_keeps_its_name():
    assert datasets.own_folder("beauty") is None and datasets.key("beauty") == "beauty"


def test_a_path_without_a_prepared_dataset_is_refused_naming_it(tmp_path):
    with pytest.raises(SystemExit, match=r"no prepared dataset there \(no meta.json\).*superbloom prepare"):
        datasets.own_folder(f"{tmp_path}/nothing")


def test_two_folders_of_one_name_get_two_keys(wiki_data, tmp_path):
    a, b = tmp_path / "a" / "data", tmp_path / "b" / "data"
    shutil.copytree(wiki_data.path, a)
    shutil.copytree(wiki_data.path, b)
    ka, kb = datasets.key(str(a)), datasets.key(str(b))
    assert ka.startswith("data-") and kb.startswith("data-") and ka != kb
    assert datasets.key(str(a)) == ka  # stable
    (a / "meta.json").write_text((a / "meta.json").read_text() + " ")  # prepared again: a new key
    assert datasets.key(str(a)) != ka


def test_a_folder_of_the_wrong_split_is_refused(wiki_data, tmp_path):
    with pytest.raises(SystemExit, match="prepared with the sets split; this benchmark needs leave-one-out"):
        datasets.prepare(str(wiki_data.path), tmp_path / "unused", split="leave-one-out")
    seq = walking_sequences(tmp_path, 60)
    with pytest.raises(SystemExit, match="prepared with the leave-one-out split; this benchmark needs sets"):
        datasets.prepare(str(seq), tmp_path / "unused")
    assert not (tmp_path / "unused").exists()  # nothing written for a folder read where it is


def test_the_harness_runs_on_your_folder_under_its_key(wiki_data, tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "WORK", tmp_path / "work")
    monkeypatch.setattr(harness, "REPO", tmp_path)
    monkeypatch.setattr(harness, "RESULTS", tmp_path / "results")
    (tmp_path / "results").mkdir()
    monkeypatch.setitem(harness.RECIPES, "tiny", harness.Recipe(alpha=1, m=1, d=16, heads=2, d_ff=32, layers=1,
                                                                head="full", eval_every=4, val_fraction=0.1,
                                                                warmup=1))
    mine = tmp_path / "mine"
    shutil.copytree(wiki_data.path, mine)
    harness.main(["--datasets", str(mine), "--recipes", "tiny", "--steps", "4", "--split", "val",
                  "--baselines", "popularity", "--name", "own"])
    k = datasets.key(str(mine))
    rows = {r["method"]: r for r in json.loads((tmp_path / "results" / "own.json").read_text())["rows"]}
    assert {r["dataset"] for r in rows.values()} == {k} and set(rows) == {"popularity", "superbloom"}
    assert (tmp_path / "work" / "data" / f"{k}-val" / "meta.json").exists()  # the val split carved under the key
    assert (tmp_path / "work" / "models" / f"{k}-val" / "tiny-4" / "done.json").exists()
    assert rows["superbloom"]["train_sets"] < len(wiki_data.train)  # 90% of the training sets


def test_the_sequence_benchmark_reads_your_folder_where_it_is(tmp_path):
    seq = walking_sequences(tmp_path, 60)
    assert sequence_run.prepared(str(seq)) == seq and sequence_run.source(str(seq)) == str(seq)


def test_the_sequence_benchmark_trains_an_ensemble_of_two_proposals(tmp_path, monkeypatch):
    """`--members 2 --member-proposals log_uniform,uniform`: one ensemble folder (train --members), its row
    with the networks alone and the term alone on the same users, each member's proposal in its config."""
    from superbloom.storage.files import load_json

    monkeypatch.setattr(sequence_run, "WORK", tmp_path / "work")
    monkeypatch.setattr(sequence_run, "RESULTS", tmp_path / "results")
    import superbloom as sb

    def weight_3(self, *a, **k):  # these walks are too easy to need the term: a weight > 0, as on real data
        self.mix = 3.0
        return {3.0: 1.0}
    monkeypatch.setattr(sb.Ensemble, "choose_mix", weight_3)
    seq = walking_sequences(tmp_path, 60)
    sequence_run.main(["--datasets", str(seq), "--head", "hybrid", "--samples", "8", "--d", "16", "--layers", "1",
                       "--window", "12", "--batch-size", "16", "--steps", "4", "--eval-every", "2", "--ema", "0",
                       "--members", "2", "--member-proposals", "log_uniform,uniform", "--baselines", "popularity",
                       "--name", "pair"])
    (row,) = json.loads((tmp_path / "results" / "pair.json").read_text())["entries"]
    assert row["setting"].endswith("-x2-plog_uniform+uniform")
    assert {"model_network_only", "model_term_only", "item_decay"} <= set(row) and row["item_mix"] == 3.0
    assert set(row["paired_hr@10"]) == {"network_only", "term_only", "popularity"}
    out = tmp_path / "work" / "models" / datasets.key(str(seq)) / row["setting"]
    assert [load_json(out / f"member-{i}" / "config.json")["train"]["head"]["proposal"] for i in (0, 1)] == \
        ["log_uniform", "uniform"]
    assert load_json(out / "config.json")["kind"] == "ensemble"
