"""The in-memory API (superbloom/fitting.py: sb.fit) against the folder path (`superbloom prepare` a
CSV file + `superbloom train`): for every entry point (pandas, Polars, Arrow, a SciPy sparse matrix, an
iterable of sets) the same links give the same dataset, byte for byte, and the same model: identical
rankings. Flat settings, folders optional, errors before any work."""
from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pytest

import superbloom as sb
from superbloom._extras import MissingExtra
from superbloom.cli import main

SETTINGS = {"steps": 3, "d": 16, "heads": 2, "d_ff": 32, "layers": 1, "batch_size": 16, "val_fraction": 0.1}
FLAGS = [w for k, v in SETTINGS.items() for w in (f"--{k.replace('_', '-')}", str(v))]


def links():
    """(set key, id key) pairs, each set's ids in the order of the id keys (as a sparse row stores them)."""
    rng = np.random.default_rng(3)
    ids = [f"i{j:02d}" for j in range(50)]
    sets = {f"b{s:03d}": [ids[j] for j in sorted(rng.choice(50, rng.integers(3, 8), replace=False))]
            for s in range(160)}
    return sets, ids


def inputs():
    """Entry point -> the object; each holds the links of links() in the same order."""
    import scipy.sparse as spm

    from superbloom.data.inputs import SparseSets

    sets, ids = links()
    pairs = [(s, i) for s, members in sets.items() for i in members]
    col = {i: c for c, i in enumerate(ids)}
    rows = [r for r, (_, members) in enumerate(sets.items()) for _ in members]
    cols = [col[i] for members in sets.values() for i in members]
    matrix = spm.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(sets), len(ids)))
    out = {"arrow": pa.table({"basket": [s for s, _ in pairs], "item": [i for _, i in pairs]}),
           "sparse": SparseSets(matrix, list(sets), ids), "sets": dict(sets)}
    pd = pytest.importorskip("pandas")
    out["pandas"] = out["arrow"].to_pandas()
    pl = pytest.importorskip("polars")
    out["polars"] = pl.from_arrow(out["arrow"])
    return out


@pytest.fixture(scope="module")
def folder_path(tmp_path_factory):
    """The same links through the command line: a CSV file, prepare, train -> (dataset dir, model dir)."""
    root = tmp_path_factory.mktemp("folders")
    sets, _ = links()
    csv = root / "links.csv"
    csv.write_text("basket,item\n" + "".join(f"{s},{i}\n" for s, members in sets.items() for i in members))
    assert main(["prepare", str(csv), "--format", "csv", "--set-column", "basket", "--id-column", "item",
                 "--out", str(root / "data")]) == 0
    assert main(["train", str(root / "data"), "--out", str(root / "model"), *FLAGS, "--threads", "1",
                 "--quiet"]) == 0
    return root / "data", root / "model"


def dataset_files(d):
    """A prepared dataset's files but meta.json (which names the input: a file, or the object's kind)."""
    return {p.name: p.read_bytes() for p in d.iterdir() if p.is_file() and p.name != "meta.json"
            and not p.name.startswith(".")}


def rankings(model):
    s = model.vocab.strings
    contexts = [[s[1], s[2]], [s[5]], [s[10], s[11], s[12]], [s[30]]]
    return model.recommend(contexts, k=8, decode=sb.DecodeConfig(exact=True))


@pytest.mark.parametrize("entry", ["pandas", "polars", "arrow", "sparse", "sets"])
def test_each_entry_point_gives_the_folder_paths_dataset_and_model(entry, folder_path, tmp_path):
    data, model_dir = folder_path
    obj = inputs()[entry]
    columns = {} if entry in ("sparse", "sets") else {"set_column": "basket", "id_column": "item"}
    model = sb.fit(obj, data_out=tmp_path / "data", out=tmp_path / "model", progress=False,
                   **columns, **SETTINGS)
    assert dataset_files(tmp_path / "data") == dataset_files(data)  # byte for byte
    ours, theirs = rankings(model), rankings(sb.load(model_dir))
    assert np.array_equal(ours.index, theirs.index) and np.array_equal(ours.scores, theirs.scores)
    assert np.array_equal(ours.exact, theirs.exact)


def test_fit_without_folders_lives_in_a_temporary_one_and_saves(tmp_path):
    sets, _ = links()
    model = sb.fit(list(sets.values()), progress=False, **SETTINGS)
    workdir = model.path.parent
    assert workdir.name.startswith("superbloom-fit-") and (model.path / "config.json").is_file()
    saved = model.save(tmp_path / "kept")
    again = sb.load(saved)
    assert np.array_equal(rankings(again).index, rankings(model).index)
    assert model.info()["kind"] == "set-model"
    del model
    import gc

    gc.collect()
    assert not workdir.exists()  # the temporary folder went with the model


def test_fit_reads_the_settings_of_the_command_line(tmp_path):
    sets, _ = links()
    model = sb.fit(list(sets.values()), preset="none", head="full", out=tmp_path / "m", progress=False,
                   **SETTINGS)
    assert model.config["head"]["name"] == "full" and model.config.get("preset") is None
    auto = sb.fit(list(sets.values()), progress=False, **SETTINGS)
    assert auto.config["preset"]["name"] == "small" and auto.config["head"]["name"] == "hybrid"


def test_fit_errors_before_any_work(tmp_path, monkeypatch):
    sets, _ = links()
    with pytest.raises(TypeError, match="unknown setting.*no_such_setting.*the settings are"):
        sb.fit(list(sets.values()), no_such_setting=3, data_out=tmp_path / "d")
    with pytest.raises(ValueError, match="fit: argument --steps"):
        sb.fit(list(sets.values()), steps=-1, data_out=tmp_path / "d")
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    with pytest.raises(MissingExtra, match=r"\[track\] extra.*pip install -e '\.\[track\]'"):
        sb.fit(list(sets.values()), log_to=[f"tensorboard:{tmp_path / 'tb'}"], data_out=tmp_path / "d", steps=2)
    assert not (tmp_path / "d").exists() and not (tmp_path / "tb").exists()
