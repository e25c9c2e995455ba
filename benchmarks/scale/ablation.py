"""Benchmark report: several e2e runs on the same held-out examples, side by side (issue 14).

Each e2e eval stage saves its ranks (WORK/ranks-HEAD.npz: set_rows, targets, model and, for the first
head, popularity); runs on the same prepared data and EvalConfig rank the very same examples. This
puts any of them in one table with 95% bootstrap intervals over held-out sets, and the paired
difference of every run minus a reference run on the same examples:

    .venv/bin/python -m benchmarks.scale.ablation --name e2e7_ablation --reference "coherent + co-occurrence start" \\
        --run "coherent + co-occurrence start=/work/e2e7/ranks-superbloom.npz" \\
        --run "coherent, random start=/work/e2e7c/ranks-superbloom.npz" --note "..."

Nothing is trained or evaluated here: the figures are those of the runs' eval stages (their own
reports say how each was trained). -> results/scale/NAME.{json,md}.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.machine import machine_info, write_results
from superbloom.evaluation.metrics import hits_at, mean_ci, paired_difference

RESULTS = Path(__file__).parents[1] / "results" / "scale"
KS = (1, 10, 20)


def load_runs(specs: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """["LABEL=PATH.npz[:ARRAY]", ...] -> ({label: ranks}, set_rows); every run must hold the same
    examples (targets and set rows), else a clear error naming the file."""
    ranks, first = {}, None
    for spec in specs:
        label, sep, where = spec.partition("=")
        if not sep or not label:
            raise SystemExit(f"--run {spec!r}: expected LABEL=PATH.npz or LABEL=PATH.npz:ARRAY")
        path, _, array = where.partition(":")
        z = np.load(path)
        if array and array not in z.files:
            raise SystemExit(f"{path}: no array {array!r} (it holds {', '.join(z.files)})")
        if first is None:
            first = (path, z["targets"], z["set_rows"])
        elif not (np.array_equal(z["targets"], first[1]) and np.array_equal(z["set_rows"], first[2])):
            raise SystemExit(f"{path} ranks other examples than {first[0]}: not comparable")
        ranks[label] = z[array or "model"]
    if first is None:
        raise SystemExit("give at least one --run")
    return ranks, first[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", action="append", default=[], help="LABEL=PATH.npz[:ARRAY] (ARRAY default: model)")
    ap.add_argument("--reference", default="", help="the label every other run is paired against (default: the first)")
    ap.add_argument("--name", required=True, help="results file name under benchmarks/results/scale/")
    ap.add_argument("--title", default="Runs on the same held-out examples (SYNTHETIC data)")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    try:
        ranks, groups = load_runs(args.run)
    except (SystemExit, OSError) as e:  # one line and exit 2, as argparse does for a bad flag
        ap.error(str(e.code if isinstance(e, SystemExit) else e))
    ref = args.reference or next(iter(ranks))
    if ref not in ranks:
        ap.error(f"--reference {ref!r} is none of the runs ({', '.join(ranks)})")
    rows, paired = [], {}
    for label, r in ranks.items():
        row = {"run": label}
        for k in KS:
            m, lo, hi = mean_ci(hits_at(r, k), groups)
            row[f"rec@{k}"] = {"mean": round(m, 4), "lo": round(lo, 4), "hi": round(hi, 4)}
        rows.append(row)
        if label != ref:
            paired[f"{ref} - {label}"] = {f"rec@{k}": {kk: round(v, 4) for kk, v in paired_difference(
                hits_at(ranks[ref], k), hits_at(r, k), groups).items()} for k in KS}
    result = {"benchmark": "scale-ablation", "synthetic": True, "runs": args.run, "reference": ref,
              "examples": int(len(groups)), "sets": int(len(np.unique(groups))), "table": rows, "paired": paired,
              "machine": machine_info()}
    md = [f"# {args.title}", "", "`benchmarks/scale/ablation.py`: the ranks saved by the runs' eval stages, "
          f"{len(groups):,} held-out examples ({len(np.unique(groups)):,} sets), the same for every run; brackets are "
          "95% bootstrap intervals over held-out sets. Nothing is trained or evaluated by this script.", "",
          "| run | rec@1 | rec@10 | rec@20 |", "|---|---|---|---|"]
    for row in rows:
        md.append(f"| {row['run']} | " + " | ".join(
            f"{row[f'rec@{k}']['mean']:.4f} [{row[f'rec@{k}']['lo']:.4f}, {row[f'rec@{k}']['hi']:.4f}]" for k in KS) + " |")
    if paired:
        md += ["", "Paired differences on the same examples (95% CI over held-out sets):", "",
               "| comparison | rec@1 | rec@10 | rec@20 |", "|---|---|---|---|"]
        for key, v in paired.items():
            md.append(f"| {key} | " + " | ".join(f"{v[f'rec@{k}']['diff']:+.4f} [{v[f'rec@{k}']['lo']:+.4f}, "
                                                 f"{v[f'rec@{k}']['hi']:+.4f}]" for k in KS) + " |")
    md += ["", "Sources: " + "; ".join(f"`{s}`" for s in args.run)]
    if args.note:
        md += ["", args.note]
    write_results(RESULTS, args.name, result, md)


if __name__ == "__main__":
    main()
