"""`superbloom textclass-train` and `superbloom textclass` end to end on a tiny hand-made corpus."""
from __future__ import annotations

import json

import pytest

from superbloom.cli import main
from superbloom.textclass.folder import load_classifier

ANIMALS = "the cat and the dog chased a horse while the cow and sheep watched the goat"
TOOLS = "use a hammer and a saw then the drill and wrench with chisel and pliers"


@pytest.fixture
def corpus(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    labels = ["# name\tlabel"]
    for i in range(20):
        text, label = (ANIMALS, "animal") if i % 2 == 0 else (TOOLS, "tool")
        words = text.split()
        (d / f"doc{i}.txt").write_text(" ".join(words[i % 3:] + words[:i % 3]) + ".\n")
        labels.append(f"doc{i}\t{label}")
    labels.append("doc0\tpet")  # a second label: the first listed is used
    (tmp_path / "labels.tsv").write_text("\n".join(labels) + "\n")
    return d, tmp_path / "labels.tsv"


@pytest.mark.parametrize("embedding", ["dynamic", "table"])
def test_train_then_classify(corpus, tmp_path, capsys, embedding):
    docs, labels = corpus
    out = tmp_path / "model"
    rc = main(["textclass-train", str(docs), "--labels", str(labels), "--out", str(out), "--embedding", embedding,
               "--attention", "softmax", "--heads", "4", "--d", "16", "--epochs", "12", "--batch-size", "4",
               "--optimizer", "adamw", "--lr", "0.01", "--warmup", "5", "--test-fraction", "0.2", "--threads", "1"])
    assert rc == 0
    printed = capsys.readouterr()
    assert "20 documents (16 train, 4 test), 2 labels, 1 with several labels" in printed.err  # logging: stderr
    assert "epoch 12:" in printed.err and f"wrote {out}" in printed.out
    model, names, config = load_classifier(out)
    assert sorted(names) == ["animal", "tool"] and config["textclass"]["embedding"] == embedding
    assert config["history"][-1]["eval"]["examples"] == 4
    assert (out / "vocab.txt").exists() == (embedding == "table")
    rc = main(["textclass", str(out), "the cat and the goat", "a saw and a drill", "--json", "--k", "2"])
    assert rc == 0
    answers = json.loads(capsys.readouterr().out)["predictions"]  # one JSON object, like every command
    assert [a["label"] for a in answers] == ["animal", "tool"]
    assert len(answers[0]["scores"]) == 2


def test_errors_name_the_fix(corpus, tmp_path, capsys):
    docs, labels = corpus
    assert main(["textclass-train", str(docs), "--out", str(tmp_path / "m")]) == 2
    assert "CORPUS needs --labels FILE" in capsys.readouterr().err
    assert main(["textclass-train", str(docs), "--labels", str(labels), "--out", str(tmp_path / "m"),
                 "--heads", "3"]) == 2
    assert "heads=3 must divide d=100" in capsys.readouterr().err
    assert main(["textclass", str(tmp_path / "nothing"), "text"]) == 2
    assert "not a text classifier directory" in capsys.readouterr().err


def test_help_documents_the_heads_attention_and_embedding_flags(capsys):
    with pytest.raises(SystemExit):
        main(["textclass-train", "--help"])
    text = capsys.readouterr().out
    for flag in ("--heads", "--attention", "--embedding", "--optimizer", "kernel-auto", "--wikispeedia"):
        assert flag in text
