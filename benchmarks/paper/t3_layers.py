"""Table 3 of the paper at this machine's scale: does depth matter more with hashing? (sec. 3.4)

    flock /tmp/superbloom-cpu.lock .venv/bin/python benchmarks/paper/t3_layers.py     # ~28 min

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

import common as C
import superbloom as sb

D, DEEP, ALPHA = 128, 4, 20
BUDGET = 150.0


def hashed_deep_run(name: str, budget: float = BUDGET) -> C.Run:
    """The hashed 4-layer run (also Table 7's random alpha = 20 row and Table 6's Wikispeedia model)."""
    return C.Run(name, sb.HashConfig(ALPHA, 2), C.model_config(D, DEEP), sb.HeadConfig("superbloom"), budget)


def runs(name: str, data: sb.Dataset, budget: float) -> list[tuple[str, C.Run]]:
    head = sb.HeadConfig("superbloom")  # with alpha = 1, m = 1 it is exactly the unhashed full softmax
    plain, hashed = sb.HashConfig(1, 1), sb.HashConfig(ALPHA, 2)
    deep = C.model_config(D, DEEP)
    wide, _ = C.matched_width(data, C.count_params(data, hashed, deep, head), hashed, 1, head,
                              widths=tuple(range(D, 8 * D + 1, 32)))
    return [("unhashed L1", C.Run(name, plain, C.model_config(D, 1), head, budget)),
            (f"unhashed L{DEEP}", C.Run(name, plain, deep, head, budget)),
            ("hashed L1", C.Run(name, hashed, C.model_config(D, 1), head, budget)),
            (f"hashed L1 d={wide.d}", C.Run(name, hashed, wide, head, budget)),
            (f"hashed L{DEEP}", hashed_deep_run(name, budget))]


def depth_gain(r: dict, groups: np.ndarray, k: int) -> dict:
    """Per-example (hashed L4 - L1) - (unhashed L4 - L1) and the two gains, set-bootstrap CIs."""
    h = {m: C.hits(v, k) for m, v in r.items()}
    out = {}
    for label, vals in [("hashed: L4 - L1", h[f"hashed L{DEEP}"] - h["hashed L1"]),
                        ("unhashed: L4 - L1", h[f"unhashed L{DEEP}"] - h["unhashed L1"]),
                        ("difference of the gains", h[f"hashed L{DEEP}"] - h["hashed L1"]
                         - h[f"unhashed L{DEEP}"] + h["unhashed L1"])]:
        lo, hi = C.cluster_ci(vals, groups)
        out[label] = {"diff": round(float(vals.mean()), 4), "lo": round(lo, 4), "hi": round(hi, 4)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="wikispeedia,fb15k237")
    ap.add_argument("--budget", type=float, default=BUDGET, help=f"training seconds per run (default {BUDGET:.0f})")
    args = ap.parse_args()
    timer = C.Timer()
    rows, summaries, gains, panels = [], [], {}, []
    for name in args.datasets.split(","):
        data = C.dataset(name)
        ex = C.examples(data)
        summaries.append(C.dataset_summary(name, data, ex))
        ranks, drows = {}, []
        for method, run in runs(name, data, args.budget):
            rec = C.score(run, data, ex)
            ranks[method] = rec["ranks"]
            drows.append(C.model_row(method, run, rec, ex.set_rows))
        drows += C.baseline_rows(name, C.baselines(name, data, ex), ex.set_rows)
        gains[name] = {f"rec@{k}": depth_gain(ranks, ex.set_rows, k) for k in (1, 10, 20)}
        rows += drows
        panels.append((name, drows))
    cols = C.STANDARD_COLUMNS[:2] + [("alpha", "alpha"), ("d", "d"), ("layers", "layers")] + C.STANDARD_COLUMNS[2:]
    md = ["### Table 3 at this scale: one layer vs four, hashed and unhashed", ""] + C.markdown_table(rows, cols)
    md += ["", "Gain from depth (same examples; 95% CI over held-out sets):", "",
           "| dataset | comparison | rec@1 | rec@10 | rec@20 |", "|---|---|---|---|---|"]
    for name, g in gains.items():
        for label in g["rec@1"]:
            md.append(f"| {name} | {label} | " + " | ".join(
                f"{g[k][label]['diff']:+.3f} [{g[k][label]['lo']:+.3f}, {g[k][label]['hi']:+.3f}]"
                for k in ("rec@1", "rec@10", "rec@20")) + " |")
    C.plot_bars(C.result_path("t3_layers.png"), panels, k=1, title="Table 3 at this scale: rec@1 by depth")
    C.write_results("t3_layers", {"table": "t3", "budget_s": args.budget, "datasets": summaries,
                                  "depth_gain": gains, "protocol": C.protocol(), "wall_seconds": timer.seconds},
                    rows, md)


if __name__ == "__main__":
    main()
