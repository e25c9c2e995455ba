"""No trained model is ever lost, and resume means resume (issue 10, items 1-3):

- a model directory is never written over without --overwrite or --resume, and with --overwrite the
  old model survives until the new run has a complete checkpoint (a run that fails first leaves it);
- checkpoint pointers only ever name complete checkpoints; a stale pointer falls back to the newest
  complete checkpoint; a resume that finds files it does not understand stops instead of starting over;
- training processes killed at random moments (checkpointing every step, so most kills land inside
  checkpoint writes) always leave a loadable directory, and resume continues from the newest one;
- --resume refuses architecture changes and records the settings it does change.
"""
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import superbloom as sb
from superbloom.storage.checkpoint import complete_checkpoints, latest_checkpoint
from superbloom.cli import main
from superbloom.training import loop
from superbloom.storage.files import load_json

TINY = ["--d", "16", "--heads", "2", "--d-ff", "32", "--layers", "1", "--batch-size", "16", "--eval-every", "0",
        "--val-fraction", "0.01", "--quiet", "--threads", "1"]


def digest(model_dir: Path) -> dict:
    """Every file of a directory -> sha256 (to check that nothing changed)."""
    return {str(p.relative_to(model_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(model_dir.rglob("*")) if p.is_file()}


@pytest.fixture()
def model(wiki_data, tmp_path):
    out = tmp_path / "m"
    assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(out), "--steps", "3", *TINY]) == 0
    return out


def pointed_step(model_dir: Path) -> int:
    """The step LATEST names, read without touching anything (0 when there is none yet)."""
    try:
        return int((model_dir / "LATEST").read_text().strip().split("-")[1])
    except (OSError, IndexError, ValueError):
        return 0


def train(data, out, *extra):
    return main(["train", "--preset", "none", str(data.path), "--out", str(out), *TINY, *extra])


def test_existing_model_is_not_overwritten_without_a_flag(wiki_data, model, capsys):
    before = digest(model)
    assert train(wiki_data, model, "--steps", "2") == 2
    assert "already holds a model; pass --resume to continue it or --overwrite" in capsys.readouterr().err
    assert digest(model) == before


def test_bad_flags_are_refused_before_the_disk_is_touched(wiki_data, model, capsys):
    before = digest(model)
    for bad in (["--lr", "nan"], ["--steps", "-5"], ["--batch-size", "0"], ["--alpha", "-1"]):
        with pytest.raises(SystemExit) as e:
            train(wiki_data, model, "--overwrite", *bad)
        assert e.value.code == 2
    assert "argument --lr: expected a finite number, got 'nan'" in capsys.readouterr().err
    assert train(wiki_data, model, "--overwrite", "--batch-size", "100000", "--steps", "2") == 2
    assert digest(model) == before


def test_overwrite_keeps_the_old_model_until_the_new_run_has_a_checkpoint(wiki_data, model, capsys, monkeypatch):
    before = digest(model)
    # a run whose loss becomes non-finite at its first step, before any checkpoint (the loss itself made
    # NaN: a diverging learning rate depends on the platform's arithmetic)
    real_step = loop.train_step
    monkeypatch.setattr(loop, "train_step", lambda model_, ddp, *a, **k: real_step(
        model_, lambda batch: ddp(batch) * float("nan"), *a, **k))
    assert train(wiki_data, model, "--overwrite", "--steps", "3") == 2
    assert "loss became" in capsys.readouterr().err
    monkeypatch.undo()
    assert digest(model) == before and not (model.parent / "m.new").exists()
    assert sb.load(model).predict(["Jazz"], k=3).items
    # a run that succeeds replaces it, with no staging directory left behind
    assert train(wiki_data, model, "--overwrite", "--steps", "4", "--seed", "1") == 0
    assert load_json(latest_checkpoint(model) / "state.json")["step"] == 4
    assert not (model.parent / "m.new").exists() and not (model.parent / "m.old").exists()
    assert load_json(model / "config.json")["train"]["loop"]["seed"] == 1


def test_stale_pointer_falls_back_to_the_newest_complete_checkpoint(model):
    ckpt = latest_checkpoint(model)
    assert ckpt.name == "step-000000003"
    # the kill of the old code: the pointed-to directory deleted, a complete copy left as .tmp
    ckpt.rename(ckpt.with_name(ckpt.name + ".tmp"))
    found = latest_checkpoint(model)
    assert found is not None and found.name == "step-000000003" and (found / "state.json").exists()
    # a pointer naming nothing at all: the newest complete checkpoint still loads
    (model / "LATEST").write_text("checkpoints/step-000000099\n")
    assert latest_checkpoint(model).name == "step-000000003"
    assert sb.load(model).predict(["Jazz"], k=3).items


def test_a_pointer_behind_a_newer_complete_checkpoint_loses_no_step(model):
    """A kill between a checkpoint's rename and its pointer's move: the newer one is taken; a complete
    .tmp (a kill between state.json and the rename) only by the resuming trainer, which renames it."""
    old = latest_checkpoint(model)
    newer = old.with_name("step-000000004")
    shutil.copytree(old, newer)
    assert (model / "LATEST").read_text().strip().endswith(old.name)
    assert latest_checkpoint(model) == newer  # the pointer still names step 3
    newer.rename(newer.with_name(newer.name + ".tmp"))
    assert latest_checkpoint(model) == old  # a reader leaves a .tmp alone while a pointer is valid
    assert newer.with_name(newer.name + ".tmp").exists()
    assert latest_checkpoint(model, promote=True) == newer and newer.is_dir()  # the trainer takes it


def test_resume_that_finds_files_it_does_not_understand_stops(wiki_data, model, capsys):
    shutil.rmtree(model / "checkpoints")
    before = digest(model)
    assert train(wiki_data, model, "--steps", "5", "--resume") == 2
    assert "holds model files but no complete checkpoint" in capsys.readouterr().err
    assert digest(model) == before


def test_resume_refuses_architecture_changes_and_records_the_others(wiki_data, model, capsys):
    before = digest(model)
    assert train(wiki_data, model, "--steps", "5", "--resume", "--alpha", "8", "--layers", "2") == 2
    err = capsys.readouterr().err
    assert "--resume cannot change the model or its data" in err and "hash.alpha 1 -> 8" in err
    assert "model.layers 1 -> 2" in err and digest(model) == before
    assert train(wiki_data, model, "--steps", "5", "--resume", "--lr", "0.001") == 0
    printed = capsys.readouterr()
    assert "resuming from step-000000003" in printed.err and "optim.lr 0.003 -> 0.001" in printed.out + printed.err
    cfg = load_json(model / "config.json")
    assert cfg["train"]["optim"]["lr"] == 0.001 and cfg["hash"]["alpha"] == 1
    assert cfg["resumes"][0]["from"] == "step-000000003"
    assert any("optim.lr" in c for c in cfg["resumes"][0]["changed"])
    assert load_json(latest_checkpoint(model) / "state.json")["step"] == 5


@pytest.mark.slow
def test_killed_at_random_moments_the_directory_always_loads_and_resume_continues(wiki_small, tmp_path):
    """SIGKILL a training process (checkpointing after every step) at random moments, six times (on about
    200 Wikispeedia pages: each restart loads and starts in a moment, the kills land in the writes)."""
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "superbloom", "train", "--preset", "none", str(wiki_small.path), "--out", str(out), "--steps", "100000",
           "--checkpoint-every", "0", "--resume", *TINY]
    rnd = random.Random(0)
    resumed_from = []
    for attempt in range(6):
        newest = complete_checkpoints(out, tmp=True)
        expect = max((load_json(p / "state.json")["step"] for p in newest), default=None)
        log = tmp_path / f"log{attempt}.txt"
        with open(log, "w") as f:
            proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
            deadline = time.time() + 180
            while pointed_step(out) <= (expect or 0):  # wait until it has trained and checkpointed anew
                assert proc.poll() is None, log.read_text()
                assert time.time() < deadline, log.read_text()
                time.sleep(0.05)
            time.sleep(rnd.uniform(0.0, 1.0))  # it is training and writing a checkpoint after every step
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        text = log.read_text()
        if expect is not None:
            assert f"(step {expect}," in text, (expect, text)
            resumed_from.append(expect)
        ckpt = latest_checkpoint(out)
        if ckpt is not None:  # whatever moment the kill hit, the directory loads
            assert len(sb.load(out).predict(["Jazz"], k=3).items) == 3
    assert len(resumed_from) == 5 and resumed_from == sorted(resumed_from)


def test_train_ends_with_where_its_time_went(wiki_data, tmp_path, capsys, monkeypatch):
    """The last line of train: the wall time in all, the loop's seconds of this run (a resumed run's
    earlier seconds not counted again), each step around it that took a second or more, the rest."""
    from types import SimpleNamespace

    from superbloom.training import train as tr

    clock = iter([0.0, 10.0, 12.6, 20.0, 20.4, 100.0])
    monkeypatch.setattr(tr, "time", SimpleNamespace(time=lambda: next(clock)))
    phases = tr.Phases()
    with phases("fitting the head"):
        pass
    with phases("the start"):  # 0.4 s: left out of the line
        pass
    assert phases.line(60.0) == ("100 s in all: training 60 s, fitting the head 3 s, the rest 37 s "
                                 "(the last validation, checkpoints)")
    monkeypatch.undo()
    loud = [a for a in TINY if a != "--quiet"]
    out = tmp_path / "m"
    for steps, resume in (("3", ()), ("5", ("--resume",))):
        assert main(["train", "--preset", "none", str(wiki_data.path), "--out", str(out), *loud, "--steps", steps,
                     *resume]) == 0
        line = [x for x in capsys.readouterr().err.splitlines() if " s in all: training " in x]
        assert len(line) == 1 and line[0].split(" in all: ")[0].split()[-2].isdigit()
