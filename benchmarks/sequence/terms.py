"""Which item-item term should the hybrid head use on ordered data? One trained network, each term.

    /work/tools/benchlock -1 .venv/bin/python -m benchmarks.sequence.terms \\
        beauty=runs/sequence/models/beauty/<setting> bert4rec_beauty=runs/sequence/models/bert4rec_beauty/<setting>

For each trained hybrid model (run.py's output directory), the network is kept as it is and the
head's item-item term is rebuilt from the dataset's training prefixes with each term in turn (ease
where it fits, cooccurrence, transition; heads/hybrid.py), then mix and decay are chosen on the
validation targets exactly as during training (the second-to-last id of the same seeded
users, history excluded, full ranking; sequence.py's VAL_USERS, SELECT, DECAYS). The test targets are
never touched. This isolates the term: every row of a dataset shares the network (its "network
alone" is the same), so the differences are the term's alone. Results: benchmarks/results/sequence_terms.{json,md}.
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import torch

from superbloom.baselines import EASE_MAX_IDS
from superbloom.dataset import Dataset
from superbloom.predictor import Predictor, rank_contexts
from superbloom.protocols import LeaveOneOut
from superbloom.sequence import DECAYS, SELECT, VAL_USERS, sequence_summary, target_ranks

from ..machine import machine_info, write_results
from .run import WORK, load_average

RESULTS = Path("benchmarks/results")


def compare(name: str, model_dir: Path, terms: list[str]) -> list[dict]:
    data = Dataset(WORK / "data" / name)
    pred = Predictor.load(model_dir, threads=1, mmap=False)
    head = pred.model.head
    if not head.uses_context:
        raise SystemExit(f"{model_dir}: not a hybrid-head model (head {type(head).__name__})")
    positions = int(pred.config["model"].get("positions") or 50)
    ex = LeaveOneOut("valid", positions, exclude_history=True, max_sets=VAL_USERS, seed=0).examples(data)

    def rank():
        return rank_contexts(pred.model, pred.hashing, ex.contexts, 20, exclude=ex.exclude)

    def metrics(ranking) -> dict:
        return sequence_summary(target_ranks(ranking.ids.numpy(), ex.targets))

    rows = []
    for term in terms:
        if term == "ease" and data.n_ids > EASE_MAX_IDS:
            rows.append({"dataset": name, "term": term, "skipped": f"{data.n_ids:,} ids > {EASE_MAX_IDS:,}"})
            continue
        head.cfg = dataclasses.replace(head.cfg, term=term)
        t0 = time.time()
        built = head.fit(data.train, ordered=True)
        build_s = time.time() - t0
        t0 = time.time()
        r = head.choose(rank, metrics, SELECT, DECAYS)
        rows.append({"dataset": name, "term": term, "model": str(model_dir), "values": built["item_item_values"],
                     "build_seconds": round(build_s, 1), "choose_seconds": round(time.time() - t0, 1),
                     "validation_users": int(len(ex.targets)), "hr@10": r["hr@10"], "ndcg@10": r["ndcg@10"],
                     "mix": r["item_mix"], "decay": r["item_decay"], "network_alone_ndcg@10": r[f"pure_{SELECT}"]})
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="+", help="DATASET=MODEL_DIR pairs (a hybrid model trained by run.py)")
    p.add_argument("--terms", default="ease,cooccurrence,transition")
    p.add_argument("--name", default="sequence_terms")
    args = p.parse_args()
    torch.set_num_threads(1)
    rows, load_before = [], load_average()
    for pair in args.models:
        name, _, model_dir = pair.partition("=")
        if not model_dir:
            raise SystemExit(f"expected DATASET=MODEL_DIR, got {pair!r}")
        rows += compare(name, Path(model_dir), args.terms.split(","))
    md = ["# The hybrid head's item-item term on ordered data: one network, each term (validation only)", "",
          "Each dataset's trained hybrid network kept fixed; its item-item term rebuilt from the training "
          "prefixes with each term (200 values per id), mix and decay chosen on the validation targets "
          "(second-to-last ids of the same seeded users, history excluded, full ranking), as in training. "
          "Test targets untouched. Produced by `python -m benchmarks.sequence.terms`.", "",
          "| dataset | term | HR@10 | NDCG@10 | mix | decay | network alone NDCG@10 | users |",
          "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "skipped" in r:
            md.append(f"| {r['dataset']} | {r['term']} | skipped: {r['skipped']} | | | | | |")
        else:
            md.append(f"| {r['dataset']} | {r['term']} | {r['hr@10']:.4f} | {r['ndcg@10']:.4f} | {r['mix']:g} | "
                      f"{r['decay']:g} | {r['network_alone_ndcg@10']:.4f} | {r['validation_users']:,} |")
    load_after = load_average()
    md += ["", f"One torch thread; load average (1/5/15 min) before {load_before}, after {load_after} "
           "(the machine's other benchmark slot was in use).", ""]
    write_results(RESULTS, args.name, {"rows": rows, "load_average_before": load_before,
                                       "load_average_after": load_after, "machine": machine_info()}, md)


if __name__ == "__main__":
    main()
