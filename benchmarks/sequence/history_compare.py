"""A probe of history.py against the same run without it, paired, on every validation user and on
the test users -> results/NAME.{json,md} (default: the history probe, sequence_history).

    python -m benchmarks.sequence.run --datasets beauty,toys --head hybrid --item-term auto --samples 2048 \\
        --lr 5e-3 --dropout 0.2 --batch-size 128 --steps 8000 --time-budget 1500 --eval-every 1000 \\
        --init cooccurrence --baselines popularity,cooccurrence,ease [--exclude-history] --name sequence_history_{base,xh}
    python -m benchmarks.sequence.history_compare --datasets beauty,toys
    python -m benchmarks.sequence.history_compare --datasets beauty,toys --probe 'sequence_proposal_uniform_{dataset}' \
        --name sequence_proposal_uniform      # the runs of --proposal uniform, one results file per dataset
    python -m benchmarks.sequence.history_compare --datasets beauty,toys --probe sequence_members \
        --name sequence_members_compare       # the runs of --members 2 --member-proposals log_uniform,uniform

The runs' own validation (at most 5,000 users) chose their BEST checkpoints; here every user's
validation target (the second-to-last id) is ranked by both kept models, the hybrid and its network
alone, then the test ranks each run kept (ranks.test.npz). Differences: probe minus plain, HR@10, 95%
bootstrap intervals (users resampled).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

import superbloom as sb
from benchmarks.machine import write_results
from benchmarks.paper.report import paired
from superbloom.evaluation.evaluate import EvalConfig, evaluate
from superbloom.evaluation.metrics import hits_at

from .run import RESULTS, WORK, interval

PARTS = ("model", "network_only", "term_only")


def run_entry(name: str, dataset: str) -> dict:
    entries = json.loads((RESULTS / f"{name}.json").read_text())["entries"]
    return next(e for e in entries if e["dataset"] == dataset)


def compare(dataset: str, plain: str = "sequence_history_base", probe: str = "sequence_history_xh") -> dict:
    data = sb.Dataset(WORK / "data" / dataset)
    val, test, settings = {}, {}, {}
    for v, name in (("base", plain), ("xh", probe)):
        e = run_entry(name.format(dataset=dataset), dataset)
        folder = WORK / "models" / dataset / e["setting"]
        model = sb.load(folder, device="cpu")
        res = evaluate(model, data, EvalConfig(protocol="leave-one-out", split="valid", context_len=50, baselines=()),
                       progress=False)
        val[v], test[v] = res.ranks, dict(np.load(folder / "ranks.test.npz"))
        settings[v] = e["setting"]
    out = {"dataset": dataset, "settings": settings, "users_valid": len(val["base"]["model"]),
           "users_test": len(test["base"]["model"])}
    for split, ranks in (("valid", val), ("test", test)):
        for part in PARTS:
            a, b = hits_at(ranks["xh"][part], 10), hits_at(ranks["base"][part], 10)
            out[f"{split}_{part}"] = {"base": round(float(b.mean()), 4), "xh": round(float(a.mean()), 4),
                                      "diff": {k: round(x, 4) for k, x in paired(a, b, None).items()}}
        net, term = (hits_at(ranks["xh"][p], 10) for p in ("network_only", "term_only"))
        out[f"{split}_probe_network_minus_term"] = {k: round(x, 4) for k, x in paired(net, term, None).items()}
    return out


def vs_term(entry: dict, split: str) -> str:
    d = entry.get(f"{split}_probe_network_minus_term")  # (absent from files written before it was added)
    return interval(d)


def table(entries: list[dict]) -> list[str]:
    lines = ["| dataset | split | users | hybrid: plain / probe | probe - plain [95% CI] | network alone: plain / probe | "
             "probe - plain [95% CI] | term alone: plain / probe | probe's network alone - its term alone [95% CI] |",
             "|" + "---|" * 9]
    for e in entries:
        for split in ("valid", "test"):
            cell = lambda p: e[f"{split}_{p}"]  # noqa: E731
            ci = lambda p: interval(cell(p)["diff"])  # noqa: E731
            lines.append(f"| {e['dataset']} | {split} | {e['users_' + split]:,} | {cell('model')['base']:.4f} / "
                         f"{cell('model')['xh']:.4f} | {ci('model')} | {cell('network_only')['base']:.4f} / "
                         f"{cell('network_only')['xh']:.4f} | {ci('network_only')} | {cell('term_only')['base']:.4f} / "
                         f"{cell('term_only')['xh']:.4f} | {vs_term(e, split)} |")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="beauty,toys")
    p.add_argument("--plain", default="sequence_history_base", help="results stem of the plain runs ({dataset}: each's)")
    p.add_argument("--probe", default="sequence_history_xh", help="results stem of the probe's runs ({dataset}: each's)")
    p.add_argument("--name", default="sequence_history", help="results file stem of the comparison")
    a = p.parse_args()
    torch.set_num_threads(1)
    entries = [compare(d, a.plain, a.probe) for d in a.datasets.split(",") if d]
    md = [f"# A probe against the plain run: {a.probe} against {a.plain}", "",
          __doc__.split("\n\n", 1)[1].strip("\n"), "", *table(entries)]
    write_results(RESULTS, a.name, {"entries": entries, "plain": a.plain, "probe": a.probe}, md)
    print("\n".join(table(entries)))


if __name__ == "__main__":
    main()
