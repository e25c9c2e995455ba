"""Training callbacks (training/callbacks.py): every record of metrics.jsonl reaches them, once closed;
`--log-to tensorboard:DIR` writes event files whose scalars are metrics.jsonl's numbers at its steps;
a missing package or an unknown scheme is one line naming the flag (exit 2)."""
import json
import sys

import pytest

import superbloom as sb
from superbloom.cli import main
from superbloom.training.callbacks import ADAPTERS, from_spec, scalars

TINY = ["--d", "16", "--heads", "2", "--d-ff", "32", "--layers", "1", "--batch-size", "16", "--quiet",
        "--threads", "1", "--preset", "none"]


def records(model_dir):
    return [json.loads(line) for line in (model_dir / "metrics.jsonl").read_text().splitlines()]


class Recorder:
    def __init__(self):
        self.seen, self.closed = [], 0

    def record(self, record):
        self.seen.append(dict(record))

    def close(self):
        self.closed += 1


def test_a_callback_gets_every_record_of_metrics_jsonl(wiki_data, tmp_path):
    cb = Recorder()
    cfg = sb.TrainConfig(data=str(wiki_data.path), out=str(tmp_path / "m"), hash=sb.HashConfig(alpha=8),
                         model=sb.ModelConfig(d=16, heads=2, d_ff=32, layers=1),
                         loop=sb.LoopConfig(steps=100, batch_size=16, eval_every=50))
    sb.train(cfg, progress=False, callbacks=[cb])
    written = records(tmp_path / "m")
    assert cb.seen == written and cb.closed == 1
    kinds = [("loss" in r, r.get("final")) for r in written]  # training log every 50 steps, validations, the end
    assert kinds == [(True, None), (False, False), (True, None), (False, False), (False, True)]


def test_scalars_are_the_numbers_but_the_step():
    assert scalars({"step": 50, "loss": 1.5, "final": True, "val_rec@10": 0.25, "note": "x", "epoch": 0}) == \
        {"loss": 1.5, "val_rec@10": 0.25, "epoch": 0.0}


def test_log_to_tensorboard_writes_the_same_metrics_and_steps(wiki_data, tmp_path):
    pytest.importorskip("tensorboard", reason="needs the tensorboard package: pip install 'superbloom[track]'")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tb, out = tmp_path / "tb", tmp_path / "m"
    assert main(["train", str(wiki_data.path), "--out", str(out), *TINY, "--steps", "100", "--eval-every", "50",
                 "--log-to", f"tensorboard:{tb}"]) == 0
    assert list(tb.glob("events.out.tfevents.*")), "no event file"
    acc = EventAccumulator(str(tb), size_guidance={"scalars": 0})
    acc.Reload()
    got = {(tag, e.step): e.value for tag in acc.Tags()["scalars"] for e in acc.Scalars(tag)}
    want = {}
    for r in records(out):
        for name, value in scalars(r).items():
            tag = f"val/{name[4:]}" if name.startswith("val_") else f"train/{name}"
            want[(tag, r["step"])] = value  # the final validation repeats step 100's: the last value wins
    assert {"train/loss", "train/lr", "val/rec@10"} <= {t for t, _ in want}
    assert set(got) == set(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-6, abs=1e-12), key  # event files hold float32


def test_log_to_mlflow_logs_the_metrics(wiki_data, tmp_path):
    pytest.importorskip("mlflow", reason="needs the mlflow package: pip install 'superbloom[track]'")
    from mlflow.tracking import MlflowClient

    uri, out = f"sqlite:///{tmp_path / 'mlruns.db'}", tmp_path / "m"  # MLflow 3 refuses a file store by default
    assert main(["train", str(wiki_data.path), "--out", str(out), *TINY, "--steps", "50", "--eval-every", "0",
                 "--log-to", f"mlflow:{uri}"]) == 0
    client = MlflowClient(tracking_uri=uri)
    run = client.search_runs([client.get_experiment_by_name("superbloom").experiment_id])[0]
    history = client.get_metric_history(run.info.run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(r["step"], r["loss"]) for r in records(out) if "loss" in r]
    val = client.get_metric_history(run.info.run_id, "val_rec_at_10")  # '@' is not a name MLflow takes
    assert [(m.step, m.value) for m in val] == [(r["step"], r["val_rec@10"]) for r in records(out) if "val_rec@10" in r]
    assert val


def test_a_missing_package_names_the_pip_command(wiki_data, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # as if not installed
    assert main(["train", str(wiki_data.path), "--out", str(tmp_path / "m"), *TINY, "--steps", "2",
                 "--log-to", f"tensorboard:{tmp_path / 'tb'}"]) == 2
    err = capsys.readouterr().err
    assert "--log-to tensorboard: needs tensorboard" in err and "pip install -e '.[track]' from a clone" in err
    assert not (tmp_path / "m").exists()  # refused before anything was written


@pytest.mark.parametrize("spec", ["wandb:runs", "tensorboard", "tensorboard:", "runs/tb"])
def test_a_bad_spec_is_refused_naming_the_flag(spec):
    with pytest.raises(ValueError, match=r"--log-to .*expected one of tensorboard:TARGET"):
        from_spec(spec)


def test_every_adapter_names_an_extra_of_pyproject():
    import tomllib
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for scheme, adapter in ADAPTERS.items():
        assert any(dep.startswith(adapter.module) for dep in extras[adapter.extra]), scheme
