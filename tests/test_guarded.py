"""Nothing a user owns is destroyed, no file we load is trusted, commands are atomic (issue 32, classes 1, 3, 4).

- the guarded writer (storage/guarded.py): every state a kill leaves beside OUT is recovered by the next
  run and read right by a loader; a user's OUT / OUT.new / OUT.partial / OUT.old is never touched;
- a table of output paths for every writer (train, embed-train, textclass-train, prepare, prepare-text,
  extend, embed, synth, demo): each row exits 2 with one line and leaves every file byte-identical;
- load validation (storage/loading.py): truncated or foreign weights, a pointer outside the folder or to a
  checkpoint of another shape, a hand-edited config.json, a folder of another kind: one line naming the file;
- atomic commands: a refused resume or objective writes nothing; unknown baselines are refused before ranking;
- a kill test per writer: SIGKILL at seeded random moments, then the previous output or the new one loads,
  the next run completes, and no user file was touched (more rounds behind the `slow` marker).
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

import superbloom as sb
from superbloom.cli import main
from superbloom.storage.guarded import (MARKER, OutputError, Target, claim, foreign_entries, read_marker, record,
                                       remove_ours, resolve, write_marker)

TINY = ["--d", "16", "--heads", "2", "--d-ff", "32", "--layers", "1", "--batch-size", "16", "--eval-every", "0",
        "--val-fraction", "0.01", "--quiet", "--threads", "1"]
EMBED_TINY = ["--d", "16", "--heads", "2", "--d-ff", "32", "--pool-heads", "2", "--alpha", "8", "--segment", "8",
              "--batch-size", "16", "--eval-every", "0", "--warmup", "2", "--quiet", "--threads", "1"]
RESUME = ["--steps", "9", "--quiet", "--threads", "1"]  # no architecture flag: tiny_model's settings stay
TEXTCLASS_TINY = ["--d", "16", "--heads", "2", "--epochs", "2", "--batch-size", "4", "--threads", "1",
                  "--test-fraction", "0.2"]


def tree(root: Path) -> dict:
    """Every file under `root` (hidden ones too) -> sha256, and every folder -> None."""
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


# ------------------------------------------------------------------------------ the guarded writer itself


def make(path: Path, kind: str, complete: bool, files=("a.txt",)) -> Path:
    path.mkdir()
    for f in files:
        (path / f).write_text(f"{path.name}/{f}")
    write_marker(path, kind, "r", complete=complete, files=list(files))
    return path


@pytest.mark.parametrize("state, left", [
    # (folders beside OUT a kill left, as name -> complete) -> what OUT holds after recovery
    ({"d.partial": True}, "d.partial"),                      # killed just before a first output's rename
    ({"d.partial": False}, None),                            # killed while building: nothing
    ({"d.partial": True, "d.old": True}, "d.partial"),       # killed between the swap's two renames
    ({"d": True, "d.old": True}, "d"),                       # killed before the old one's removal
    ({"d": True, "d.partial": False}, "d"),                  # killed while building a replacement
    ({"d.old": True}, "d.old"),                              # the new one gone: the old one back
])
def test_every_state_a_kill_leaves_is_recovered_and_read_right(tmp_path, state, left):
    for name, complete in state.items():
        make(tmp_path / name, "dataset", complete)
    out = tmp_path / "d"
    loaded = resolve(out, "dataset")  # a loader, before any run: changes nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(state)
    if left is None:
        assert not loaded.exists()
    else:
        assert (loaded / "a.txt").read_text() == f"{left}/a.txt"
    claim(out, "dataset")  # the next run recovers
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if left is None else ["d"])
    if left is not None:
        assert (out / "a.txt").read_text() == f"{left}/a.txt"


def test_commit_swaps_and_discard_leaves_the_old_output(tmp_path):
    out = tmp_path / "m"
    t = claim(out, "model")
    (t.stage() / "w").write_text("one")
    t.commit()
    assert (out / "w").read_text() == "one" and read_marker(out, "model")["complete"]
    t = claim(out, "model")
    (t.stage() / "w").write_text("two")
    t.discard()
    t.release()  # the lock file beside it goes with the last claim
    assert (out / "w").read_text() == "one" and sorted(p.name for p in tmp_path.iterdir()) == ["m"]
    t = claim(out, "model")
    (t.stage() / "w").write_text("two")
    t.commit()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".m.superbloom.lock", "m"]  # held while t is
    t.release()
    assert (out / "w").read_text() == "two" and sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_a_removal_killed_part_way_stays_ours(tmp_path):
    """Removal goes marker last: a kill part-way leaves a folder still marked ours, finished by the next run."""
    old = make(tmp_path / "d.old", "dataset", True, files=("a", "b"))
    (old / "a").unlink()  # as if the removal had started
    make(tmp_path / "d", "dataset", True)
    claim(tmp_path / "d", "dataset")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


@pytest.mark.parametrize("kind,staged", [("dataset", ".partial"), ("model", ".new")])
@pytest.mark.parametrize("left", ["empty", "marker cut short"])
def test_a_folder_killed_before_its_marker_was_written_is_ours(tmp_path, kind, staged, left):
    """A kill between making a folder and marking it (stage, mark_in_place) leaves it empty or holding
    only an unfinished marker write: the next run takes it (nothing in it can be lost) and cleans it."""
    out = tmp_path / "o"
    for folder in (tmp_path / f"o{staged}", out):
        folder.mkdir()
        if left != "empty":
            (folder / f".{MARKER}.tmp4242").write_text('{"kind": "da')
    t = claim(out, kind)
    assert not (tmp_path / f"o{staged}").exists() and list(out.iterdir()) == []
    (t.stage() / "w").write_text("one")
    t.commit()
    assert (out / "w").read_text() == "one" and read_marker(out, kind)["complete"]


def test_a_users_folder_beside_the_output_is_still_refused(tmp_path):
    for name, content in ((".superbloom.json.tmp1", "x"), ("notes.txt", "mine")):
        side = tmp_path / "o.partial"
        shutil.rmtree(side, ignore_errors=True)
        side.mkdir()
        (side / "notes.txt").write_text("mine")  # with a file of the user's it is not ours
        (side / name).write_text(content)
        with pytest.raises(OutputError, match="is not"):
            claim(tmp_path / "o", "dataset")
        assert (side / "notes.txt").read_text() == "mine"


def test_folders_written_before_the_marker_load_and_are_never_replaced(wiki_data, tiny_model, tmp_path, capsys):
    """A dataset or model without the marker (an earlier superbloom's) still loads; replacing it is refused,
    saying what to do, and nothing in it changes; resuming a model marks it ours (adopt), by name."""
    data, model = tmp_path / "data", tmp_path / "model"
    shutil.copytree(wiki_data.path, data, ignore=shutil.ignore_patterns(MARKER))
    shutil.copytree(tiny_model, model, ignore=shutil.ignore_patterns(MARKER))
    assert claim(data, "dataset").legacy() and claim(model, "model").legacy()
    with pytest.raises(OutputError, match="holds an id model"):
        claim(model, "dataset")
    sb.Dataset(data).train, sb.load(model).predict(["Jazz"], k=2)  # loads as before
    before = tree(tmp_path)
    with pytest.raises(OutputError, match="written by an earlier superbloom"):
        claim(data, "dataset").check_replace()
    assert main(["prepare", str(sb.embedded_dataset()), "--out", str(data), "--overwrite"]) == 2
    assert main(["train", "--preset", "none", str(data), "--out", str(model), "--overwrite", "--steps", "1", *TINY]) == 2
    err = capsys.readouterr().err
    assert err.count("delete or move it yourself") == 2 and "Traceback" not in err, err
    assert tree(tmp_path) == before
    assert main(["train", "--preset", "none", str(data), "--out", str(model), "--resume", *RESUME]) == 0
    assert read_marker(model, "model")["run"].startswith("adopted-")


def test_a_replacement_removes_only_what_we_wrote(tmp_path, caplog):
    """Inside a folder of ours, what the marker lists or the kind writes is ours; the rest is the user's:
    refused before any work, and kept (in OUT.old, said) when it appears during the run."""
    out = tmp_path / "m"
    t = claim(out, "model")
    (t.stage() / "weights").write_text("one")
    t.commit()
    assert read_marker(out, "model")["files"] == ["weights"]
    (out / "README.md").write_text("the card")  # a name the kind writes in place
    (out / "eval.json").write_text("the user's")
    with pytest.raises(OutputError, match="holds eval.json, not part of an id model"):
        claim(out, "model").check_replace()
    record(out, "eval.json")  # as eval and the demo do for the eval.json it writes
    claim(out, "model").check_replace()
    (out / "notes.txt").write_text("the user's")
    t = claim(out, "model")  # the user's file appears after the check, during the run
    (t.stage() / "weights").write_text("two")
    t.commit()
    assert (out / "weights").read_text() == "two" and not (out / "eval.json").exists()
    assert sorted(p.name for p in (tmp_path / "m.old").iterdir()) == ["notes.txt"] and "notes.txt" in caplog.text
    with pytest.raises(OutputError, match="m.old exists beside"):
        claim(out, "model")
    assert (tmp_path / "m.old" / "notes.txt").read_text() == "the user's"


def test_a_removal_follows_no_link_and_keeps_a_nested_output(tmp_path, tiny_model):
    user = tmp_path / "user"
    user.mkdir()
    (user / "thesis.txt").write_text("the user's")
    d = make(tmp_path / "d", "dataset", True, files=("meta.json",))
    (d / "vocab.txt").symlink_to(user / "thesis.txt")
    (d / "train.ids.npy").symlink_to(user)
    shutil.copytree(tiny_model, d / "model")
    assert remove_ours(d, "dataset") == ["model", "train.ids.npy", "vocab.txt"]
    assert (user / "thesis.txt").read_text() == "the user's" and (d / "model" / "config.json").is_file()
    assert not (d / "meta.json").exists() and not (d / MARKER).exists()


def test_ensembles_and_hybrids_write_only_names_of_their_kind(wiki_data, tmp_path):
    for name, extra in (("ens", ["--members", "2", "--head", "full", "--alpha", "1", "--m", "1"]),
                        ("hybrid", ["--head", "hybrid", "--alpha", "1", "--m", "1"])):
        out = tmp_path / name
        assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(out), "--steps", "2",
                     *TINY, *extra]) == 0
        kind = "ensemble" if name == "ens" else "model"
        assert foreign_entries(out, kind) == []
        for member in out.glob("member-*"):
            assert foreign_entries(member, "model") == []


def test_a_file_output_is_ours_only_while_it_is_the_file_we_wrote(tmp_path):
    out = tmp_path / "v.parquet"
    t = claim(out, "vectors")
    with t.writing() as tmp:
        tmp.write_text("ours")
    assert read_marker(out, "vectors") is not None
    claim(out, "vectors")  # ours: may be written again
    out.write_text("the user's now")
    with pytest.raises(OutputError, match="was not written by superbloom"):
        claim(out, "vectors")
    assert out.read_text() == "the user's now"


# ------------------------------------------------------------------------------ writers and their inputs


@pytest.fixture(scope="module")
def inputs(wiki_small, tiny_model, tmp_path_factory):
    """What the writers read: a dataset (about 200 Wikispeedia pages: each killed run is quick, its writes
    the same), an id model, a set embedding, documents with labels, a text corpus, new ids, a links file."""
    root = tmp_path_factory.mktemp("guard_inputs")
    embed = root / "embed"
    assert main(["embed-train", str(wiki_small.path), "--out", str(embed), "--steps", "2", *EMBED_TINY]) == 0
    docs = root / "docs"
    docs.mkdir()
    labels = ["# name\tlabel"]
    for i in range(20):
        words = ("the cat and the dog and the goat" if i % 2 else "a saw and a drill and a hammer").split()
        (docs / f"doc{i}.txt").write_text(" ".join(words[i % 3:] + words[:i % 3]) + ".\n")
        labels.append(f"doc{i}\t{'animal' if i % 2 else 'tool'}")
    (root / "labels.tsv").write_text("\n".join(labels) + "\n")
    corpus = root / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("New York is a city. The city of New York is big.\nParis is a city too.\n" * 20)
    (root / "new_ids.txt").write_text("Brand_new_page\nAnother_new_page\n")
    (root / "contexts.jsonl").write_text("".join(f'{{"context": ["Jazz"], "id": "u{i}"}}\n' for i in range(2000)))
    return {"data": str(wiki_small.path), "model": str(tiny_model), "embed": str(embed), "docs": str(docs),
            "labels": str(root / "labels.tsv"), "corpus": str(corpus), "ids": str(root / "new_ids.txt"),
            "links": str(wiki_small.path.parent / "links.tsv"), "contexts": str(root / "contexts.jsonl")}


# writer -> (argv for OUT, the kind it writes, the flag that replaces an output of ours, or None: it always may)
WRITERS = {
    "train": (lambda i, out: ["train", "--preset", "none", i["data"], "--out", out, "--steps", "2", *TINY],
              "model", "--overwrite"),
    "embed-train": (lambda i, out: ["embed-train", i["data"], "--out", out, "--steps", "2", *EMBED_TINY],
                    "set-embedding", "--overwrite"),
    "textclass-train": (lambda i, out: ["textclass-train", i["docs"], "--labels", i["labels"], "--out", out,
                                        *TEXTCLASS_TINY], "text-classifier", "--overwrite"),
    "prepare": (lambda i, out: ["prepare", i["links"], "--out", out], "dataset", "--overwrite"),
    "prepare-text": (lambda i, out: ["prepare-text", i["corpus"], "--out", out, "--quiet", "--vocab-size", "20"],
                     "dataset", "--overwrite"),
    "extend": (lambda i, out: ["extend", i["model"], i["ids"], "--out", out], "model", "fresh"),
    "embed": (lambda i, out: ["embed", i["embed"], i["data"], "--out", out], "vectors", None),
    "synth": (lambda i, out: ["synth", "--ids", "2000", "--topics", "10", "--links", "3000", "--out", out, "--quiet"], "links", None),
    "demo": (lambda i, out: ["demo", "--out", out, "--input", i["links"], "--time-budget", "1", "--threads", "1",
                             "--quiet", "--pure"], "demo", "--overwrite"),
    "predict": (lambda i, out: ["predict", i["model"], "--input", i["contexts"], "--out", out, "--quiet"],
                "recommendations", None),
    "vectors": (lambda i, out: ["vectors", i["model"], "--out", out], "item-vectors", None),
}
FILE_KINDS = {"vectors", "links", "recommendations", "item-vectors"}


def _user_folder(tmp: Path, name: str) -> str:
    (tmp / name).mkdir()
    (tmp / name / "mine.txt").write_text("the user's")
    return str(tmp / name)


def _user_file(tmp: Path) -> str:
    (tmp / "out").write_text("the user's file")
    return str(tmp / "out")


def _other_kind(tmp: Path, kind: str, inputs: dict) -> str:
    """An output of ours of another kind: a dataset where a model is written, a model where a dataset is."""
    src = inputs["model"] if kind == "dataset" else inputs["data"]
    shutil.copytree(src, tmp / "out")
    return str(tmp / "out")


def _beside(suffix: str):
    def setup(tmp: Path, kind: str, inputs: dict) -> str:
        _user_folder(tmp, "out" + suffix)
        return str(tmp / "out")
    return setup


# case -> (setup(tmp, kind, inputs) -> the --out given, the kinds it applies to: "dir", "file" or "all", words)
CASES = {
    "empty": (lambda tmp, kind, i: "", "all", "empty path"),
    "root": (lambda tmp, kind, i: "/", "all", "root folder"),
    "cwd": (lambda tmp, kind, i: ".", "all", "current folder"),
    "above-cwd": (lambda tmp, kind, i: "..", "all", "above the current one"),
    "device": (lambda tmp, kind, i: os.devnull, "all", "device"),
    "user-folder": (lambda tmp, kind, i: _user_folder(tmp, "out"), "dir", "did not write"),
    "user-file-for-a-folder": (lambda tmp, kind, i: _user_file(tmp), "dir", "is a file, not a directory"),
    "other-kind": (_other_kind, "dir", "expected"),
    "user-old": (_beside(".old"), "dir", "out.old exists beside"),
    "user-new": (_beside(".new"), "dir", "out.new exists beside"),
    "user-partial": (_beside(".partial"), "dir", "out.partial exists beside"),
    "user-file": (lambda tmp, kind, i: _user_file(tmp), "file", "was not written by superbloom"),
    "folder-for-a-file": (lambda tmp, kind, i: _user_folder(tmp, "out"), "file", "is a directory"),
}
ROWS = [(w, c) for w in WRITERS for c, (_, applies, _) in CASES.items()
        if applies == "all" or applies == ("file" if WRITERS[w][1] in FILE_KINDS else "dir")]


@pytest.mark.parametrize("writer, case", ROWS, ids=[f"{w}-{c}" for w, c in ROWS])
def test_output_path_table(writer, case, inputs, tmp_path, monkeypatch, capsys):
    """Each row: the user's files made, the command run with its output there, exit 2 with one line naming
    what was wrong, and every file of the folder byte-identical."""
    argv, kind, replace = WRITERS[writer]
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "keep.txt").write_text("the user's")
    monkeypatch.chdir(work / "sub" if case == "above-cwd" else work)
    setup, _, words = CASES[case]
    out = setup(work, kind, inputs)
    before = tree(work)
    extra = [replace] if replace and replace.startswith("--") else []
    assert main(argv(inputs, out) + extra) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert words in lines[0], lines[0]
    assert tree(work) == before
    assert Path(os.devnull).exists() and not Path(os.devnull).is_file()


# ------------------------------------------------------------------------------ what we load


@pytest.fixture()
def model_copy(tiny_model, tmp_path) -> Path:
    out = tmp_path / "m"
    shutil.copytree(tiny_model, out)
    return out


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _pointed(model: Path, pointer: str = "BEST") -> Path:
    return model / (model / pointer).read_text().strip()


def _edit_config(model: Path, change) -> None:
    config = json.loads((model / "config.json").read_text())
    change(config)
    (model / "config.json").write_text(json.dumps(config))


def _other_shape(model: Path, tmp: Path, wiki_data) -> None:
    other = tmp / "other"
    assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(other), "--steps", "1",
                 *TINY, "--d", "24"]) == 0
    shutil.copytree(_pointed(other, "LATEST"), model / "checkpoints" / "step-999999999")
    (model / "BEST").write_text("checkpoints/step-999999999\n")


LOAD_CASES = {  # name -> (corrupt(model, tmp, wiki_data), words of the one line)
    "truncated-weights": (lambda m, t, w: _truncate(_pointed(m) / "model.safetensors"), "model.safetensors: truncated"),
    "random-hashing": (lambda m, t, w: (m / "hashing.safetensors").write_bytes(os.urandom(3000)),
                       "hashing.safetensors: truncated or not a safetensors file"),
    "empty-hashing": (lambda m, t, w: (m / "hashing.safetensors").write_bytes(b""), "hashing.safetensors"),
    "pointer-outside": (lambda m, t, w: (m / "BEST").write_text("../../etc\n"), "outside the model folder"),
    "pointer-absolute": (lambda m, t, w: (m / "BEST").write_text("/tmp\n"), "outside the model folder"),
    "other-shape": (_other_shape, "expects"),
    "config-not-json": (lambda m, t, w: (m / "config.json").write_text("{\n\"model\": "), "config.json, line 2"),
    "config-no-model": (lambda m, t, w: _edit_config(m, lambda c: c.pop("model")), "no 'model' field"),
    "config-wrong-type": (lambda m, t, w: _edit_config(m, lambda c: c["model"].update(d="wide")),
                          "field model.d is \"wide\"; expected a int"),
    "config-head-not-object": (lambda m, t, w: _edit_config(m, lambda c: c.update(head=3)),
                               "field 'head' is a int; expected a JSON object"),
}


@pytest.mark.parametrize("case", LOAD_CASES)
@pytest.mark.parametrize("command", ["predict", "eval"])
def test_a_corrupted_model_is_one_line_naming_the_file(case, command, model_copy, wiki_data, tmp_path, capsys):
    corrupt, words = LOAD_CASES[case]
    corrupt(model_copy, tmp_path, wiki_data)
    capsys.readouterr()  # a case that trains another model logs its lines first
    before = tree(model_copy)
    argv = (["predict", str(model_copy), "Jazz"] if command == "predict"
            else ["eval", str(model_copy), str(wiki_data.path), "--baselines", "none", "--max-sets", "20"])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert words in err, err
    assert tree(model_copy) == before


def test_a_folder_of_another_kind_is_named(inputs, wiki_data, capsys):
    assert main(["predict", inputs["embed"], "Jazz"]) == 2
    assert "holds a set embedding (superbloom embed-train); expected an id model" in capsys.readouterr().err
    assert main(["similar", inputs["model"], "Jazz"]) == 2
    assert "holds an id model (superbloom train / extend); expected a set embedding" in capsys.readouterr().err
    assert main(["predict", str(wiki_data.path), "Jazz"]) == 2
    assert "holds a prepared dataset" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file: permissions cannot be tested")
def test_a_file_we_may_not_read_is_reported_as_such(model_copy, capsys):
    (model_copy / "config.json").chmod(0)
    assert main(["predict", str(model_copy), "Jazz"]) == 2
    assert "permission denied" in capsys.readouterr().err


def test_a_truncated_checkpoint_refuses_resume_and_writes_nothing(model_copy, wiki_data, capsys):
    _truncate(_pointed(model_copy, "LATEST") / "model.safetensors")
    before = tree(model_copy)
    assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(model_copy), "--resume",
                 "--lr", "0.001", *RESUME]) == 2
    assert "model.safetensors: truncated" in capsys.readouterr().err
    assert tree(model_copy) == before


# ------------------------------------------------------------------------------ atomic commands


def test_refused_commands_write_nothing(model_copy, wiki_data, tmp_path, capsys):
    before = tree(model_copy)
    train = ["train", "--preset", "none", str(wiki_data.path), "--out"]
    assert main([*train, str(model_copy), "--resume", "--optimizer", "adapsgd", *RESUME]) == 2
    assert "optim.name 'adamw' -> 'adapsgd'" in capsys.readouterr().err
    assert tree(model_copy) == before
    assert main([*train, str(tmp_path / "t"), "--objective", "text-mlm", "--steps", "2", *TINY]) == 2
    assert "text-mlm" in capsys.readouterr().err and not (tmp_path / "t").exists()
    assert main(["eval", str(model_copy), str(wiki_data.path), "--baselines", "popularity,foo"]) == 2
    err = capsys.readouterr().err
    assert "unknown baseline 'foo'" in err and "ranking" not in err


def test_a_cut_last_metrics_line_is_dropped_on_resume_naming_the_file(model_copy, wiki_data, capsys, caplog):
    with open(model_copy / "metrics.jsonl", "a") as f:
        f.write('{"step": 4, "lo')
    assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(model_copy), "--resume",
                 *RESUME]) == 0
    assert "metrics.jsonl: line" in caplog.text and "cut short" in caplog.text
    for line in (model_copy / "metrics.jsonl").read_text().splitlines():
        json.loads(line)


# ------------------------------------------------------------------------------ kill tests


LOADERS = {  # kind -> load(path): raises unless the output there is complete and usable
    "model": lambda p: sb.load(p).predict(["Jazz"], k=2),
    "set-embedding": lambda p: __import__("superbloom.setembed", fromlist=["load_embedder"]).load_embedder(p),
    "text-classifier": lambda p: __import__("superbloom.textclass.folder", fromlist=["x"]).load_classifier(p),
    "dataset": lambda p: sb.Dataset(p).train,
    "vectors": lambda p: __import__("pyarrow.parquet", fromlist=["x"]).read_table(p),
    "links": lambda p: __import__("pyarrow.parquet", fromlist=["x"]).read_table(p),
    "recommendations": lambda p: __import__("pyarrow.parquet", fromlist=["x"]).read_table(p),
    "item-vectors": lambda p: __import__("superbloom.inference.vectors", fromlist=["x"]).load_vectors(p),
    "demo": lambda p: (sb.load(Path(p) / "model"), sb.Dataset(Path(p) / "data")),
}


def run_cli(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "superbloom", *argv], cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=600)


def kill_rounds(writer: str, inputs: dict, tmp: Path, rounds: int, seed: int) -> None:
    """Write a first output, then re-run the writer `rounds` times, each SIGKILLed at a seeded random
    moment of its run, one in each of `rounds` equal stretches of it (stratified: the rounds cover the
    run from start-up to its last writes instead of bunching): after each kill the output loads (the previous or the new one; for extend, which
    only writes new folders: none or the new one), the user's files beside it are untouched, and the
    next run completes."""
    argv, kind, replace = WRITERS[writer]
    out = tmp / {"links": "links.parquet", "vectors": "vectors.parquet", "recommendations": "recs.parquet",
                 "item-vectors": "items.npy"}.get(kind, "out")
    user = tmp / "user"
    user.mkdir()
    (user / "notes.txt").write_text("the user's")
    (tmp / f"{out.name}.txt").write_text("the user's file beside the output")
    before = tree(user), (tmp / f"{out.name}.txt").read_bytes()
    cmd = argv(inputs, str(out)) + ([replace] if replace and replace.startswith("--") else [])
    t0 = time.time()
    first = run_cli(argv(inputs, str(out)), tmp)
    assert first.returncode == 0, first.stderr
    seconds = time.time() - t0
    rnd = random.Random(seed)
    for i in range(rounds):
        if replace == "fresh" and out.exists():  # a kill before its first write left none
            shutil.rmtree(out)
        proc = subprocess.Popen([sys.executable, "-m", "superbloom", *cmd], cwd=tmp, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=dict(os.environ, OMP_NUM_THREADS="1"))
        time.sleep((0.3 + 0.7 * (i + rnd.random()) / rounds) * seconds)  # past start-up, often inside the writes
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        found = resolve(out, None if kind in FILE_KINDS else kind)
        if found.exists() or replace != "fresh":
            LOADERS[kind](found)
        assert (tree(user), (tmp / f"{out.name}.txt").read_bytes()) == before
    if replace == "fresh" and out.exists():
        shutil.rmtree(out)
    done = run_cli(cmd, tmp)  # recovers whatever the last kill left
    assert done.returncode == 0, done.stderr
    LOADERS[kind](out)
    if kind not in FILE_KINDS:  # everything the writer wrote is ours: a later replacement removes it all
        assert foreign_entries(out, kind) == [], foreign_entries(out, kind)
    assert not any(tmp.glob(f"{out.name}.new")) and not any(tmp.glob(f"{out.name}.old"))
    assert not any(tmp.glob(f"{out.name}.partial"))
    assert (tree(user), (tmp / f"{out.name}.txt").read_bytes()) == before


@pytest.mark.parametrize("writer", list(WRITERS))
def test_killed_writer_leaves_a_loadable_output(writer, inputs, tmp_path):
    kill_rounds(writer, inputs, tmp_path, rounds=1, seed=zlib.crc32(writer.encode()))


@pytest.mark.slow
@pytest.mark.parametrize("writer", [w for w in WRITERS if w != "demo"])  # demo: prepare then train, each killed
def test_killed_writer_leaves_a_loadable_output_many_rounds(writer, inputs, tmp_path):  # here; it has its round above
    kill_rounds(writer, inputs, tmp_path, rounds=3, seed=7)
