"""Table 6 of the paper at this machine's scale: beam width B of Algorithm 1 vs rec@1/10/20
(appendix B: "it is sufficient to set the beam width B = k").

    flock /tmp/superbloom-cpu.lock .venv/bin/python -m benchmarks.paper.t6_beam    # ~1 min after t2/t3

Two trained superbloom models, decoded with B in {1, 10, 20, 100} (approximate: one pass of
Algorithm 1, top-20 among the candidates) and in exact mode (B widened until the top-20 is
certified exact, the reference):
  wikispeedia   Table 3's hashed 4-layer model (alpha = 20, m = 2)
  epinions      Table 2's superbloom model (alpha = 50, m = 2, 278K ids)
The models are t3_layers's and t2_heads's runs: reused from runs/paper/ when those scripts
ran first, trained here (same configuration and budget) otherwise. Also reports the share of
answers certified exact and the decoding speed (queries/s) for each B.

Writes benchmarks/results/paper/t6_beam.{json,csv,md,png}.
"""
from __future__ import annotations

import argparse

import superbloom as sb

from . import t2_heads, t3_layers
from .datasets import prepared
from .report import Timer, by_dataset, markdown_table, model_row, panels, protocol, result_path, write_results
from .runs import score

BEAMS = (1, 10, 20, 100)


def models(budget_t2: float, budget_t3: float) -> dict:
    return {"wikispeedia": ("Table 3 hashed L4", t3_layers.hashed_deep_run("wikispeedia", budget_t3)),
            "epinions": ("Table 2 superbloom", t2_heads.superbloom_run("epinions", budget_t2))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="wikispeedia,epinions")
    ap.add_argument("--budget-t2", type=float, default=t2_heads.BUDGET, help="budget of Table 2's runs (to reuse them)")
    ap.add_argument("--budget-t3", type=float, default=t3_layers.BUDGET, help="budget of Table 3's runs (to reuse them)")
    args = ap.parse_args()
    timer = Timer()
    rows, summaries = [], []
    for name in args.datasets.split(","):
        label, run = models(args.budget_t2, args.budget_t3)[name]
        data, ex, summary = prepared(name)
        summaries.append(summary | {"model": label, "key": run.key()})
        for beam, exact in [(b, False) for b in BEAMS] + [(None, True)]:
            rec = score(run, data, ex, sb.DecodeConfig(beam=beam, exact=exact))
            method = f"B={beam}" if not exact else "exact (B widened)"
            rows.append(model_row(method, run, rec, ex.set_rows, beam=beam if beam else "exact",
                                  certified_exact=round(rec["certified_exact"], 4),
                                  mean_beam=round(rec["mean_beam"], 1), queries_per_s=rec["queries_per_second"]))
    plot(by_dataset(rows))
    result = {"table": "t6", "datasets": summaries, "protocol": protocol(), "wall_seconds": timer.seconds,
              "rows": rows}
    write_results("t6_beam", result, markdown)


def markdown(result: dict) -> list[str]:
    cols = [("dataset", "dataset"), ("decoding", "method"), ("parameters", "parameters"), ("train s", "train_seconds"),
            ("rec@1 [95% CI]", "rec@1"), ("rec@10 [95% CI]", "rec@10"), ("rec@20 [95% CI]", "rec@20"),
            ("certified exact", "certified_exact"), ("mean B", "mean_beam"), ("queries/s", "queries_per_s")]
    md = ["### Table 6 at this scale: beam width vs recall (top-20 retrieved, context excluded)", ""]
    return md + markdown_table(result["rows"], cols)


def plot(groups) -> None:
    with panels(result_path("t6_beam.png"), len(groups)) as axes:
        for ax, (name, drows) in zip(axes, groups):
            approx = [r for r in drows if r["beam"] != "exact"]
            exact = [r for r in drows if r["beam"] == "exact"][0]
            x = [r["beam"] for r in approx]
            for i, k in enumerate((1, 10, 20)):
                y = [r[f"rec@{k}"] for r in approx]
                lo = [r[f"rec@{k}_lo"] for r in approx]
                hi = [r[f"rec@{k}_hi"] for r in approx]
                ax.plot(x, y, "o-", color=f"C{i}", label=f"rec@{k}")
                ax.fill_between(x, lo, hi, color=f"C{i}", alpha=0.15)
                ax.axhline(exact[f"rec@{k}"], color=f"C{i}", ls=":", lw=1)
            ax.set_xscale("log")
            ax.set_xlabel("beam width B (dotted: exact top-20)")
            ax.set_ylabel("recall (95% CI)")
            ax.set_title(name)
            ax.legend()


if __name__ == "__main__":
    main()
