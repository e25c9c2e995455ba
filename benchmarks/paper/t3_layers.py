"""Table 3 of the paper at this machine's scale: does depth matter more with hashing? (sec. 3.4)

    flock /tmp/superbloom-cpu.lock .venv/bin/python -m benchmarks.paper.t3_layers     # ~28 min

Per dataset (default: Wikispeedia links, the paper's own kind of data, and FB15k-237 neighbour
sets), five runs of the same wall-clock budget, d = 128, 4 attention heads, d_ff = 512:
  unhashed L1 / L4      alpha = 1, m = 1: the full softmax over the ids (the paper's baseline-l1/l12)
  hashed L1 / L4        alpha = 20, m = 2 (the paper's superbloom-d256l1 / d256l12)
  hashed L1 wide        alpha = 20, one layer, d chosen so the parameters match hashed L4
                        (the paper's superbloom-d384l1: "the same size" as the deep model)
Four layers is as deep as this budget allows on 2 cores: a fourth layer already halves the steps a
run gets. The claim is the *gap*: (hashed L4 - L1) - (unhashed L4 - L1), reported with a
set-bootstrap CI on the same examples. Baselines (popularity, co-occurrence, EASE) beside them.

Writes benchmarks/results/paper/t3_layers.{json,csv,md,png}.
"""
from __future__ import annotations

import argparse

import numpy as np

import superbloom as sb
from superbloom.evaluation.metrics import hits_at
from superbloom.model.sizing import count_params, matched_width, model_config

from .datasets import prepared
from .report import (STANDARD_COLUMNS, Timer, baseline_rows, by_dataset, diff_cell, markdown_table, model_row,
                     paired, plot_bars, protocol, result_path, write_results)
from .runs import Run, baselines, score

D, DEEP, ALPHA = 128, 4, 20
BUDGET = 150.0
KS = (1, 10, 20)


def hashed_deep_run(name: str, budget: float = BUDGET) -> Run:
    """The hashed 4-layer run (also Table 7's random alpha = 20 row and Table 6's Wikispeedia model)."""
    return Run(name, sb.HashConfig(ALPHA, 2), model_config(D, DEEP), sb.SuperbloomConfig(), budget)


def runs(name: str, data: sb.Dataset, budget: float) -> list[tuple[str, Run]]:
    head = sb.SuperbloomConfig()  # with alpha = 1, m = 1 it is exactly the unhashed full softmax
    plain, hashed = sb.HashConfig(1, 1), sb.HashConfig(ALPHA, 2)
    deep = model_config(D, DEEP)
    wide, _ = matched_width(data.n_ids, data.counts, count_params(data.n_ids, data.counts, hashed, deep, head), hashed, 1, head,
                            widths=tuple(range(D, 8 * D + 1, 32)))
    return [("unhashed L1", Run(name, plain, model_config(D, 1), head, budget)),
            (f"unhashed L{DEEP}", Run(name, plain, deep, head, budget)),
            ("hashed L1", Run(name, hashed, model_config(D, 1), head, budget)),
            (f"hashed L1 d={wide.d}", Run(name, hashed, wide, head, budget)),
            (f"hashed L{DEEP}", hashed_deep_run(name, budget))]


def depth_gain(r: dict, groups: np.ndarray, k: int) -> dict:
    """Per-example (hashed L4 - L1) - (unhashed L4 - L1) and the two gains, set-bootstrap CIs."""
    h = {m: hits_at(v, k) for m, v in r.items()}
    hashed = h[f"hashed L{DEEP}"] - h["hashed L1"]
    unhashed = h[f"unhashed L{DEEP}"] - h["unhashed L1"]
    return {"hashed: L4 - L1": paired(h[f"hashed L{DEEP}"], h["hashed L1"], groups),
            "unhashed: L4 - L1": paired(h[f"unhashed L{DEEP}"], h["unhashed L1"], groups),
            "difference of the gains": paired(hashed, unhashed, groups)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="wikispeedia,fb15k237")
    ap.add_argument("--budget", type=float, default=BUDGET, help=f"training seconds per run (default {BUDGET:.0f})")
    args = ap.parse_args()
    timer = Timer()
    rows, summaries, gains = [], [], {}
    for name in args.datasets.split(","):
        data, ex, summary = prepared(name)
        summaries.append(summary)
        ranks = {}
        for method, run in runs(name, data, args.budget):
            rec = score(run, data, ex)
            ranks[method] = rec["ranks"]
            rows.append(model_row(method, run, rec, ex.set_rows))
        rows += baseline_rows(name, baselines(name, data, ex), ex.set_rows)
        gains[name] = {f"rec@{k}": depth_gain(ranks, ex.set_rows, k) for k in KS}
    plot_bars(result_path("t3_layers.png"), by_dataset(rows), k=1, title="Table 3 at this scale: rec@1 by depth")
    result = {"table": "t3", "budget_s": args.budget, "datasets": summaries, "depth_gain": gains,
              "protocol": protocol(), "wall_seconds": timer.seconds, "rows": rows}
    write_results("t3_layers", result, markdown)


def markdown(result: dict) -> list[str]:
    cols = STANDARD_COLUMNS[:2] + [("alpha", "alpha"), ("d", "d"), ("layers", "layers")] + STANDARD_COLUMNS[2:]
    md = ["### Table 3 at this scale: one layer vs four, hashed and unhashed", ""]
    md += markdown_table(result["rows"], cols)
    md += ["", "Gain from depth (same examples; 95% CI over held-out sets):", "",
           "| dataset | comparison | rec@1 | rec@10 | rec@20 |", "|---|---|---|---|---|"]
    for name, g in result["depth_gain"].items():
        for label in g["rec@1"]:
            md.append(f"| {name} | {label} | " + " | ".join(diff_cell(g[f"rec@{k}"][label]) for k in KS) + " |")
    return md


if __name__ == "__main__":
    main()
