"""Table 7 of the paper at this machine's scale: random vs coherent hashing (appendix C).

    flock /tmp/superbloom-cpu.lock .venv/bin/python -m benchmarks.paper.t7_coherent   # ~16 min

Six models on the Wikispeedia links, all m = 2 maps, d = 128, 4 layers, the same budget as
Table 3: alpha in {10, 20} x {0, 1, 2} coherent maps (superbloom/coherent.py: co-occurrence
factorisation, greedy equal-size buckets of nearest neighbours, the second coherent map never
repeating a pair of the first; with one coherent map the other is random). The random alpha = 20
model is Table 3's hashed L4 run (reused when t3_layers ran first).

Reported per model: token rec@1 (the share of the m maps whose most probable bucket is the target's:
the paper's "token rec@1") and entity rec@1/10/20, with set-bootstrap CIs, and paired differences
against the all-random model of the same alpha. Then a scale check that trains nothing: the time
to build two coherent maps for Epinions (278K ids, alpha = 20).

Writes benchmarks/results/paper/t7_coherent.{json,csv,md,png}.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import superbloom as sb
from superbloom.hashing.coherent import CoherentStats, coherent_orders
from superbloom.hashing.bloom import BloomHash, duplicate_rows
from superbloom.evaluation.metrics import hits_at

from . import t3_layers
from .datasets import dataset, prepared
from .report import (Timer, baseline_rows, diff_cell, interval, markdown_table, model_row, paired, panels, protocol,
                     result_path, write_results)
from .runs import Run, baselines, score

ALPHAS, COHERENT = (10, 20), (0, 1, 2)


def run(name: str, alpha: int, coherent: int, budget: float) -> Run:
    base = t3_layers.hashed_deep_run(name, budget)
    return Run(name, sb.HashConfig(alpha, 2, 0, coherent), base.model, base.head, budget)


def scale_check(name: str, alpha: int = 20) -> dict:
    """Build time of two coherent maps (and the final BloomHash) on a large vocabulary."""
    data = dataset(name)
    stats = CoherentStats()
    t0 = time.time()
    orders = coherent_orders(data.train, data.n_ids, alpha, 2, stats=stats)
    t_orders = time.time() - t0
    h = BloomHash.from_orders(orders, alpha, np.random.default_rng(0))
    return {"dataset": name, "ids": data.n_ids, "alpha": alpha, "coherent_maps": 2,
            "orders_seconds": round(t_orders, 1), "total_seconds": round(time.time() - t0, 1),
            "rescans": stats.rescans, "constraint_violations_repaired": stats.violations,
            "ids_sharing_both_buckets": int(len(duplicate_rows(h.buckets)))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="wikispeedia")
    ap.add_argument("--budget", type=float, default=t3_layers.BUDGET,
                    help=f"training seconds per run (default {t3_layers.BUDGET:.0f}, as Table 3)")
    ap.add_argument("--scale-check", default="epinions", help="dataset for the build-time check ('' to skip)")
    args = ap.parse_args()
    timer = Timer()
    name = args.dataset
    data, ex, summary = prepared(name)
    rows, recs, diffs = [], {}, {}
    for alpha in ALPHAS:
        for c in COHERENT:
            r = run(name, alpha, c, args.budget)
            rec = score(r, data, ex, tokens=True)
            recs[alpha, c] = rec
            tok, lo, hi = interval(rec["token_hits"], ex.set_rows)
            rows.append(model_row(f"hash{alpha}-{'0' * (2 - c) + '1' * c}", r, rec, ex.set_rows,
                                  **{"token_rec@1": tok, "token_rec@1_lo": lo, "token_rec@1_hi": hi,
                                     "hash_build_s": rec["hash_build_seconds"]}))
        for c in (1, 2):
            diffs[f"alpha={alpha}: {c} coherent - 0"] = {
                "token rec@1": paired(recs[alpha, c]["token_hits"], recs[alpha, 0]["token_hits"], ex.set_rows),
                "entity rec@1": paired(hits_at(recs[alpha, c]["ranks"], 1), hits_at(recs[alpha, 0]["ranks"], 1),
                                       ex.set_rows)}
    rows += baseline_rows(name, baselines(name, data, ex), ex.set_rows)
    scale = scale_check(args.scale_check) if args.scale_check else None
    plot(rows, name)
    result = {"table": "t7", "budget_s": args.budget, "datasets": [summary],
              "paired": diffs, "scale_check": scale, "protocol": protocol(), "wall_seconds": timer.seconds,
              "rows": rows}
    write_results("t7_coherent", result, markdown)


def markdown(result: dict) -> list[str]:
    name = result["datasets"][0]["dataset"]
    cols = [("model", "method"), ("alpha", "alpha"), ("# coherent", "coherent"), ("parameters", "parameters"),
            ("train s", "train_seconds"), ("steps", "steps"), ("examples/s", "examples_per_s"),
            ("token rec@1 [95% CI]", "token_rec@1"), ("rec@1 [95% CI]", "rec@1"), ("rec@10 [95% CI]", "rec@10"),
            ("rec@20 [95% CI]", "rec@20")]
    md = [f"### Table 7 at this scale: random vs coherent hashing ({name})", ""]
    md += markdown_table(result["rows"], cols)
    md += ["", "Paired differences against the all-random model of the same alpha (95% CI over held-out sets):", "",
           "| comparison | token rec@1 | entity rec@1 |", "|---|---|---|"]
    for key, v in result["paired"].items():
        md.append(f"| {key} | {diff_cell(v['token rec@1'])} | {diff_cell(v['entity rec@1'])} |")
    scale = result["scale_check"]
    if scale:
        md += ["", f"Scale check: two coherent maps for {scale['dataset']} ({scale['ids']:,} ids, alpha = "
                   f"{scale['alpha']}) built in {scale['total_seconds']:.0f} s ({scale['rescans']} candidate-list "
                   f"rescans, {scale['constraint_violations_repaired']} constraint violations left to the builder, "
                   f"{scale['ids_sharing_both_buckets']} ids sharing both buckets after it)."]
    return md


def plot(rows, name) -> None:
    models = [r for r in rows if "token_rec@1" in r]
    with panels(result_path("t7_coherent.png"), 2, width=5.0) as axes:
        for ax, (key, title) in zip(axes, [("token_rec@1", "token rec@1"), ("rec@1", "entity rec@1")]):
            for i, alpha in enumerate(ALPHAS):
                rs = [r for r in models if r["alpha"] == alpha]
                x = np.arange(len(rs)) + 0.4 * i
                y = [r[key] for r in rs]
                err = [[r[key] - r[key + "_lo"] for r in rs], [r[key + "_hi"] - r[key] for r in rs]]
                ax.bar(x, y, 0.4, yerr=err, capsize=3, label=f"alpha={alpha}")
            ax.set_xticks(np.arange(len(COHERENT)) + 0.2, [f"{c} coherent" for c in COHERENT])
            ax.set_title(f"{title} ({name})")
            ax.legend()


if __name__ == "__main__":
    main()
