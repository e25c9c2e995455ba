"""Training presets (training/presets.py, `train --preset`): auto picks the measured recipe for each
kind of dataset, prints it and records it; typed flags win; meaningless typed flags are refused."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import superbloom as sb
from superbloom.cli import main
from superbloom.training import presets
from superbloom.training.presets import PRESETS, DatasetFacts, choose

from conftest import walking_sequences

TINY = ["--d", "16", "--heads", "2", "--d-ff", "32", "--layers", "1", "--batch-size", "8", "--threads", "1",
        "--quiet", "--steps", "2", "--eval-every", "0"]


def _sets(root: Path, n_sets=120, n_ids=40, seed=0) -> Path:
    rng = np.random.default_rng(seed)
    lines = [f"s{i} " + " ".join(f"i{j}" for j in rng.choice(n_ids, rng.integers(3, 8), replace=False))
             for i in range(n_sets)]
    (root / "sets.txt").write_text("\n".join(lines) + "\n")
    sb.prepare(sb.PrepareConfig(str(root / "sets.txt"), str(root / "d"), read=sb.ReadConfig(format="lines")),
               progress=False)
    return root / "d"


@pytest.fixture(scope="module")
def sets_data(tmp_path_factory) -> Path:
    return _sets(tmp_path_factory.mktemp("psets"))


@pytest.fixture(scope="module")
def seq_data(tmp_path_factory) -> Path:
    return walking_sequences(tmp_path_factory.mktemp("pseq"), 120)


@pytest.fixture(scope="module")
def text_data(tmp_path_factory) -> Path:
    from superbloom.text.prepare import TextPrepareConfig, prepare_text

    root = tmp_path_factory.mktemp("ptext")
    (root / "corpus").mkdir()
    words = "the cat sat on a mat while dogs ran in the park near old trees".split()
    rng = np.random.default_rng(0)
    for d in range(30):
        (root / "corpus" / f"doc{d}.txt").write_text(
            ". ".join(" ".join(rng.choice(words, 8)) for _ in range(6)) + ".\n", encoding="utf-8")
    prepare_text(TextPrepareConfig((str(root / "corpus"),), str(root / "d"), vocab_size=1000, segment=16,
                                   test_fraction=0.2), progress=False)
    return root / "d"


def _train(data, out, *flags) -> int:
    return main(["train", str(data), "--out", str(out), *TINY, *flags])


def _config(out) -> dict:
    return json.loads((Path(out) / "config.json").read_text())


# ---------------------------------------------------------------- auto's choice


@pytest.mark.parametrize("facts, name", [
    (DatasetFacts(ids=4_000, mean_set_size=5.0, split="sets", text=False), "small"),
    (DatasetFacts(ids=50_000, mean_set_size=5.0, split="sets", text=False), "small"),
    (DatasetFacts(ids=50_001, mean_set_size=5.0, split="sets", text=False), "large"),
    (DatasetFacts(ids=500_001, mean_set_size=5.0, split="sets", text=False), "millions"),
    (DatasetFacts(ids=4_000_000, mean_set_size=8.0, split="leave-one-out", text=False), "sequences"),
    (DatasetFacts(ids=20, mean_set_size=30.0, split="sets", text=True), "text"),
])
def test_auto_rules(facts, name):
    assert choose(facts) == name


def test_every_preset_names_an_existing_evidence_file_and_known_flags():
    from superbloom.cli import command_parser

    dests = {a.dest for a in command_parser("train")._actions}
    root = Path(__file__).resolve().parents[1]
    for p in PRESETS.values():
        assert (root / p.evidence).is_file(), p.evidence
        assert set(p.settings) <= dests, set(p.settings) - dests


def test_help_lists_the_presets(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    text, glued = " ".join(out.split()), "".join(out.split())  # argparse breaks a long path across lines
    for p in PRESETS.values():
        assert f"{p.name} (" in text and p.evidence in glued


# ---------------------------------------------------------------- auto on tiny datasets of each kind


def test_auto_small_sets(sets_data, tmp_path, capsys):
    assert _train(sets_data, tmp_path / "m") == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("preset"))
    assert line.startswith("preset auto -> small: head hybrid, alpha 1, m 1")
    assert "(evidence: benchmarks/results/quality.md)" in line
    cfg = _config(tmp_path / "m")
    assert cfg["preset"]["name"] == "small" and cfg["preset"]["chosen_by"] == "auto"
    assert cfg["preset"]["applied"] == {"head.name": "hybrid", "hash.alpha": 1, "hash.m": 1}
    assert cfg["preset"]["dataset"]["ids"] == 40 and cfg["preset"]["dataset"]["split"] == "sets"
    assert cfg["head"]["name"] == "hybrid" and (cfg["hash"]["alpha"], cfg["hash"]["m"]) == (1, 1)


def test_auto_large_and_millions_by_threshold(sets_data, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(presets, "SMALL_MAX_IDS", 10)
    assert _train(sets_data, tmp_path / "large") == 0
    cfg = _config(tmp_path / "large")
    assert cfg["preset"]["name"] == "large" and cfg["head"]["name"] == "hybrid" and cfg["head"]["samples"] == 4096
    monkeypatch.setattr(presets, "LARGE_MAX_IDS", 20)
    assert _train(sets_data, tmp_path / "millions", "--alpha", "4") == 0  # 40 ids: alpha 50 leaves one bucket
    cfg = _config(tmp_path / "millions")
    assert cfg["preset"]["name"] == "millions" and cfg["head"]["name"] == "hashed-hybrid"
    assert cfg["hash"] == {**cfg["hash"], "alpha": 4, "m": 2, "coherent": 2} and cfg["train"]["init"] == "cooccurrence"
    assert cfg["head"]["neighbours"] == 50
    assert "preset auto -> millions: head hashed-hybrid, alpha 50, m 2, coherent 2, init cooccurrence, neighbours 50, checkpoint-every 600.0" \
        in capsys.readouterr().out


def test_auto_sequences(seq_data, tmp_path, capsys):
    assert _train(seq_data, tmp_path / "m") == 0
    cfg = _config(tmp_path / "m")
    assert cfg["preset"]["name"] == "sequences" and cfg["train"]["objective"] == "next-item"
    assert cfg["head"]["name"] == "hybrid" and cfg["head"]["samples"] == 2048
    assert cfg["model"]["positions"] == 50 and cfg["train"]["mask"]["n"] == 50  # the preset's, not the objective's
    assert cfg["model"]["d"] == 16 and "model.d" in cfg["preset"]["overridden"]  # TINY's typed --d wins
    assert "preset auto -> sequences:" in capsys.readouterr().out


def test_auto_text(text_data, tmp_path):
    assert _train(text_data, tmp_path / "m", "--alpha", "4") == 0  # 200 ids: alpha 40 gives too few buckets
    cfg = _config(tmp_path / "m")
    assert cfg["preset"]["name"] == "text" and cfg["train"]["objective"] == "text-mlm"
    assert (cfg["hash"]["alpha"], cfg["hash"]["m"], cfg["model"]["positions"]) == (4, 2, 128)
    assert cfg["preset"]["applied"] == {"objective": "text-mlm", "model.positions": 128, "hash.m": 2,
                                        "head.name": "hashed-hybrid", "head.term": "bigram"}
    assert cfg["head"]["name"] == "hashed-hybrid" and cfg["head"]["term"] == "bigram"


# ---------------------------------------------------------------- typed flags


def test_typed_flags_override_the_preset(sets_data, tmp_path):
    assert _train(sets_data, tmp_path / "m", "--head", "full", "--preset", "small") == 0
    cfg = _config(tmp_path / "m")
    assert cfg["head"]["name"] == "full" and cfg["preset"]["chosen_by"] == "--preset"
    assert cfg["preset"]["overridden"] == ["head.name"] and cfg["preset"]["applied"] == {"hash.alpha": 1, "hash.m": 1}


@pytest.mark.parametrize("flags, flag, why", [
    (["--m", "2"], "--m:", "unhashed"),
    (["--coherent", "1"], "--coherent:", "unhashed"),
    (["--preset", "text", "--tree", "fano"], "--tree:", "hashed-hybrid head"),
    (["--preset", "none", "--m", "3"], "--m:", "alpha 0 (auto) trains unhashed at 40 ids"),
    (["--preset", "millions", "--item-term", "bigram"], "--item-term bigram:", "not prepare-text data"),
])
def test_meaningless_flags_are_refused(sets_data, tmp_path, capsys, flags, flag, why):
    assert _train(sets_data, tmp_path / "m", *flags) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and flag in err and why in err
    assert not (tmp_path / "m").exists()


def test_typed_alpha_keeps_m_meaningful(sets_data, tmp_path):
    assert _train(sets_data, tmp_path / "m", "--preset", "none", "--alpha", "4", "--m", "3") == 0
    assert _config(tmp_path / "m")["hash"]["m"] == 3


# ---------------------------------------------------------------- --preset none: today's defaults


def test_preset_none_is_the_library_defaults(sets_data, tmp_path, capsys):
    from superbloom.training.resolve import resolve_train

    cfg, choice = resolve_train(sets_data, tmp_path / "m", {"loop.steps": 2}, preset="none")
    assert choice is None and capsys.readouterr().out == ""
    plain = sb.TrainConfig(data=str(sets_data), out=str(tmp_path / "m"), loop=sb.LoopConfig(steps=2))
    assert cfg == plain  # the configs' own defaults, no preset applied
    argv = ["train", str(sets_data), "--out", str(tmp_path / "m"), "--steps", "2"]
    assert main([*argv, "--preset", "none", *TINY[:-4]]) == 0
    cfg = _config(tmp_path / "m")
    assert "preset" not in cfg and cfg["head"]["name"] == "superbloom"


def test_resume_refuses_a_typed_preset(sets_data, tmp_path, capsys):
    assert _train(sets_data, tmp_path / "m", "--preset", "none") == 0
    assert main(["train", str(sets_data), "--out", str(tmp_path / "m"), *TINY, "--resume", "--preset", "small"]) == 2
    assert "--preset small: a resumed run keeps its saved settings" in capsys.readouterr().err
    assert main(["train", str(sets_data), "--out", str(tmp_path / "m"), *TINY, "--resume", "--preset", "none"]) == 0


def test_with_no_stop_flag_the_preset_trains_until_the_network_stops_improving(sets_data, tmp_path, monkeypatch,
                                                                                capsys):
    """`train DATA --out M` and nothing else runs: the preset's stop rule (patience on the validation, within
    its cap) is used when no bound is typed; any typed bound (--steps, --epochs, --time-budget) replaces it
    whole, a typed --patience its patience only."""
    from superbloom.training.presets import PATIENCE, STOP_FLAGS, STOP_RULE, resolve

    facts = DatasetFacts(ids=40, mean_set_size=5.0, split="sets", text=False)
    # every preset can run alone: a cap, and the patience
    assert all(set(p.stop) <= set(STOP_RULE) and set(p.stop) & set(STOP_FLAGS) for p in PRESETS.values())
    assert all(p.stop["loop.patience"] == PATIENCE for p in PRESETS.values())
    applied = resolve("auto", facts, set()).applied
    assert applied["loop.steps"] == PRESETS["small"].stop["loop.steps"] and applied["loop.patience"] == PATIENCE
    for typed in STOP_FLAGS:  # a typed bound wins: no cap, no patience of the preset's
        assert not set(resolve("auto", facts, {typed}).applied) & set(STOP_RULE)
    typed = resolve("auto", facts, {"loop.patience"}).applied  # a typed --patience keeps the cap
    assert "loop.patience" not in typed and typed["loop.steps"] == PRESETS["small"].stop["loop.steps"]
    with pytest.raises(ValueError, match="a stop rule is made of"):
        presets.Preset("x", {}, "never", "README.md", stop={"optim.lr": 1.0})
    with pytest.raises(ValueError, match="a stop rule is made of"):  # patience alone has no cap
        presets.Preset("x", {}, "never", "README.md", stop={"loop.patience": 2})
    small = dict(PRESETS["small"].stop)
    monkeypatch.setitem(PRESETS, "small", presets.Preset("small", PRESETS["small"].settings, "tiny", PRESETS["small"].evidence,
                                                         stop={"loop.steps": 3, "loop.patience": 2}))
    assert main(["train", str(sets_data), "--out", str(tmp_path / "m"), "--d", "16", "--heads", "2", "--d-ff", "32",
                 "--layers", "1", "--batch-size", "8", "--threads", "1", "--quiet", "--eval-every", "1"]) == 0
    assert "stop: steps 3, patience 2 (no bound given)" in capsys.readouterr().out
    cfg = _config(tmp_path / "m")
    assert cfg["train"]["loop"]["steps"] == 3 and cfg["preset"]["applied"]["loop.steps"] == 3 and small["loop.steps"] == 8000
    assert cfg["train"]["loop"]["patience"] == 2
