"""The reporting side of the paper benchmarks: metric rows with confidence intervals, markdown
tables, plots, and the result files in benchmarks/results/paper/ (JSON and PNG; PAPER.md draws the
tables from the JSON).

Intervals are 95% percentile bootstraps that resample held-out *sets* (examples of one set are not
independent): superbloom.evaluation.metrics computes them, this module rounds them to 4 decimals for the files.
"""
from __future__ import annotations

import json
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import numpy as np

from benchmarks import machine
from benchmarks.machine import machine_info, machine_line, numpy_json
from superbloom.evaluation.metrics import mean_ci, paired_difference, summarize_ci

from .datasets import EVAL_SEED, REPO, SEGMENT, TARGETS_PER_SET
from .runs import DEPTH, THREADS, Run

RESULTS = REPO / "benchmarks" / "results" / "paper"
N_BOOT = 1000
DIGITS = 4  # decimals kept in the result files


def rounded(d: dict) -> dict:
    return {k: round(v, DIGITS) for k, v in d.items()}


def rec_metrics(ranks: np.ndarray, groups: np.ndarray) -> dict:
    """rec@1/10/20 with set-bootstrap CIs, and MRR (truncated at 20), rounded."""
    return rounded(summarize_ci(ranks, groups, n_boot=N_BOOT))


def interval(values: np.ndarray, groups: np.ndarray) -> tuple[float, float, float]:
    """(mean, lo, hi) of per-example values with their set-bootstrap CI, rounded."""
    return tuple(round(v, DIGITS) for v in mean_ci(values, groups, n_boot=N_BOOT))


def paired(a: np.ndarray, b: np.ndarray, groups: np.ndarray) -> dict:
    """{diff, lo, hi}: mean(a - b) over the same examples with its set-bootstrap CI, rounded."""
    return rounded(paired_difference(a, b, groups, n_boot=N_BOOT))


# ------------------------------------------------------------------------------------ rows and tables


def model_row(method: str, run: Run, rec: dict, groups: np.ndarray, **extra) -> dict:
    r = run
    return {"dataset": r.dataset, "method": method, "head": r.head.name, "alpha": r.hash.alpha, "m": r.hash.m,
            "coherent": r.hash.coherent, "d": r.model.d, "layers": r.model.layers, "parameters": rec["parameters"],
            "budget_s": r.budget, "train_seconds": rec["train_seconds"], "steps": rec["steps"],
            "examples_per_s": rec["examples_per_s"], **rec_metrics(rec["ranks"], groups),
            "load_avg": rec["load_avg_after"], "key": rec["key"], **extra}


def baseline_rows(name: str, base: dict, groups: np.ndarray) -> list[dict]:
    rows = []
    for b, v in base.items():
        row = {"dataset": name, "method": b, "head": "-", "parameters": v.get("stored"), "budget_s": None,
               "train_seconds": v.get("seconds"), "steps": None, "examples_per_s": None}
        if "skipped" in v:
            row["note"] = v["skipped"]
        else:
            row.update(rec_metrics(v["ranks"], groups))
        rows.append(row)
    return rows


def fmt(v, col: str = "") -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "-"
    if col in ("train_seconds", "budget_s", "examples_per_s") and isinstance(v, (int, float)):
        return f"{v:,.0f}"
    if col == "parameters" and isinstance(v, (int, np.integer)):
        return f"{v / 1e6:.2f}M" if v >= 1e5 else f"{v:,}"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:,.0f}"
    return str(v)


def ci_cell(value: float, lo: float, hi: float) -> str:
    """'0.123 [0.100, 0.150]'."""
    return f"{value:.3f} [{lo:.3f}, {hi:.3f}]"


def diff_cell(v: dict) -> str:
    """'+0.012 [+0.003, +0.020]' from a paired difference {diff, lo, hi}."""
    return f"{v['diff']:+.3f} [{v['lo']:+.3f}, {v['hi']:+.3f}]"


def markdown_table(rows: list[dict], columns: list[tuple[str, str]]) -> list[str]:
    """columns: (header, key). A key the row has with key_lo, key_hi renders 'value [CI]'; a missing
    rec@1 renders the row's note (e.g. why a baseline was skipped)."""
    def cell(r: dict, key: str) -> str:
        if f"{key}_lo" in r:
            return ci_cell(r[key], r[f"{key}_lo"], r[f"{key}_hi"])
        if key.startswith("rec@") and key not in r:
            return r.get("note", "-") if key == "rec@1" else "-"
        return fmt(r.get(key), key)

    lines = ["| " + " | ".join(h for h, _ in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r, key) for _, key in columns) + " |" for r in rows]
    return lines


STANDARD_COLUMNS = [("dataset", "dataset"), ("method", "method"), ("parameters", "parameters"),
                    ("train s", "train_seconds"), ("steps", "steps"), ("examples/s", "examples_per_s"),
                    ("rec@1 [95% CI]", "rec@1"), ("rec@10 [95% CI]", "rec@10"), ("rec@20 [95% CI]", "rec@20")]


# ------------------------------------------------------------------------------------ result files


def result_path(filename: str) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    return RESULTS / filename


def write_results(name: str, result: dict, markdown: Callable[[dict], list[str]]) -> None:
    """RESULTS/name.json (`result` with the code version and the machine) through the one results writer;
    its table goes into PAPER.md (make_paper_md draws `markdown` from the JSON), and is printed here."""
    result = json.loads(json.dumps({**result, "code": code_version(), "machine": machine_info()}, default=numpy_json))
    machine.write_results(RESULTS, name, result, None)
    print(fragment(result, markdown))


def fragment(result: dict, markdown: Callable[[dict], list[str]]) -> str:
    """The markdown of a result (as its JSON file holds it): the tables, then the machine."""
    return "\n".join(markdown(result) + ["", machine_line(result["machine"]), ""])


def code_version() -> str:
    """The commit checked out when the results were written ('+dirty' if tracked files had changes
    then). Trained models are reused from runs/paper/ across commits when their configuration is the
    same, so a result can combine runs made at earlier commits."""
    def git(*a):
        return subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def protocol() -> dict:
    return {"held_out_sets": "10% (prepare, seed 0)", "segment": SEGMENT, "targets_per_set": TARGETS_PER_SET,
            "eval_seed": EVAL_SEED, "context_excluded": True, "depth": DEPTH,
            "ci": f"95% percentile bootstrap over held-out sets ({N_BOOT} resamples)",
            "unseen_targets": "count as misses for every method", "torch_threads": THREADS}


class Timer:
    """Wall time of a whole script, written into its results."""

    def __init__(self):
        self.t0 = time.time()

    @property
    def seconds(self) -> float:
        return round(time.time() - self.t0, 1)


# ------------------------------------------------------------------------------------ plots


def by_dataset(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    """The rows grouped by dataset, datasets in order of appearance: one plot panel each."""
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    return [(n, [r for r in rows if r["dataset"] == n]) for n in names]


@contextmanager
def panels(path: Path, n: int, width: float = 5.5):
    """A row of `n` matplotlib axes (headless), saved as a PNG at `path` when the block ends."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, n, figsize=(width * n, 4), squeeze=False)
    yield axes[0]
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_bars(path: Path, groups: list[tuple[str, list[dict]]], k: int = 1, title: str = "") -> None:
    """One panel per group (e.g. dataset): rec@k of each row with its CI as an error bar."""
    with panels(path, len(groups)) as axes:
        for ax, (name, rows) in zip(axes, groups):
            rows = [r for r in rows if f"rec@{k}" in r]
            y = [r[f"rec@{k}"] for r in rows]
            err = [[r[f"rec@{k}"] - r[f"rec@{k}_lo"] for r in rows], [r[f"rec@{k}_hi"] - r[f"rec@{k}"] for r in rows]]
            ax.bar(range(len(rows)), y, yerr=err, capsize=3, color=["C0" if r["head"] != "-" else "0.6" for r in rows])
            ax.set_xticks(range(len(rows)), [r["method"] for r in rows], rotation=35, ha="right", fontsize=8)
            ax.set_title(name)
            ax.set_ylabel(f"rec@{k} (95% CI)")
        axes[0].figure.suptitle(title)
