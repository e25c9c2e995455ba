"""One contract table for every trainer and objective (issue 28): the id model's objectives
(objectives.OBJECTIVES: masked, next-item, masked-sequence, text-mlm), the set-embedding losses
(embed_train: uniformity, nca, softmax) and the text classifier (train_textclass). Each one, on tiny
data (about 200 Wikispeedia pages for the set objectives): a few steps write a checkpoint and BEST; training N steps in one go and N/2 + a resume of N/2
give the same weights bit for bit; the model directory loads and ranks / predicts. Also the
registry's hooks (what train(), warmstart and the CLI ask instead of testing names) and the shared
run skeleton (rundir.py)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import superbloom as sb
from superbloom.model.batches import MaskConfig
from superbloom.storage.checkpoint import latest_checkpoint
from superbloom.heads import head_config
from superbloom.model.encoder import ModelConfig
from superbloom.training.objectives import OBJECTIVES, TEXT_MASKING, ObjectiveEntry, check_objective, objective_entry
from superbloom.training.optim import OptimConfig
from superbloom.training.rundir import config_changes, resume_point
from superbloom.setembed import EmbedConfig, EmbedTrainConfig, embed_train, load_embedder
from superbloom.text import TextPrepareConfig, prepare_text
from superbloom.textclass.config import TextClassConfig, TextClassRunConfig, TrainTextConfig
from superbloom.textclass.folder import load_classifier
from superbloom.textclass.model import TextClassifier
from superbloom.textclass.train import fit_classifier, train_textclass
from superbloom.textclass.docs import label_table, read_labelled, split_rows
from superbloom.model.warmstart import COOC_INIT_MAX_IDS, resolve_init

from conftest import walking_sequences

torch.set_num_threads(1)

STEPS = 8  # a whole run; the split run stops at STEPS // 2 and resumes
TINY = ModelConfig(d=16, heads=2, d_ff=32, layers=1)


# ------------------------------------------------------------------------------ tiny data


@pytest.fixture(scope="module")
def sequences(tmp_path_factory) -> Path:
    """Users walking item i -> i + 1 (leave-one-out split)."""
    return walking_sequences(tmp_path_factory.mktemp("seq"), 80)


@pytest.fixture(scope="module")
def text_data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("text")
    corpus = root / "corpus"
    corpus.mkdir()
    rng = np.random.default_rng(0)
    words = ["jazz", "paris", "album", "played", "born", "trumpet", "piano", "city", "river", "music"]
    for d in range(30):
        (corpus / f"doc{d}.txt").write_text(" ".join(rng.choice(words, 60)) + " .\n", encoding="utf-8")
    prepare_text(TextPrepareConfig((str(corpus),), str(root / "d"), vocab_size=1000, segment=16, test_fraction=0.2),
                 progress=False)
    return root / "d"


@pytest.fixture(scope="module")
def labels(wiki_small, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("labels") / "labels.tsv"
    names = wiki_small.set_names("train")
    path.write_text("".join(f"{k}\t{'AM' if k[:1].upper() < 'N' else 'NZ'}\n" for k in names))
    return path


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("docs")
    (root / "docs").mkdir()
    texts = {"animal": "the cat and the dog chased a horse while the cow watched",
             "tool": "use a hammer and a saw then the drill with pliers"}
    lines = []
    for i in range(16):
        label = "animal" if i % 2 == 0 else "tool"
        w = texts[label].split()
        (root / "docs" / f"doc{i}.txt").write_text(" ".join(w[i % 3:] + w[:i % 3]) + "\n")
        lines.append(f"doc{i}\t{label}")
    (root / "labels.tsv").write_text("\n".join(lines) + "\n")
    return root / "docs", root / "labels.tsv"


# ------------------------------------------------------------------------------ the trainers


def _loop(steps: int) -> sb.LoopConfig:
    return sb.LoopConfig(steps=steps, batch_size=8, eval_every=2, checkpoint_every=1e9, ema=0.9)


def id_model(objective: str):
    """A trainer (data, out, steps, resume) -> model directory, of train() with `objective`."""
    def run(fx, out, steps, resume=False):
        positions = 16 if objective != "masked" else 0
        mask = (MaskConfig(n=16, **{k: v for k, v in TEXT_MASKING.items() if k != "n"}) if objective == "text-mlm"
                else MaskConfig(n=12) if positions else MaskConfig())
        data = {"masked": fx["wiki"], "text-mlm": fx["text"]}.get(objective, fx["seq"])
        cfg = sb.TrainConfig(data=str(data), out=str(out), hash=sb.HashConfig(alpha=1, m=1) if positions else
                             sb.HashConfig(alpha=8), head=head_config("full") if positions else head_config("superbloom"),
                             model=ModelConfig(d=16, heads=2, d_ff=32, layers=1, positions=positions,
                                               causal=objective_entry(objective).causal),
                             mask=mask, objective=objective, loop=_loop(steps), val_fraction=0.1)
        return sb.train(cfg, progress=False, resume=resume)

    def use(out):
        p = sb.load(out)
        ranking = p.rank(np.array([[0, 1, -1], [2, -1, -1]]), 3)
        assert ranking.ids.shape == (2, 3)
    return run, use


def set_embedding(objective: str):
    given = {}  # the dataset the run trained on (config.json records its folder name only)

    def run(fx, out, steps, resume=False):
        given["data"] = fx["wiki"]
        cfg = EmbedTrainConfig(data=str(fx["wiki"]), out=str(out), labels=str(fx["labels"]) if objective != "uniformity"
                               else "", embed=EmbedConfig(objective=objective, segment=8, pool_heads=2),
                               hash=sb.HashConfig(alpha=8), model=ModelConfig(d=16, heads=2, d_ff=32, layers=1),
                               optim=OptimConfig(lr=3e-3, warmup=2), loop=_loop(steps), val_fraction=0.1)
        return embed_train(cfg, progress=False, resume=resume)

    def use(out):
        emb = load_embedder(out, device="cpu")
        data = sb.Dataset(given["data"])
        sim = emb.similar(emb.vocab.decode(np.asarray(data.train[3]).tolist()), k=2)
        assert sim.items[0][0] == data.set_names("train")[3]
    return run, use


def text_classifier():
    def run(fx, out, steps, resume=False):
        docs, labels = fx["documents"]
        cfg = TextClassRunConfig(out=str(out), corpus=(str(docs),), labels=str(labels), test_fraction=0.25,
                                 model=TextClassConfig(d=8, heads=2, attention="softmax", dropout=0.1),
                                 train=TrainTextConfig(epochs=steps // 2, batch_size=6, seed=1,
                                                       optim=OptimConfig(lr=1e-2, warmup=2)))
        return train_textclass(cfg, resume=resume)  # 12 training documents: 2 steps an epoch (STEPS // 2 epochs)

    def use(out):
        model, names, config = load_classifier(out)
        p = model.predict([["the", "cat"], ["a", "saw", "unseen"]])
        assert p.shape == (2, 2) and np.allclose(p.sum(1), 1, atol=1e-5)
        assert len(config["history"]) == STEPS // 2 and sorted(names) == ["animal", "tool"]
    return run, use


TRAINERS = {**{f"train-{o}": id_model(o) for o in ("masked", "next-item", "masked-sequence", "text-mlm")},
            **{f"embed-{o}": set_embedding(o) for o in ("uniformity", "nca", "softmax")},
            "textclass": text_classifier()}


def test_the_table_covers_every_registered_objective():
    assert {f"train-{name}" for name in OBJECTIVES} <= set(TRAINERS)


def latest_weights(out: Path) -> dict[str, torch.Tensor]:
    return load_file(str(latest_checkpoint(out) / "model.safetensors"))


@pytest.mark.parametrize("name", sorted(TRAINERS))
def test_contract(name, tmp_path, wiki_small, sequences, text_data, labels, documents):
    run, use = TRAINERS[name]
    fx = {"wiki": wiki_small.path, "seq": sequences, "text": text_data, "labels": labels, "documents": documents}
    whole = run(fx, tmp_path / "whole", STEPS)
    assert (whole / "LATEST").is_file() and (whole / "BEST").is_file(), "a checkpoint and BEST"
    assert json.loads(latest_checkpoint(whole).joinpath("state.json").read_text())["step"] == STEPS
    split = run(fx, tmp_path / "split", STEPS // 2)
    assert json.loads(latest_checkpoint(split).joinpath("state.json").read_text())["step"] == STEPS // 2
    with pytest.raises(ValueError, match="already holds a model"):
        run(fx, split, STEPS)
    run(fx, split, STEPS, resume=True)
    a, b = latest_weights(whole), latest_weights(split)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), "resume is not bit for bit"
    resumes = json.loads((split / "config.json").read_text())["resumes"]
    assert len(resumes) == 1 and any("steps" in c or "epochs" in c for c in resumes[0]["changed"])
    use(whole)


# ------------------------------------------------------------------------------ the text classifier


def test_train_textclass_gives_fit_classifiers_weights(tmp_path, documents):
    """The run (its folder, config files, checkpoints) takes exactly the in-memory fit's steps: the
    same weights and per-epoch figures, dropout and AdapSGD's random probes included."""
    docs_dir, labels = documents
    tc = TrainTextConfig(epochs=3, batch_size=5, seed=2, optim=OptimConfig(name="adapsgd"))
    mc = TextClassConfig(d=8, heads=2, attention="softmax", embedding="table", dropout=0.1)
    out = train_textclass(TextClassRunConfig(out=str(tmp_path / "m"), corpus=(str(docs_dir),), labels=str(labels),
                                             model=mc, train=tc, test_fraction=0.25))
    docs = read_labelled([str(docs_dir)], label_table(str(labels)))
    train, _, test = split_rows(len(docs), (0.75, 0.0, 0.25), 2)
    torch.manual_seed(2)
    vocab = np.unique(docs.ids[np.repeat(np.isin(np.arange(len(docs)), train), docs.lengths)])
    ref = TextClassifier(mc, 2, vocab=list(docs.words[vocab]))
    hist = fit_classifier(ref, docs, train, tc, eval_rows=test)
    model, _, config = load_classifier(out)
    assert all(torch.equal(x, y) for x, y in zip(ref.state_dict().values(), model.state_dict().values()))
    keep = ("epoch", "loss", "errors", "examples", "steps", "eval")
    assert [{k: h[k] for k in keep} for h in config["history"]] == [{k: h[k] for k in keep} for h in hist]


def test_textclass_refuses_an_old_directory_without_overwrite(tmp_path, documents):
    docs_dir, labels = documents
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model.safetensors").write_bytes(b"")
    cfg = TextClassRunConfig(out=str(tmp_path / "m"), corpus=(str(docs_dir),), labels=str(labels),
                             train=TrainTextConfig(epochs=1))
    with pytest.raises(ValueError, match="did not write"):  # storage/guarded.py: not ours, never replaced
        train_textclass(cfg)
    with pytest.raises(ValueError, match="CORPUS needs --labels"):
        TextClassRunConfig(out="x", corpus=("d",))


# ------------------------------------------------------------------------------ the registry's hooks


def test_entries_own_their_requirements_and_defaults():
    masked, nxt, mseq, text = (OBJECTIVES[n] for n in ("masked", "next-item", "masked-sequence", "text-mlm"))
    assert [e.ordered for e in (masked, nxt, mseq, text)] == [False, True, True, False]
    assert [e.gives_context for e in (masked, nxt, mseq, text)] == [True, True, True, True]  # text: rank_masked
    assert [e.causal for e in (masked, nxt, mseq, text)] == [False, True, False, False]
    from superbloom.model.text_batches import TEXT_MASK  # the text package's own constant agrees with the entry
    assert text.mask_defaults == {f: getattr(TEXT_MASK, f) for f in text.mask_defaults} and len(text.mask_defaults) == 5
    assert masked.mask_defaults == {} and nxt.mask_defaults["element_dropout"] == 0.0
    # init 'auto': the entry's choice, co-occurrence only up to COOC_INIT_MAX_IDS ids
    assert resolve_init("auto", 100, masked.auto_init) == "cooccurrence"
    assert resolve_init("auto", COOC_INIT_MAX_IDS + 1, masked.auto_init) == "normal"
    assert resolve_init("auto", 100, nxt.auto_init) == "cooccurrence"  # measured: sequence_decomposition.md
    assert resolve_init("auto", 100, mseq.auto_init) == "normal" and resolve_init("normal", 100, "cooccurrence") == "normal"
    with pytest.raises(ValueError, match="next-item objective only"):
        check_objective("text-mlm", ModelConfig(positions=32, causal=True), MaskConfig(n=32))
    with pytest.raises(ValueError, match="unknown objective 'nope'"):
        objective_entry("nope")


def test_a_registered_entry_is_asked_not_its_name(monkeypatch, wiki_small):
    """A new causal objective is one entry (and its name in training/config.py's OBJECTIVE_NAMES, which
    `train --help` lists without torch): the config check and the implied causal model follow it."""
    from superbloom.training import config as training_config
    from superbloom.training.resolve import resolve_train

    monkeypatch.setitem(OBJECTIVES, "my-causal", ObjectiveEntry("my-causal", OBJECTIVES["next-item"].build,
                                                                causal=True, mask_defaults={"mask_rate": 0.5}))
    monkeypatch.setattr(training_config, "OBJECTIVE_NAMES", (*training_config.OBJECTIVE_NAMES, "my-causal"))
    with pytest.raises(ValueError, match="next-item, my-causal objective only"):
        check_objective("masked", ModelConfig(causal=True), MaskConfig())
    check_objective("my-causal", ModelConfig(causal=True), MaskConfig())
    cfg, _ = resolve_train(wiki_small.path, "o", {"objective": "my-causal", "loop.steps": 1}, preset="none")
    assert cfg.model.causal and cfg.mask.mask_rate == 0.5


# ------------------------------------------------------------------------------ the run skeleton


def test_config_changes_split_architecture_from_the_rest():
    before = {"data": "a", "model": {"d": 8, "layers": 1}, "loop": {"seed": 0, "steps": 5}, "labels": "x"}
    now = {"data": "b", "model": {"d": 16, "layers": 1}, "loop": {"seed": 1, "steps": 9}, "labels": "x"}
    arch, other = config_changes(before, now, ("model", "labels", "loop.seed"))
    assert arch == ["model.d 8 -> 16", "loop.seed 0 -> 1"] and other == ["loop.steps 5 -> 9"]


def test_resume_point_policy(tmp_path):
    assert resume_point(tmp_path / "none", resume=False, overwrite=False) is None
    with pytest.raises(ValueError, match="exclude each other"):
        resume_point(tmp_path, resume=True, overwrite=True)
    (tmp_path / "checkpoints" / "step-1").mkdir(parents=True)  # incomplete: no state.json
    with pytest.raises(ValueError, match="no complete checkpoint"):
        resume_point(tmp_path, resume=True, overwrite=False)
    with pytest.raises(ValueError, match="already holds a model"):
        resume_point(tmp_path, resume=False, overwrite=False)
    assert resume_point(tmp_path, resume=False, overwrite=True) is None
