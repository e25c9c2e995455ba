"""Benchmark: the registry's `text-sets` dataset (prepare-text --as-sets on Wikispeedia's articles,
GCIDE and Brown), prepared once: time, peak RSS, ids, sets, mean set size.

    /work/tools/benchlock .venv/bin/python benchmarks/scale/text_sets_prepare.py
    python benchmarks/scale/text_sets_prepare.py --vocab-size 1100000 --workdir /tmp/superbloom-text-sets

Runs the preparation in a child process (wall time; peak RSS: the child's VmHWM), with the settings
of benchmarks/datasets.py's entry (seed 0, 10% of the documents held out) unless --vocab-size says
otherwise. The dataset goes to --workdir, never into the repository. Results:
benchmarks/results/scale/text_sets_prepare.{json,md}, with the machine and the load average.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a file too
from benchmarks.datasets import DATASETS, text_sets_config  # noqa: E402
from benchmarks.machine import machine_info, write_results  # noqa: E402

NAME = "text-sets"
CHILD = """
import dataclasses, json, sys, time
from benchmarks.datasets import text_sets_config
from superbloom.text import prepare_text
arg = json.loads(sys.argv[1])
cfg = dataclasses.replace(text_sets_config("text-sets", arg["out"]), vocab_size=arg["vocab_size"])
t = time.time()
s = prepare_text(cfg, progress=False, overwrite=True)  # each run replaces its own earlier output
wall = time.time() - t
print(json.dumps({"wall_s": wall, "peak_rss_mb": int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024,
                  "summary": s}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab-size", type=int, default=DATASETS[NAME].vocab_size,
                    help="n-grams chosen (default: the registry entry's, %(default)s)")
    ap.add_argument("--workdir", default="/tmp/superbloom-text-sets")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "scale"))
    args = ap.parse_args()
    out = Path(args.workdir) / "data"
    cfg = dataclasses.replace(text_sets_config(NAME, out), vocab_size=args.vocab_size)  # exits if a corpus is missing
    load_before = os.getloadavg()
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    t = time.time()
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps({"out": str(out), "vocab_size": args.vocab_size})],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode:
        raise SystemExit(f"child failed\n{proc.stderr[-3000:]}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    s = r["summary"]
    row = {"name": NAME, "inputs": list(cfg.inputs), "vocab_size_requested": args.vocab_size,
           "wall_s": round(r["wall_s"], 1), "process_s": round(time.time() - t, 1),
           "peak_rss_mb": round(r["peak_rss_mb"]), "ids": s["ids"], "sets": s["sets"],
           "train": s["train"], "test": s["test"], "links": s["links"],
           "mean_set_size": round(s["links"] / max(s["sets"], 1), 2),
           "documents": s["documents"], "paragraphs": s["paragraphs"], "words": s["words"], "tokens": s["tokens"],
           "short_paragraphs_dropped": s["short_paragraphs_dropped"], "unk_dropped": s["unk_dropped"],
           "duplicates_removed": s["duplicates_removed"], "test_links_unseen_in_train": s["test_links_unseen_in_train"],
           "test_ids_unseen_in_train": s["test_ids_unseen_in_train"], "ngrams": s["ngrams"],
           "seconds_by_stage": s["seconds_by_stage"]}
    result = {"machine": machine_info(), "load_average_before": [round(x, 2) for x in load_before],
              "load_average_after": [round(x, 2) for x in os.getloadavg()], "run": row}
    v = s["ngrams"]
    md = ["# text-sets: a set dataset of a million ids from text", "",
          f"`prepare-text --as-sets` on Wikispeedia's articles, GCIDE and Brown (benchmarks/datasets.py, entry "
          f"`{NAME}`): one set per paragraph, its unigram + bigram ids each once, [UNK] dropped, paragraphs with "
          f"< 2 ids dropped, 10% of the documents held out (seed 0). {args.vocab_size:,} n-grams are chosen from "
          f"the training documents ({v['unigrams']:,} unigrams + {v['bigrams']:,} bigrams); the ids are those of "
          "them that occur in a training set (the others: bigrams the greedy tokenisation never emits, n-grams "
          "only in dropped paragraphs). One run in a fresh child process; peak RSS is the child's.", "",
          "| ids | sets (train / test) | mean set size (train / test) | links | wall time | peak RSS |",
          "|---|---|---|---|---|---|",
          f"| {s['ids']:,} | {s['sets']:,} ({s['train']['sets']:,} / {s['test']['sets']:,}) "
          f"| {row['mean_set_size']} ({s['train']['mean_set_size']} / {s['test']['mean_set_size']}) | {s['links']:,} "
          f"| {row['wall_s']} s | {row['peak_rss_mb']:,} MB |", "",
          f"- documents {s['documents']:,} ({s['train']['documents']:,} train / {s['test']['documents']:,} test), "
          f"paragraphs {s['paragraphs']:,}, words {s['words']:,}, tokens {s['tokens']:,}",
          f"- dropped: {s['short_paragraphs_dropped']:,} paragraphs with < 2 ids, {s['unk_dropped']:,} [UNK] tokens; "
          f"{s['duplicates_removed']:,} repeated ids folded",
          f"- test links whose id is not in a training set: {s['test_links_unseen_in_train']:,} "
          f"({s['test_ids_unseen_in_train']:,} distinct ids; -1 in test.ids.npy, as `prepare` writes them)",
          "- seconds by stage: " + ", ".join(f"{k} {val}" for k, val in s["seconds_by_stage"].items()), "",
          f"Load average (1/5/15 min) before {result['load_average_before']}, after {result['load_average_after']} "
          "(a shared 2-core machine: other jobs inflate wall time).", ""]
    write_results(Path(args.out), "text_sets_prepare", result, md)
    print("\n".join(md))


if __name__ == "__main__":
    main()
