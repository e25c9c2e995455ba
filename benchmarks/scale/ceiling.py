"""Benchmark: how much of the synthetic data's planted structure a model could turn into recall, per
generator setting, before anything is trained (issue 14: "so that a model can learn something and
recall is meaningful").

    .venv/bin/python -m benchmarks.scale.ceiling                          # 5.3M ids, zipf 0.8/1.1/1.3, 1000 topics
    .venv/bin/python -m benchmarks.scale.ceiling --ids 1e5 --zipfs 1.1 --topics 100 --name ceiling_smoke

For each setting it draws one chunk of sets (about 2M links) with the generator itself
(superbloom.data.synth.make_chunk, seed 0), holds out one id of each of --sets sets (the eval protocol's
shape: a random segment of up to 32 of the set's ids, one of them the target, the rest the context)
and ranks with
  - the planted-topic oracle (superbloom.data.synth.TopicOracle: the topics and weights of the generator),
  - the popularity list (the generator's own weights: the best popularity a model could learn),
context excluded, rec@1/10/20 with 95% bootstrap intervals. It also counts how often the ids that
make up the oracle's top-10 answers occur in the links of one chunk: the examples a model gets to
learn them from per ~2M links of training (the e2e runs trained on 2.3M links in 2,400 s).
Nothing is prepared or trained; seconds per setting are tables + chunk + ranking.
Results: benchmarks/results/scale/NAME.{json,md} with the machine and its load average.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from benchmarks.machine import machine_info, write_results

RESULTS = Path(__file__).parents[1] / "results" / "scale"
KS = (1, 10, 20)


def held_out(set_of: np.ndarray, id_of: np.ndarray, sets: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The first `sets` sets with >= 2 ids: (contexts (E, 31) -1 padded, targets (E,))."""
    rng = np.random.default_rng([seed, 1])
    order = np.argsort(set_of, kind="stable")
    bounds = np.flatnonzero(np.diff(set_of[order])) + 1
    contexts, targets = [], []
    for g in np.split(id_of[order].astype(np.int64), bounds):
        if len(g) < 2:
            continue
        seg = rng.permutation(g)[:32]
        targets.append(seg[0])
        contexts.append(np.pad(seg[1:], (0, 32 - len(seg)), constant_values=-1))
        if len(targets) == sets:
            break
    return np.stack(contexts), np.array(targets)


def setting(ids: int, zipf: float, topics: int, sets: int) -> dict:
    from superbloom.evaluation.metrics import hits_at, mean_ci, target_ranks
    from superbloom.data.synth import SynthConfig, TopicOracle, build_tables, make_chunk

    t0 = time.time()
    cfg = SynthConfig(out="unused", ids=ids, links=10**9, topics=topics, zipf=zipf)
    set_of, id_of, _ = make_chunk(cfg, build_tables(cfg), 0, 10**9)
    contexts, targets = held_out(set_of, id_of, sets)
    oracle = TopicOracle(cfg)
    top = oracle.rank(contexts, 20)
    popular = np.arange(20 + 31)  # ids are numbered by weight: the generator's popularity list
    pop = np.stack([[i for i in popular if i not in set(c)][:20] for c in contexts])
    row = {"ids": ids, "zipf": zipf, "topics": topics, "links_drawn": int(len(id_of)),
           "sets_drawn": int(set_of.max() + 1), "examples": int(len(targets))}
    for name, ranked in (("oracle", top), ("popularity", pop)):
        ranks = target_ranks(ranked, targets)
        for k in KS:
            m, lo, hi = mean_ci(hits_at(ranks, k))
            row[f"{name}_rec@{k}"], row[f"{name}_rec@{k}_lo"], row[f"{name}_rec@{k}_hi"] = m, lo, hi
    answer_ids = np.unique(top[:, :10][top[:, :10] >= 0])
    seen = np.bincount(id_of, minlength=ids)[answer_ids]
    row.update(answer_ids=int(len(answer_ids)), answer_id_links_median=float(np.median(seen)),
               answer_id_links_p10=float(np.percentile(seen, 10)),
               ids_in_chunk=int((np.bincount(id_of, minlength=ids) > 0).sum()), seconds=round(time.time() - t0, 1))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ids", type=lambda x: int(float(x)), default=5_300_000)
    ap.add_argument("--zipfs", default="0.8,1.1,1.3")
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--sets", type=int, default=2000, help="held-out sets per setting")
    ap.add_argument("--name", default="ceiling")
    args = ap.parse_args()
    load0, t0 = os.getloadavg(), time.time()
    rows = [setting(args.ids, float(z), args.topics, args.sets) for z in args.zipfs.split(",")]
    result = {"benchmark": "ceiling", "synthetic": True, "settings": vars(args), "rows": rows,
              "load_before": load0, "load_after": os.getloadavg(), "total_s": round(time.time() - t0, 1),
              "machine": machine_info()}
    cell = lambda r, n, k: f"{r[f'{n}_rec@{k}']:.3f} [{r[f'{n}_rec@{k}_lo']:.3f}, {r[f'{n}_rec@{k}_hi']:.3f}]"  # noqa: E731
    md = ["# What the SYNTHETIC data lets a model reach: the planted-topic oracle vs popularity", "",
          f"`benchmarks/scale/ceiling.py`: one chunk of sets per setting from `superbloom synth`'s generator "
          f"({args.ids:,} ids, {args.topics} topics, 1..3 per set, mean set size 87, seed 0), one held-out id in "
          f"each of {args.sets:,} sets (a random segment of up to 32 of its ids, the rest the context, context "
          "excluded from the rankings). The oracle knows the generator's topics and weights "
          "(superbloom.data.synth.TopicOracle); popularity is the generator's own weights. Nothing is trained: this "
          "is the reference a trained model's recall is read against.", "",
          "| zipf | oracle rec@1 | oracle rec@10 | oracle rec@20 | popularity rec@10 | oracle top-10 ids | "
          "their links per ~2M (median / 10th pct.) | ids in the chunk |",
          "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['zipf']} | {cell(r, 'oracle', 1)} | {cell(r, 'oracle', 10)} | {cell(r, 'oracle', 20)} | "
                  f"{cell(r, 'popularity', 10)} | {r['answer_ids']:,} | {r['answer_id_links_median']:.0f} / "
                  f"{r['answer_id_links_p10']:.0f} | {r['ids_in_chunk']:,} of {r['ids']:,} |")
    md += ["", f"{rows[0]['links_drawn']:,} links in {rows[0]['sets_drawn']:,} sets per chunk. Total "
               f"{result['total_s']:.0f} s; load average before {[round(x, 2) for x in load0]}, after "
               f"{[round(x, 2) for x in result['load_after']]}.", ""]
    write_results(RESULTS, args.name, result, md)
    print("\n".join(md))


if __name__ == "__main__":
    main()
