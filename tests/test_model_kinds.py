"""Every model kind (storage/kinds.py), trained tiny by its own trainer: `sb.load` returns its object
with info() (and predict / similar where they apply), older directories without "kind" load the
same, another kind given to predict / eval / serve is one line naming it, and each trainer's model
card (training/card.py) names its kind and the figures of its config.json and metrics.jsonl."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

import superbloom as sb
from superbloom.cli import main
from superbloom.inference.ensemble import Ensemble
from superbloom.inference.predictor import Predictor
from superbloom.setembed.embedder import Embedder
from superbloom.storage.kinds import ID_MODELS, KINDS, infer_kind
from superbloom.textclass.classifier import Classifier
from superbloom.training.card import EXAMPLES, LIMITS, render_card

NET = ["--d", "16", "--heads", "2", "--d-ff", "32", "--layers", "1", "--batch-size", "16", "--threads", "1", "--quiet"]


@pytest.fixture(autouse=True)
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _sequences(root):
    rng = np.random.default_rng(0)
    lines = [f"u{u} " + " ".join(f"i{(s + j) % 20}" for j in range(rng.integers(4, 10)))
             for u, s in enumerate(rng.integers(20, size=120))]
    (root / "seq.txt").write_text("\n".join(lines) + "\n")
    sb.prepare(sb.PrepareConfig(str(root / "seq.txt"), str(root / "seq"), read=sb.ReadConfig(format="lines"),
                                split="leave-one-out"), progress=False)
    return root / "seq"


def _text(root):
    from superbloom.text import TextPrepareConfig, prepare_text

    corpus = root / "corpus"
    corpus.mkdir()
    rng = np.random.default_rng(0)
    people, places = ["miles davis", "john coltrane", "bill evans"], ["paris", "new york", "copenhagen"]
    for d in range(30):
        (corpus / f"doc{d}.txt").write_text(" ".join(f"{people[rng.integers(3)]} played jazz in "
                                                     f"{places[rng.integers(3)]} ." for _ in range(8)) + "\n")
    prepare_text(TextPrepareConfig((str(corpus),), str(root / "text"), vocab_size=1000, segment=16,
                                   test_fraction=0.2), progress=False)
    return root / "text"


def _docs(root):
    d = root / "docs"
    d.mkdir()
    labels = []
    for i in range(16):
        words, label = (("the cat and the dog chased a horse", "animal") if i % 2 == 0 else
                        ("use a hammer and a saw then the drill", "tool"))
        (d / f"doc{i}.txt").write_text(words + ".\n")
        labels.append(f"doc{i}\t{label}")
    (root / "labels.tsv").write_text("\n".join(labels) + "\n")
    return d, root / "labels.tsv"


@pytest.fixture(scope="module")
def models(wiki_data, tmp_path_factory):
    """kind -> a model directory its trainer wrote (a few steps each, through the CLI)."""
    root = tmp_path_factory.mktemp("kinds")
    out = {k: root / k for k in KINDS}
    wiki = str(wiki_data.path)
    assert main(["train", wiki, "--out", str(out["set-model"]), "--preset", "small", "--head", "superbloom",
                 "--alpha", "8", "--m", "2", "--steps", "6", "--eval-every", "3", *NET]) == 0
    assert main(["train", "--preset", "none", str(_sequences(root)), "--out", str(out["sequence-model"]),
                 "--objective", "next-item", "--positions", "12", "--segment", "12", "--head", "full",
                 "--steps", "6", "--eval-every", "0", *NET]) == 0
    assert main(["train", "--preset", "none", str(_text(root)), "--out", str(out["text-model"]), "--objective",
                 "text-mlm", "--alpha", "4", "--m", "2", "--positions", "16", "--segment", "16", "--steps", "6",
                 "--eval-every", "0", *NET]) == 0
    assert main(["embed-train", wiki, "--out", str(out["set-embedding"]), "--objective", "uniformity",
                 "--steps", "4", "--d", "16", "--heads", "2", "--d-ff", "32", "--pool-heads", "2", "--alpha", "8",
                 "--segment", "8", "--batch-size", "16", "--eval-every", "2", "--warmup", "2", "--quiet"]) == 0
    assert main(["train", wiki, "--out", str(out["ensemble"]), "--members", "2", "--preset", "small",
                 "--steps", "6", "--eval-every", "3", *NET]) == 0
    docs, labels = _docs(root)
    assert main(["textclass-train", str(docs), "--labels", str(labels), "--out", str(out["text-classifier"]),
                 "--d", "16", "--heads", "2", "--epochs", "2", "--batch-size", "4", "--optimizer", "adamw",
                 "--threads", "1"]) == 0
    return out


OBJECTS = {"set-model": Predictor, "sequence-model": Predictor, "text-model": Predictor, "ensemble": Ensemble,
           "set-embedding": Embedder,
           "text-classifier": Classifier}


def answer(kind, model):
    """The kind's own calls answer (predict / similar where they apply)."""
    if kind in ("set-model", "ensemble"):
        assert len(model.predict(["Jazz", "Miles_Davis"], k=5).items) == 5
        assert len(model.similar("Jazz", k=3)) == 3
    elif kind == "sequence-model":
        assert len(model.predict(["i1", "i2"], k=3).items) == 3
    elif kind == "text-model":
        assert len(model.predict(["jazz"], k=3).items) == 3
        from superbloom.inference.fill import Filler
        assert Filler.from_predictor(model, "m").fill("miles davis played [MASK] in paris .", k=2).blanks
    elif kind == "set-embedding":
        assert len(model.similar("Jazz", k=4).items) == 4 and model.similar(["Jazz", "Paris"], k=2).items
    else:
        r = model.predict("the cat and the horse", k=2)
        assert r.label in ("animal", "tool")
        assert [s for s, _ in r.scores] == sorted(model.labels, key=lambda s: s != r.label)  # best first


def test_every_kind_has_a_loader_an_example_and_limitations():
    from superbloom import _LOADERS

    assert set(_LOADERS) == set(KINDS) == set(OBJECTS) == set(EXAMPLES) == set(LIMITS)


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_loads_with_sb_load_and_answers(models, kind):
    config = json.loads((models[kind] / "config.json").read_text())
    assert config["kind"] == kind  # its trainer recorded it
    model = sb.load(models[kind])
    assert type(model) is OBJECTS[kind]
    info = model.info()
    assert info["kind"] == kind and info["parameters"] > 0 and info["checkpoint"]
    answer(kind, model)


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_older_directory_without_kind_is_read_from_its_sections(models, kind, tmp_path):
    old = tmp_path / kind
    shutil.copytree(models[kind], old)
    config = json.loads((old / "config.json").read_text())
    del config["kind"]
    (old / "config.json").write_text(json.dumps(config))
    assert infer_kind(config) == kind
    model = sb.load(old)
    assert type(model) is OBJECTS[kind] and model.info()["kind"] == kind


def test_infer_kind_errors_name_the_file():
    with pytest.raises(ValueError, match=r"here\.json: unknown \"kind\" 'nope'"):
        infer_kind({"kind": "nope"}, "here.json")
    with pytest.raises(ValueError, match="not a model's config"):
        infer_kind({"data": {}})


@pytest.mark.parametrize("argv", [["predict", "{m}", "Jazz"], ["eval", "{m}", "{data}"],
                                  ["serve", "{m}", "--port", "1"], ["vectors", "{m}", "--out", "{tmp}/v.npy"]])
def test_a_set_embedding_given_to_an_id_model_command_is_one_line_naming_it(models, wiki_data, argv, tmp_path,
                                                                            capsys):
    args = [a.format(m=models["set-embedding"], data=wiki_data.path, tmp=tmp_path) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    # the loaders' kind check (storage/loading.expect_kind): the kind found, who wrote it, and what was expected
    assert len(err.splitlines()) == 1 and "holds a set embedding (superbloom embed-train)" in err
    assert "expected an id model" in err and "Traceback" not in err


def test_a_model_of_another_kind_given_to_the_other_loaders_names_it(models):
    from superbloom.textclass.folder import load_classifier

    with pytest.raises(ValueError, match="holds an id model .*expected a set embedding"):
        Embedder.load(models["set-model"])
    with pytest.raises(ValueError, match="holds a set embedding .*expected a text classifier"):
        load_classifier(models["set-embedding"])


# ---------------------------------------------------------------- model cards


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_trainer_writes_a_card_with_its_kind_and_figures(models, kind):
    d = models[kind]
    card = (d / "README.md").read_text()
    assert card == render_card(d)  # regenerated from the files alone: the same card
    config = json.loads((d / "config.json").read_text())
    first = d / config["members"][0] if kind == "ensemble" else d  # an ensemble: its members' training records
    last = json.loads((first / "metrics.jsonl").read_text().splitlines()[-1])
    assert f"Kind `{kind}`" in card and KINDS[kind].what in card
    assert f"parameters: {config['parameters']:,}" in card
    assert f"- {last['step']:,} steps in" in card
    assert f'sb.load("{d.name}")' in card and EXAMPLES[kind] in card and KINDS[kind].use in card
    assert str(d.parent) not in card  # no path of this machine
    assert ("Not evaluated here" in card) == (kind in ID_MODELS)
    if kind == "text-classifier":
        assert f"accuracy {config['history'][-1]['eval']['accuracy']:.4f}" in card
    if "dataset" in config:
        assert f"trained on `{config['dataset']['name']}`" in card
    preset = config.get("preset")
    assert (f"preset: `{preset['name']}`" if preset else "preset: none") in card
    if "ids" in config["data"]:
        assert f"{config['data']['ids']:,} ids" in card


def test_card_command_puts_an_evaluation_beside_its_baselines(models, wiki_data, tmp_path, capsys):
    d = tmp_path / "m"
    shutil.copytree(models["set-model"], d)
    assert main(["eval", str(d), str(wiki_data.path), "--json", "--max-sets", "40", "--baselines",
                 "popularity,cooccurrence", "--threads", "1"]) == 0
    (d / "eval.json").write_text(capsys.readouterr().out)
    res = json.loads((d / "eval.json").read_text())
    assert main(["card", str(d)]) == 0
    card = (d / "README.md").read_text()
    assert "| method | rec@1 | rec@10 | rec@20 | mrr | ndcg@10 |" in card
    assert f"| this model | {res['rec@1']:.4f} | {res['rec@10']:.4f} |" in card
    assert f"| cooccurrence | {res['baselines']['cooccurrence']['rec@1']:.4f} |" in card
    assert main(["card", str(tmp_path / "nothing")]) == 2
    assert "not a model directory (no config.json" in capsys.readouterr().err


# ---------------------------------------------------------------- sharing: model.save(dir) / sb.load(dir)


def same_answers(kind, a, b):
    """Two loaded models of `kind` answer identically (the kind's own calls)."""
    if kind in ("set-model", "ensemble", "sequence-model", "text-model"):
        ctx = {"sequence-model": ["i1", "i2"], "text-model": ["jazz"]}.get(kind, ["Jazz", "Miles_Davis"])
        assert a.predict(ctx, k=8).items == b.predict(ctx, k=8).items
        one = ctx[:1]
        assert np.array_equal(a.similar_items(one, 5).index, b.similar_items(one, 5).index)
    elif kind == "set-embedding":
        assert a.similar(["Jazz", "Paris"], k=4).items == b.similar(["Jazz", "Paris"], k=4).items
    else:
        assert a.predict("the cat and the horse", k=2).scores == b.predict("the cat and the horse", k=2).scores


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_round_trips_through_save_and_load(models, kind, tmp_path):
    model = sb.load(models[kind])
    out = model.save(tmp_path / "shared")
    again = sb.load(out)
    assert type(again) is OBJECTS[kind] and again.info()["kind"] == kind
    assert again.info()["parameters"] == model.info()["parameters"]
    same_answers(kind, model, again)
    assert not list(out.rglob("optimizer.*"))  # the training state stays behind
    assert (out / "README.md").read_text() == (models[kind] / "README.md").read_text()
    assert model.save(out) == out  # a model of ours there: replaced whole
    same_answers(kind, model, sb.load(out))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("the user's")
    with pytest.raises(ValueError, match="holds files that superbloom did not write"):
        model.save(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "the user's"
    with pytest.raises(ValueError, match="the model's own folder"):
        again.save(out)


def test_an_ensemble_assembled_in_memory_saves_as_a_folder(models, tmp_path):
    members = json.loads((models["ensemble"] / "config.json").read_text())["members"]
    ens = Ensemble.load([models["ensemble"] / m for m in members], mix=0.5)
    out = ens.save(tmp_path / "ens")
    again = sb.load(out)
    assert type(again) is Ensemble and again.mix == 0.5 and len(again.members) == len(members)
    same_answers("ensemble", ens, again)


def _front(card: str) -> dict:
    yaml = pytest.importorskip("yaml", reason="PyYAML reads the metadata block here (the [docs] extra has it)")
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("\n---\n", 1)[0][4:])


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_card_opens_with_a_metadata_block(models, kind):
    from superbloom.training.card import card_metadata

    meta = _front((models[kind] / "README.md").read_text())
    assert meta == card_metadata(models[kind])  # what the block says is what the files say
    assert meta["library_name"] == "superbloom" and meta["kind"] == kind and kind in meta["tags"]
    config = json.loads((models[kind] / "config.json").read_text())
    assert meta.get("parameters") == config.get("parameters")
    if kind in ("set-model", "ensemble"):
        assert meta["ids"] == 4093 and meta["dataset"] and meta["preset"] == "small"
        assert "rec@10" in meta["validation"]


def test_eval_puts_its_evaluation_with_intervals_on_the_card(models, wiki_data, tmp_path, capsys):
    d = tmp_path / "m"
    shutil.copytree(models["set-model"], d)
    assert main(["eval", str(d), str(wiki_data.path), "--max-sets", "60", "--baselines", "popularity,cooccurrence",
                 "--threads", "1", "--json"]) == 0
    out, err = capsys.readouterr()
    printed = json.loads(out)  # stdout stays the one JSON object
    assert "the model card now shows this evaluation" in err
    saved = json.loads((d / "eval.json").read_text())
    assert {k: v for k, v in saved.items() if k != "intervals"} == printed
    meta = _front((d / "README.md").read_text())["evaluation"]
    assert meta["protocol"] == "sets" and meta["metric"] == "rec@10" and meta["examples"] == printed["examples"]
    assert set(meta["methods"]) == {"this model", "popularity", "cooccurrence"} == set(meta["paired"]) | {"this model"}
    for name, r in meta["methods"].items():
        value = printed["rec@10"] if name == "this model" else printed["baselines"][name]["rec@10"]
        assert r["value"] == pytest.approx(value, abs=1e-4) and r["lo"] <= r["value"] <= r["hi"]
    pop = meta["paired"]["popularity"]
    assert pop["diff"] == pytest.approx(printed["rec@10"] - printed["baselines"]["popularity"]["rec@10"], abs=1e-4)
    assert pop["lo"] <= pop["diff"] <= pop["hi"]
    card = (d / "README.md").read_text()
    assert "| method | rec@1 | rec@10 | rec@20 | mrr | ndcg@10 | rec@10 95% interval | this model - it |" in card
    (d / "eval.json").unlink()
    (d / "eval.json").mkdir()  # a place we cannot write (even as root): the evaluation is still printed, with a note
    assert main(["eval", str(d), str(wiki_data.path), "--max-sets", "20", "--baselines", "none", "--quiet",
                 "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert "rec@10" in out and "note: the model card was not updated" in err
