"""Figure 3 of the paper at this machine's scale: rec@1 per label-frequency decile, superbloom vs the
full-softmax baseline of the same parameter count (sec. 3.3: "Superbloom is more accurate than the
baseline in all the buckets").

    flock /tmp/superbloom-cpu.lock .venv/bin/python benchmarks/paper/f3_frequency.py  # ~1 min after t2

The two models are Table 2's superbloom and full-softmax runs (reused from runs/paper/ when
t2_heads.py ran first, trained here otherwise) on BERT4Rec Beauty and Epinions; item co-occurrence
is drawn for reference. The evaluation examples are sorted by the training count of their target,
most frequent first (ties in a seeded random order; targets never seen in training, count 0, come
last), and cut into ten equal-size deciles; every decile gets rec@1 with a set-bootstrap CI.

Writes benchmarks/results/paper/f3_frequency.{json,csv,md,png}.
"""
from __future__ import annotations

import argparse

import numpy as np

import common as C
import t2_heads

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
    C.need_head("full")
    timer = C.Timer()
    rows, panels, summaries = [], [], []
    for name in args.datasets.split(","):
        data = C.dataset(name)
        ex = C.examples(data)
        summaries.append(C.dataset_summary(name, data, ex))
        runs = dict(t2_heads.runs(name, data, args.budget_t2))
        ranks = {m: C.score(runs[m], data, ex)["ranks"] for m in METHODS}
        ranks["cooccurrence"] = C.baselines(name, data, ex, ("cooccurrence",))["cooccurrence"]["ranks"]
        counts = np.where(ex.targets >= 0, data.counts[np.maximum(ex.targets, 0)], 0)
        dec = deciles(counts)
        drows = []
        for i in range(10):
            sel = dec == i
            row = {"dataset": name, "decile": i + 1, "examples": int(sel.sum()),
                   "count_max": int(counts[sel].max()), "count_min": int(counts[sel].min())}
            for m, r in ranks.items():
                h = C.hits(r[sel], 1)
                lo, hi = C.cluster_ci(h, ex.set_rows[sel])
                row.update({f"{m} rec@1": round(float(h.mean()), 4), f"{m} lo": round(lo, 4), f"{m} hi": round(hi, 4)})
            d = C.paired_diff(ranks["superbloom"][sel], ranks["full softmax"][sel], ex.set_rows[sel], 1)
            row.update({"superbloom - full": d["diff"], "diff lo": d["lo"], "diff hi": d["hi"]})
            drows.append(row)
        rows += drows
        panels.append((name, drows))
    md = ["### Figure 3 at this scale: rec@1 per label-frequency decile (1 = most frequent targets)", "",
          "| dataset | decile | target train count | examples | superbloom | full softmax | superbloom - full | co-occurrence |",
          "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cell = lambda m: f"{r[m + ' rec@1']:.3f} [{r[m + ' lo']:.3f}, {r[m + ' hi']:.3f}]"  # noqa: E731
        md.append(f"| {r['dataset']} | {r['decile']} | {r['count_min']}-{r['count_max']} | {r['examples']} | "
                  f"{cell('superbloom')} | {cell('full softmax')} | {r['superbloom - full']:+.3f} "
                  f"[{r['diff lo']:+.3f}, {r['diff hi']:+.3f}] | {cell('cooccurrence')} |")
    plot(panels)
    C.write_results("f3_frequency", {"figure": "f3", "datasets": summaries, "protocol": C.protocol(),
                                     "wall_seconds": timer.seconds}, rows, md)


def plot(groups) -> None:
    with C.panels(C.result_path("f3_frequency.png"), len(groups)) as axes:
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
