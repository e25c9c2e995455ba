"""Training callbacks: where a run's metrics go besides metrics.jsonl (TensorBoard, MLflow, your own).

    superbloom train DATA --out MODEL --steps 2000 --log-to tensorboard:runs/tb --log-to mlflow:sqlite:///mlruns.db
    sb.train(cfg, callbacks=[MyCallback()])            # any object with record(record) and close()

loop.fit hands every record it writes to metrics.jsonl, as the same dict, to each callback: the
training records every 50 steps (step, loss, grad_norm, lr, examples_per_s, seconds, epoch), each
validation (step, seconds, final, val_*), and calls close() once when the loop ends (normally or by
an error). Only the process that writes (rank 0) calls them. A callback gets the numbers of a record
as scalars at its `step`; the other fields (final, a validation's non-numeric values) are left to it.

Adapters are built from a spec `SCHEME:TARGET` by the registry ADAPTERS (scheme -> Adapter: the
extra it needs and its builder), so a new destination is one entry, not an `if` in the loop:

    tensorboard:DIR     torch.utils.tensorboard's SummaryWriter writing event files in DIR (the [track] extra)
    mlflow:URI          an MLflow run at tracking URI (sqlite:///mlruns.db, http://...) (the [track] extra);
                        MLflow 3 refuses a file store (a directory, file:...) unless MLFLOW_ALLOW_FILE_STORE=true,
                        so such a URI is refused before the run, saying so

The packages are imported when the first record arrives, so building a callback (e.g. on every rank
under torchrun) costs nothing and only rank 0 opens a writer.
"""
from __future__ import annotations

import importlib.metadata
import math
import os
import time
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence, runtime_checkable

from .._extras import require_extra


@runtime_checkable
class Callback(Protocol):
    """Receives the loop's metrics records (the dicts of metrics.jsonl) and is closed once at the end."""

    def record(self, record: dict) -> None: ...

    def close(self) -> None: ...


def scalars(record: dict) -> dict[str, float]:
    """The numeric fields of a record, but `step` (the x axis) and booleans (`final`): name -> value."""
    return {k: float(v) for k, v in record.items()
            if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


class TensorBoard:
    """Each record's scalars as TensorBoard scalars at its step, tagged `train/NAME` or `val/NAME`
    (a validation record's val_ prefix becomes the val/ group), in event files under `logdir`."""

    def __init__(self, logdir: str):
        self.logdir, self.writer = logdir, None

    def record(self, record: dict) -> None:
        if self.writer is None:
            from torch.utils.tensorboard import SummaryWriter
            self.writer = SummaryWriter(log_dir=self.logdir)
        for name, value in scalars(record).items():
            tag = f"val/{name[4:]}" if name.startswith("val_") else f"train/{name}"
            self.writer.add_scalar(tag, value, global_step=int(record["step"]))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class MLflow:
    """Each record's scalars as MLflow metrics at its step, in one run started at the first record on
    tracking URI `uri` and ended by close(). Names are metrics.jsonl's with '@' written '_at_'
    (`val_rec@10` -> `val_rec_at_10`): MLflow's stores refuse '@' in a metric name."""

    def __init__(self, uri: str):
        self.uri, self.client, self.run_id = uri, None, None

    def record(self, record: dict) -> None:
        from mlflow.entities import Metric
        from mlflow.tracking import MlflowClient

        if self.client is None:
            self.client = MlflowClient(tracking_uri=self.uri)
            experiment = self.client.get_experiment_by_name("superbloom")
            experiment_id = (experiment.experiment_id if experiment is not None
                             else self.client.create_experiment("superbloom"))
            self.run_id = self.client.create_run(experiment_id).info.run_id
        now = int(time.time() * 1000)  # ms
        metrics = [Metric(k.replace("@", "_at_"), v, now, int(record["step"])) for k, v in scalars(record).items()]
        self.client.log_batch(self.run_id, metrics=metrics)

    def close(self) -> None:
        if self.client is not None:
            self.client.set_terminated(self.run_id)


@dataclass(frozen=True)
class Adapter:
    extra: str  # the pyproject extra that installs its package (_extras.py)
    module: str  # the import name of that package
    build: Callable[[str], Callback]  # target (the text after "SCHEME:") -> the callback
    target: str  # what the target is, for messages


ADAPTERS: dict[str, Adapter] = {
    "tensorboard": Adapter("track", "tensorboard", TensorBoard, "a directory for the event files"),
    "mlflow": Adapter("track", "mlflow", MLflow, "an MLflow tracking URI"),
}


def check_spec(spec: str, flag: str = "--log-to") -> tuple[Adapter, str]:
    """`SCHEME:TARGET` checked without building anything -> (its adapter, the target). ValueError naming
    `flag` for an unknown scheme, an empty target or a target the package will refuse; MissingExtra
    (naming the extra and how to install it) when the adapter's package is not installed."""
    scheme, sep, target = spec.partition(":")
    adapter = ADAPTERS.get(scheme)
    if adapter is None or not sep or not target:
        schemes = ", ".join(f"{s}:TARGET ({a.target})" for s, a in ADAPTERS.items())
        raise ValueError(f"{flag} {spec!r}: expected one of {schemes}")
    require_extra(adapter.extra, f"{flag} {scheme}:", modules=(adapter.module,))
    if scheme == "mlflow" and _refused_file_store(target):
        raise ValueError(f"{flag} {spec!r}: MLflow {importlib.metadata.version('mlflow')} refuses a file store; "
                         "give a database URI such as mlflow:sqlite:///mlruns.db (or an http:// server), or set "
                         "MLFLOW_ALLOW_FILE_STORE=true to use the directory anyway")
    return adapter, target


def _refused_file_store(uri: str) -> bool:
    """A tracking URI of MLflow's file store (file:..., or a path) that MLflow 3 refuses unless
    MLFLOW_ALLOW_FILE_STORE is true (the package's version and the variable, read without importing it)."""
    scheme = uri.split(":", 1)[0] if "://" in uri or uri.startswith("file:") else ""
    if scheme not in ("", "file") or os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() in ("true", "1"):
        return False
    try:
        return int(importlib.metadata.version("mlflow").split(".")[0]) >= 3
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False


def from_spec(spec: str, flag: str = "--log-to") -> Callback:
    """`SCHEME:TARGET` -> its adapter's callback (check_spec's errors first)."""
    adapter, target = check_spec(spec, flag)
    return adapter.build(target)


def close_all(callbacks: Sequence[Callback]) -> None:
    for c in callbacks:
        c.close()
