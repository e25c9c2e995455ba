"""Sequence hybrids of one dataset as one model (sb.Ensemble: the mean of their network log p, plus the
term at the members' median weight), against the first (one model or several) alone -> results/NAME.{json,md}.

    python -m benchmarks.sequence.pair_ensemble --dataset beauty --first RUN_SUFFIX --second RUN_SUFFIX \\
        --split valid|test --name sequence_pair_ensemble

The members are model folders under runs/sequence/models/DATASET/ named by the sequence benchmark's
setting; `--first ''` is the plain hybrid run of benchmarks/sequence/history_compare.py and `--second`
the suffix its probe added (`-xh`: the history out of the negatives; `-quniform`, `-qmixed`: another
proposal for the sampled negatives, history.py). Each ranks the split's targets (leave-one-out, full
ranking, history excluded) as the ensemble's hybrid, its networks alone and its term alone, and the
first member the same way; HR@10 differences with 95% bootstrap intervals (users resampled). Choose
on `valid`; `test` once. `--first` and `--second` also take comma lists, a full setting name (a run
with `--seed 2` names its setting in the middle) or a member of an ensemble folder
(`-x2-plog_uniform+uniform/member-1`): `--first A,B --second C` is what C adds to the pair A, B.
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

import superbloom as sb
from benchmarks.machine import machine_info, read_results, write_results
from benchmarks.paper.report import paired
from superbloom.evaluation.evaluate import EvalConfig, evaluate
from superbloom.evaluation.metrics import hits_at
from superbloom.inference.ensemble import Ensemble

from .run import RESULTS, WORK, interval

PLAIN = "next-item-hybrid-a1m1-d64L2-lr0.005-drop0.2-b128-8000steps-neg2048-nb200-auto-1500s-initcooccurrence"
PARTS = ("model", "network_only", "term_only")


def settings(spec: str) -> list[str]:
    """'A,B' -> the model folders' setting names: a suffix after PLAIN ('' is PLAIN itself) or a full name."""
    return [x if x.startswith("next-item") else PLAIN + x for x in spec.split(",")]


def short(name: str) -> str:
    """A setting name as the table shows it: what it adds to PLAIN (`-seed2-quniform`, with its
    `/member-i`), or several of them joined by ' + '."""
    if "," in name:
        return " + ".join(map(short, name.split(",")))
    folder, _, member = name.partition("/")
    extra = [t for t in folder.split("-") if t not in PLAIN.split("-")]
    return ("-" + "-".join(extra) if extra else "(plain)") + (f"/{member}" if member else "")


def compare(dataset: str, first: str, second: str, split: str) -> dict:
    data = sb.Dataset(WORK / "data" / dataset)
    load = [sb.load(WORK / "models" / dataset / s, device="cpu") for s in settings(first) + settings(second)]
    base = load[:len(settings(first))]
    cfg = EvalConfig(protocol="leave-one-out", split=split, context_len=50, baselines=())
    alone = evaluate(base[0] if len(base) == 1 else Ensemble(base), data, cfg, progress=False).ranks
    pair = Ensemble(load)
    both = evaluate(pair, data, cfg, progress=False).ranks
    hits = {(who, p): hits_at(r[p], 10) for who, r in (("first", alone), ("pair", both)) for p in PARTS if p in r}
    return {"dataset": dataset, "split": split, "first": ",".join(settings(first)), "second": ",".join(settings(second)),
            "mix": pair.mix, "users": int(len(alone["model"])),
            "hr@10": {f"{who} {p}": round(float(h.mean()), 4) for (who, p), h in hits.items()},
            "pair_minus_first": {p: {k: round(v, 4) for k, v in paired(hits["pair", p], hits["first", p], None).items()}
                                 for p in PARTS if ("pair", p) in hits},
            "pair_network_minus_its_term": {k: round(v, 4) for k, v in paired(hits["pair", "network_only"],
                                                                             hits["pair", "term_only"], None).items()}}


def table(entries: list[dict]) -> list[str]:
    lines = ["| dataset | split | second member (added to the first) | users | hybrid: first / ensemble | "
             "ensemble - first [95% CI] | networks alone: first / ensemble | ensemble - first [95% CI] | term alone | "
             "ensemble's networks - term [95% CI] |",
             "|" + "---|" * 10]
    for e in entries:
        h, d = e["hr@10"], e["pair_minus_first"]
        added = f"`{short(e['second'])}`" + ("" if e["first"] == PLAIN else f" (to `{short(e['first'])}`)")
        lines.append(f"| {e['dataset']} | {e['split']} | {added} | {e['users']:,} | "
                     f"{h['first model']:.4f} / {h['pair model']:.4f} | {interval(d['model'])} | "
                     f"{h['first network_only']:.4f} / {h['pair network_only']:.4f} | {interval(d['network_only'])} | "
                     f"{h['pair term_only']:.4f} | {interval(e['pair_network_minus_its_term'])} |")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True)
    p.add_argument("--first", default="", help="the first member's suffix after the plain setting ('' : plain), "
                   "or several, comma-separated (module docstring)")
    p.add_argument("--second", required=True, help="the member(s) added to it: suffixes (-xh, -quniform, -qmixed), "
                   "comma-separated")
    p.add_argument("--split", default="valid", choices=("valid", "test"))
    p.add_argument("--name", default="sequence_pair_ensemble", help="results file stem (entries accumulate)")
    a = p.parse_args()
    folders = [WORK / "models" / a.dataset / s for s in settings(a.first) + settings(a.second)]
    missing = [f for f in folders if not (f / "config.json").exists()]
    if missing:
        p.error(f"no model folder {missing[0]} (config.json); train it with "
                "benchmarks.sequence.run and that setting first")
    torch.set_num_threads(1)
    e = compare(a.dataset, a.first, a.second, a.split)
    saved = read_results(RESULTS, a.name) or {"entries": []}
    key = (e["dataset"], e["split"], e["first"], e["second"])
    saved["entries"] = [x for x in saved["entries"] if (x["dataset"], x["split"], x["first"], x["second"]) != key] + [e]
    saved["machine"] = machine_info()
    md = ["# Sequence hybrids as one model, against the first alone", "",
          __doc__.split("\n\n", 1)[1].strip("\n"), "", *table(saved["entries"])]
    write_results(RESULTS, a.name, saved, md)  # atomic: the entries accumulate, a kill leaves them whole
    print("\n".join(table([e])))


if __name__ == "__main__":
    main()
