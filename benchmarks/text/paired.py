"""Benchmark: paired intervals for trained text models (the Table 4/5 comparison of table5_bench.py).

    .venv/bin/python -m benchmarks.text.paired --data runs/data_text \
        --models runs/table5_s8/hash40-d128,runs/table5_s8/baseline-d6,runs/table5_s8/sampled-d6 --name table5_s8_paired

table5_bench.py gives each model its own bootstrap interval; two overlapping intervals do not say
that two models are level, since every model is evaluated on the same masked tokens. This
re-evaluates saved models with `superbloom eval FIRST --compare ...` (superbloom/compare.py): the
same text protocol and seed as table5_bench (--max-sets 300 test rows, depth 20), and the paired
difference of the first model minus each other model and minus the unigram and bigram-context
baselines, with the bootstrap interval of the difference (whole test rows resampled).

Results: benchmarks/results/text/NAME.{json,md} with the machine and the load average.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
from benchmarks.machine import machine_info, write_results  # noqa: E402

KEYS = ("rec@1", "rec@10", "rec@20", "mrr")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT / "runs" / "data_text"))
    ap.add_argument("--models", required=True, help="comma-separated model directories; the first is compared "
                                                    "with each of the others and with the baselines")
    ap.add_argument("--max-sets", type=int, default=300, help="test rows (as table5_bench.py)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--name", required=True)
    args = ap.parse_args()

    import superbloom as sb
    from superbloom.evaluation.compare import compare
    from superbloom.evaluation.evaluate import EvalConfig

    first, *others = args.models.split(",")
    load0, t0 = os.getloadavg(), time.time()
    sb.set_threads(args.threads)
    r = compare(sb.load(first, device="cpu"),
                {m: (lambda m=m: sb.load(m, device="cpu")) for m in others},
                sb.Dataset(args.data), EvalConfig(max_sets=args.max_sets, seed=0, depth=20), progress=False).to_dict()
    result = {"benchmark": "text_paired", "machine": machine_info(), "settings": vars(args),
              "load_before": load0, "load_after": os.getloadavg(), "total_s": round(time.time() - t0, 1), "result": r}
    short = [Path(m).name for m in [first, *others]]
    name = lambda m: (Path(m).name if short.count(Path(m).name) == 1  # noqa: E731
                      else f"{Path(m).parent.name}/{Path(m).name}")
    fmt = lambda x, k, sign="": f"{x:{sign}.1%}" if k != "mrr" else f"{x:{sign}.3f}"  # noqa: E731
    row = lambda v: " | ".join(fmt(v[k], k) for k in KEYS)  # noqa: E731
    cell = lambda p, k: f"{fmt(p['diff'], k, '+')} [{fmt(p['lo'], k, '+')}, {fmt(p['hi'], k, '+')}]"  # noqa: E731
    md = [f"# Paired differences of {name(first)} on the same masked test tokens", "",
          f"{r['examples']:,} masked tokens of {r['rows']} held-out test rows (the text protocol of table5_bench.py, "
          "seed 0, depth 20). Every model and baseline ranks the very same tokens; each row is the difference "
          f"{name(first)} minus the other method (recalls in percentage points, MRR absolute), with the 95% bootstrap "
          "interval of the difference (whole test rows resampled, 1,000 resamples).", "",
          "| method | rec@1 | rec@10 | rec@20 | MRR |", "|---|---|---|---|---|",
          f"| {name(first)} | {row(r)} |"]
    md += [f"| {name(m)} | {row(c['metrics'])} |" for m, c in r["compared"].items()]
    md += [f"| {b} baseline | {row(v)} |" for b, v in r["baselines"].items()]
    md += ["", f"| {name(first)} minus | rec@1 | rec@10 | rec@20 | MRR |", "|---|---|---|---|---|"]
    md += [f"| {name(m)} | " + " | ".join(cell(c["paired"][k], k) for k in KEYS) + " |" for m, c in r["compared"].items()]
    md += [f"| {b} baseline | " + " | ".join(cell(p[k], k) for k in KEYS) + " |" for b, p in r["paired_vs_baselines"].items()]
    md += ["", f"Evaluation {result['total_s']:.0f} s; load average (1/5/15 min) before {[round(x, 2) for x in load0]}, "
               f"after {[round(x, 2) for x in result['load_after']]}.", ""]
    write_results(ROOT / "benchmarks" / "results" / "text", args.name, result, md)
    print("\n".join(md))


if __name__ == "__main__":
    main()
