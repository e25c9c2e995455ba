"""Where the network beats the transition term on sequences (issue 33): a trained hybrid's test users
split by the target's popularity and by the history's length -> results/sequence_diagnosis.{json,md}.

    python -m benchmarks.sequence.diagnose --models DATASET=MODEL_FOLDER[,DATASET=MODEL_FOLDER ...]

Each model (a hybrid run of benchmarks/sequence/run.py) ranks its dataset's test targets (leave-one-out,
full ranking, history excluded, 49 ids of context: the sequence benchmark's protocol) as the hybrid,
its network alone and its term alone, in one `evaluate`. The users are then cut into deciles by the
target's training popularity (how often it occurs in the training prefixes) and into buckets by the
number of history ids the model sees; in each, HR@10 of the three and the paired 95% intervals of
network - term and hybrid - term (users resampled). The set datasets' counterpart is
`benchmarks/quality/decomposition.py --diagnose`, whose buckets and table this reuses.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

import superbloom as sb
from benchmarks.machine import write_results
from benchmarks.quality.decomposition import bucket_rows, buckets, deciles, diagnosis_table
from superbloom.evaluation.evaluate import EvalConfig, evaluate
from superbloom.evaluation.metrics import hits_at
from superbloom.evaluation.protocols import resolve as resolve_protocol

from .run import RESULTS, WORK

HISTORY_BUCKETS = ((1, 3), (4, 4), (5, 5), (6, 7), (8, 11), (12, 19), (20, 49))  # history ids the model sees, inclusive
WINDOW = 50


def diagnose(dataset: str, model_dir: Path) -> dict:
    data = sb.Dataset(WORK / "data" / dataset)
    cfg = EvalConfig(protocol="leave-one-out", split="test", context_len=WINDOW, baselines=())
    model = sb.load(model_dir, device="cpu")
    res = evaluate(model, data, cfg, progress=False)
    if "term_only" not in res.ranks:
        raise SystemExit(f"{model_dir}: not a hybrid with a term (no term alone to compare with)")
    ex = resolve_protocol("leave-one-out", data).examples(data, cfg, model.config)
    if not np.array_equal(ex.targets, res.targets):
        raise SystemExit(f"{model_dir}: the examples drawn again differ from evaluate's")
    counts = np.bincount(np.asarray(data.train.ids), minlength=data.n_ids)  # occurrences in the training prefixes
    popularity = np.where(ex.targets >= 0, counts[np.maximum(ex.targets, 0)], 0)
    history = (ex.contexts >= 0).sum(1)
    hits = {"hybrid": hits_at(res.ranks["model"], 10), "network": hits_at(res.ranks["network_only"], 10),
            "term": hits_at(res.ranks["term_only"], 10)}

    return {"dataset": dataset, "model": str(model_dir), "users": int(len(ex.targets)), "head": res.head,
            "all": {m: round(float(h.mean()), 4) for m, h in hits.items()},
            "popularity": "occurrences of the target in the training prefixes",
            "by_target_popularity": bucket_rows(hits, deciles(popularity), None),
            "by_history_length": bucket_rows(hits, buckets(history, list(HISTORY_BUCKETS)), None)}


def render(entries: list[dict]) -> list[str]:
    md = ["# Where the network beats the transition term on sequences (issue 33)", "",
          __doc__.split("\n\n", 1)[1].strip("\n"), ""]
    for e in entries:
        h = e["head"]
        md += [f"## {e['dataset']}", "",
               f"`{e['model']}`: {e['users']:,} test users; HR@10 hybrid {e['all']['hybrid']:.4f}, network alone "
               f"{e['all']['network']:.4f}, term alone {e['all']['term']:.4f} ({h.get('item_term')} term, mix "
               f"{h.get('item_mix'):g}, decay {h.get('item_decay'):g}).", "",
               *diagnosis_table(e["by_target_popularity"], "target popularity (decile)"), "",
               *diagnosis_table(e["by_history_length"], "history ids seen"), ""]
    return md


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", required=True, help="DATASET=MODEL_FOLDER, comma-separated")
    p.add_argument("--name", default="sequence_diagnosis", help="results file stem in benchmarks/results/")
    a = p.parse_args()
    torch.set_num_threads(1)
    pairs = [x.split("=", 1) for x in a.models.split(",") if x]
    if any(len(x) != 2 for x in pairs):
        p.error(f"--models: expected DATASET=MODEL_FOLDER pairs, got {a.models!r}")
    entries = [diagnose(d, Path(m)) for d, m in pairs]
    write_results(RESULTS, a.name, {"entries": entries}, render(entries))
    print("\n".join(render(entries)))


if __name__ == "__main__":
    main()
