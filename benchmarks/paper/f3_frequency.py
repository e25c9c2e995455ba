"""Figure 3 of the paper at this machine's scale: rec@1 per label-frequency decile, superbloom vs the
full-softmax baseline of the same parameter count (sec. 3.3: "Superbloom is more accurate than the
baseline in all the buckets").

    flock /tmp/superbloom-cpu.lock .venv/bin/python -m benchmarks.paper.f3_frequency  # ~1 min after t2

The two models are Table 2's superbloom and full-softmax runs (reused from runs/paper/ when
t2_heads ran first, trained here otherwise) on BERT4Rec Beauty and Epinions; item co-occurrence
is drawn for reference. The evaluation examples are sorted by the training count of their target,
most frequent first (ties in a seeded random order; targets never seen in training, count 0, come
last), and cut into ten equal-size deciles; every decile gets rec@1 with a set-bootstrap CI.

Writes benchmarks/results/paper/f3_frequency.{json,csv,md,png}.
"""
from __future__ import annotations

import argparse

import numpy as np

from superbloom.evaluation.metrics import hits_at

from . import t2_heads
from .datasets import prepared
from .report import (Timer, by_dataset, ci_cell, diff_cell, interval, paired, panels, protocol, result_path,
                     write_results)
from .runs import baselines, score

METHODS = ("superbloom", "full softmax")


def deciles(counts: np.ndarray, seed: int = 0) -> np.ndarray:
    """(E,) training count of each example's target -> (E,) decile 0..9, 0 = most frequent."""
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.random(len(counts)), -counts))  # by count, descending; ties at random
    dec = np.empty(len(counts), np.int64)
    for i, part in enumerate(np.array_split(order, 10)):
        dec[part] = i
    return dec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="beauty,epinions")
    ap.add_argument("--budget-t2", type=float, default=t2_heads.BUDGET, help="budget of Table 2's runs (to reuse them)")
    args = ap.parse_args()
    timer = Timer()
    rows, summaries = [], []
    for name in args.datasets.split(","):
        data, ex, summary = prepared(name)
        summaries.append(summary)
        runs = dict(t2_heads.runs(name, data, args.budget_t2))
        ranks = {m: score(runs[m], data, ex)["ranks"] for m in METHODS}
        ranks["cooccurrence"] = baselines(name, data, ex, ("cooccurrence",))["cooccurrence"]["ranks"]
        counts = np.where(ex.targets >= 0, data.counts[np.maximum(ex.targets, 0)], 0)
        dec = deciles(counts)
        for i in range(10):
            sel = dec == i
            row = {"dataset": name, "decile": i + 1, "examples": int(sel.sum()),
                   "count_max": int(counts[sel].max()), "count_min": int(counts[sel].min())}
            for m, r in ranks.items():
                rec, lo, hi = interval(hits_at(r[sel], 1), ex.set_rows[sel])
                row.update({f"{m} rec@1": rec, f"{m} lo": lo, f"{m} hi": hi})
            d = paired(hits_at(ranks["superbloom"][sel], 1), hits_at(ranks["full softmax"][sel], 1), ex.set_rows[sel])
            row.update({"superbloom - full": d["diff"], "diff lo": d["lo"], "diff hi": d["hi"]})
            rows.append(row)
    plot(by_dataset(rows))
    result = {"figure": "f3", "datasets": summaries, "protocol": protocol(), "wall_seconds": timer.seconds,
              "rows": rows}
    write_results("f3_frequency", result, markdown)


def markdown(result: dict) -> list[str]:
    md = ["### Figure 3 at this scale: rec@1 per label-frequency decile (1 = most frequent targets)", "",
          "| dataset | decile | target train count | examples | superbloom | full softmax | superbloom - full | co-occurrence |",
          "|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        diff = diff_cell({"diff": r["superbloom - full"], "lo": r["diff lo"], "hi": r["diff hi"]})
        cell = {m: ci_cell(r[f"{m} rec@1"], r[f"{m} lo"], r[f"{m} hi"]) for m in (*METHODS, "cooccurrence")}
        md.append(f"| {r['dataset']} | {r['decile']} | {r['count_min']}-{r['count_max']} | {r['examples']} | "
                  f"{cell['superbloom']} | {cell['full softmax']} | {diff} | {cell['cooccurrence']} |")
    return md


def plot(groups) -> None:
    with panels(result_path("f3_frequency.png"), len(groups)) as axes:
        for ax, (name, drows) in zip(axes, groups):
            x = [r["decile"] for r in drows]
            for i, m in enumerate(("superbloom", "full softmax", "cooccurrence")):
                ax.plot(x, [r[f"{m} rec@1"] for r in drows], marker="o", color=f"C{i}", label=m,
                        ls="--" if m == "cooccurrence" else "-")
                ax.fill_between(x, [r[f"{m} lo"] for r in drows], [r[f"{m} hi"] for r in drows], color=f"C{i}",
                                alpha=0.15)
            ax.set_xticks(x)
            ax.set_xlabel("label-frequency decile (1 = most frequent)")
            ax.set_ylabel("rec@1 (95% CI)")
            ax.set_title(name)
            ax.legend()


if __name__ == "__main__":
    main()
