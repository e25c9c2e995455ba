"""Table 2 of the paper at this machine's scale: superbloom vs the output layers it replaces, each
trained for the same wall-clock budget (paper sec. 3.3, Tables 1-2).

    flock /tmp/superbloom-cpu.lock .venv/bin/python benchmarks/paper/t2_heads.py      # ~35 min

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

import common as C
import superbloom as sb

ALPHA, M, D, LAYERS = 50, 2, 128, 4
SAMPLE_FRACTION = 0.025


BUDGET = 240.0


def superbloom_run(name: str, budget: float = BUDGET) -> C.Run:
    return C.Run(name, sb.HashConfig(ALPHA, M), C.model_config(D, LAYERS), sb.HeadConfig("superbloom"), budget)


def runs(name: str, data: sb.Dataset, budget: float) -> list[tuple[str, C.Run]]:
    """The four runs of one dataset, parameter counts matched as described in the module docstring."""
    sbr = superbloom_run(name, budget)
    target = C.count_params(data, sbr.hash, sbr.model, sbr.head)
    plain = sb.HashConfig(1, 1)
    out = [("superbloom", sbr)]
    full_model, _ = C.matched_width(data, target, plain, LAYERS, sb.HeadConfig("full"))
    out.append(("full softmax", C.Run(name, plain, full_model, sb.HeadConfig("full"), budget)))
    samples = max(1, round(SAMPLE_FRACTION * data.n_ids))
    wide = C.model_config(4 * full_model.d, LAYERS)
    out.append(("sampled softmax", C.Run(name, plain, wide, sb.HeadConfig("sampled", samples=samples), budget)))
    hs_model, _ = C.matched_width(data, target, plain, LAYERS, sb.HeadConfig("hierarchical"))
    out.append(("hierarchical softmax", C.Run(name, plain, hs_model, sb.HeadConfig("hierarchical"), budget)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="beauty,epinions", help="comma-separated (default beauty,epinions)")
    ap.add_argument("--budget", type=float, default=BUDGET, help=f"training seconds per run (default {BUDGET:.0f})")
    args = ap.parse_args()
    for head in ("full", "sampled", "hierarchical"):
        C.need_head(head)
    timer = C.Timer()
    rows, summaries, paired, panels = [], [], {}, []
    for name in args.datasets.split(","):
        data = C.dataset(name)
        ex = C.examples(data)
        summaries.append(C.dataset_summary(name, data, ex))
        ranks = {}
        drows = []
        for method, run in runs(name, data, args.budget):
            rec = C.score(run, data, ex)
            ranks[method] = rec["ranks"]
            extra = {"samples": run.head.samples} if run.head.name == "sampled" else {}
            drows.append(C.model_row(method, run, rec, ex.set_rows, **extra))
        base = C.baselines(name, data, ex)
        drows += C.baseline_rows(name, base, ex.set_rows)
        for other in ("full softmax", "sampled softmax", "hierarchical softmax"):
            paired[f"{name}: superbloom - {other}"] = {
                f"rec@{k}": C.paired_diff(ranks["superbloom"], ranks[other], ex.set_rows, k) for k in (1, 10, 20)}
        if "ranks" in base.get("cooccurrence", {}):
            paired[f"{name}: superbloom - cooccurrence"] = {
                f"rec@{k}": C.paired_diff(ranks["superbloom"], base["cooccurrence"]["ranks"], ex.set_rows, k)
                for k in (1, 10, 20)}
        rows += drows
        panels.append((name, drows))
    cols = C.STANDARD_COLUMNS[:2] + [("d", "d"), ("alpha", "alpha")] + C.STANDARD_COLUMNS[2:]
    md = ["### Table 2 at this scale: output layers under one wall-clock budget", ""] + C.markdown_table(rows, cols)
    md += ["", "Paired differences (same examples; 95% CI over held-out sets):", "",
           "| comparison | rec@1 | rec@10 | rec@20 |", "|---|---|---|---|"]
    for key, v in paired.items():
        md.append(f"| {key} | " + " | ".join(f"{v[k]['diff']:+.3f} [{v[k]['lo']:+.3f}, {v[k]['hi']:+.3f}]"
                                            for k in ("rec@1", "rec@10", "rec@20")) + " |")
    C.plot_bars(C.result_path("t2_heads.png"), panels, k=10, title="Table 2 at this scale: rec@10, same training budget")
    C.write_results("t2_heads", {"table": "t2", "budget_s": args.budget, "datasets": summaries,
                                 "paired": paired, "protocol": C.protocol(), "wall_seconds": timer.seconds}, rows, md)


if __name__ == "__main__":
    main()
