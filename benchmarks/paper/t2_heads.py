"""Table 2 of the paper at this machine's scale: superbloom vs the output layers it replaces, each
trained for the same wall-clock budget (paper sec. 3.3, Tables 1-2).

    flock /tmp/superbloom-cpu.lock .venv/bin/python -m benchmarks.paper.t2_heads      # ~35 min

Per dataset (default: the two large vocabularies, BERT4Rec Beauty 53K ids and Epinions 278K ids):
  superbloom    alpha = 50, m = 2 (the paper's Table 1 setting), d = 128, 4 layers, beam B = 20
  full          no hashing, full softmax, width d chosen so the parameter count (embeddings
                included) is the closest to superbloom's (the paper's `baseline`: d = 48 vs 768)
  sampled       no hashing, sampled softmax with a 4x wider embedding than `full` and 2.5% of the
                ids drawn per step (the paper: 128K of 5.3M samples, 11x the parameters)
  hierarchical  no hashing, hierarchical softmax (Huffman tree, exact A* top-k), width matched to
                superbloom's parameter count like `full`
All four: 4 Transformer layers and the library's training recipe (batch 64, AdamW lr 3e-3 with 300
warm-up steps and inverse-sqrt decay, mask rate 0.5), `--budget` seconds of training each. Next to them, on the very same examples: popularity,
item co-occurrence and EASE (EASE only where its dense N x N matrix fits: not these two).

Writes benchmarks/results/paper/t2_heads.{json,csv,md,png}.
"""
from __future__ import annotations

import argparse

import superbloom as sb
from superbloom.evaluation.metrics import hits_at
from superbloom.model.sizing import count_params, matched_width, model_config

from .datasets import prepared
from .report import (STANDARD_COLUMNS, Timer, baseline_rows, by_dataset, diff_cell, markdown_table, model_row,
                     paired, plot_bars, protocol, result_path, write_results)
from .runs import Run, baselines, score

ALPHA, M, D, LAYERS = 50, 2, 128, 4
SAMPLE_FRACTION = 0.025
BUDGET = 240.0
KS = (1, 10, 20)


def superbloom_run(name: str, budget: float = BUDGET) -> Run:
    return Run(name, sb.HashConfig(ALPHA, M), model_config(D, LAYERS), sb.SuperbloomConfig(), budget)


def runs(name: str, data: sb.Dataset, budget: float) -> list[tuple[str, Run]]:
    """The four runs of one dataset, parameter counts matched as described in the module docstring."""
    sbr = superbloom_run(name, budget)
    target = count_params(data.n_ids, data.counts, sbr.hash, sbr.model, sbr.head)
    plain = sb.HashConfig(1, 1)
    out = [("superbloom", sbr)]
    full_model, _ = matched_width(data.n_ids, data.counts, target, plain, LAYERS, sb.FullConfig())
    out.append(("full softmax", Run(name, plain, full_model, sb.FullConfig(), budget)))
    samples = max(1, round(SAMPLE_FRACTION * data.n_ids))
    wide = model_config(4 * full_model.d, LAYERS)
    out.append(("sampled softmax", Run(name, plain, wide, sb.SampledConfig(samples=samples), budget)))
    hs_model, _ = matched_width(data.n_ids, data.counts, target, plain, LAYERS, sb.HierarchicalConfig())
    out.append(("hierarchical softmax", Run(name, plain, hs_model, sb.HierarchicalConfig(), budget)))
    return out


def paired_recalls(a, b, groups) -> dict:
    """{rec@k: paired difference of a and b's hits} for k = 1, 10, 20 (ranks a, b on the same examples)."""
    return {f"rec@{k}": paired(hits_at(a, k), hits_at(b, k), groups) for k in KS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="beauty,epinions", help="comma-separated (default beauty,epinions)")
    ap.add_argument("--budget", type=float, default=BUDGET, help=f"training seconds per run (default {BUDGET:.0f})")
    args = ap.parse_args()
    timer = Timer()
    rows, summaries, diffs = [], [], {}
    for name in args.datasets.split(","):
        data, ex, summary = prepared(name)
        summaries.append(summary)
        ranks = {}
        for method, run in runs(name, data, args.budget):
            rec = score(run, data, ex)
            ranks[method] = rec["ranks"]
            extra = {"samples": run.head.samples} if run.head.name == "sampled" else {}
            rows.append(model_row(method, run, rec, ex.set_rows, **extra))
        base = baselines(name, data, ex)
        rows += baseline_rows(name, base, ex.set_rows)
        for other in ("full softmax", "sampled softmax", "hierarchical softmax"):
            diffs[f"{name}: superbloom - {other}"] = paired_recalls(ranks["superbloom"], ranks[other], ex.set_rows)
        if "ranks" in base.get("cooccurrence", {}):
            diffs[f"{name}: superbloom - cooccurrence"] = paired_recalls(ranks["superbloom"],
                                                                         base["cooccurrence"]["ranks"], ex.set_rows)
    plot_bars(result_path("t2_heads.png"), by_dataset(rows), k=10,
              title="Table 2 at this scale: rec@10, same training budget")
    result = {"table": "t2", "budget_s": args.budget, "datasets": summaries, "paired": diffs,
              "protocol": protocol(), "wall_seconds": timer.seconds, "rows": rows}
    write_results("t2_heads", result, markdown)


def markdown(result: dict) -> list[str]:
    cols = STANDARD_COLUMNS[:2] + [("d", "d"), ("alpha", "alpha")] + STANDARD_COLUMNS[2:]
    md = ["### Table 2 at this scale: output layers under one wall-clock budget", ""]
    md += markdown_table(result["rows"], cols)
    md += ["", "Paired differences (same examples; 95% CI over held-out sets):", "",
           "| comparison | rec@1 | rec@10 | rec@20 |", "|---|---|---|---|"]
    for key, v in result["paired"].items():
        md.append(f"| {key} | " + " | ".join(diff_cell(v[f"rec@{k}"]) for k in KS) + " |")
    return md


if __name__ == "__main__":
    main()
