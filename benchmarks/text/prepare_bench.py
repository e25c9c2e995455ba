"""Benchmark: `superbloom prepare-text` on the three real corpora together, 1,000,000-entry vocabulary.

    /work/tools/benchlock .venv/bin/python benchmarks/text/prepare_bench.py
    python benchmarks/text/prepare_bench.py --data ../shared/data --vocab-size 1000000

Runs each configuration in a child process (wall time, the child's peak RSS from getrusage, the
summary's per-stage seconds): the three corpora together (Wikispeedia articles, GCIDE, Brown) with
the default settings (1M unigrams+bigrams, segments of 128, lower-case), then each corpus alone.
Prepared data goes to --workdir (default /tmp/superbloom-text-bench), never into the repo.
Results: benchmarks/results/text/prepare.{json,md}, with the machine and the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a file too: `python benchmarks/text/NAME.py`
from benchmarks.datasets import DATA_ROOT, DATASETS  # noqa: E402
from benchmarks.machine import machine_info, write_results  # noqa: E402

CORPORA = {"wikispeedia": DATASETS["wikispeedia-articles"].path, "gcide": DATASETS["gcide"].path,
           "brown": DATASETS["brown"].path}  # row name -> file under --data

CHILD = """
import json, resource, sys, time
from superbloom.text import TextPrepareConfig, prepare_text
cfg = json.loads(sys.argv[1])
t = time.time()
s = prepare_text(TextPrepareConfig(tuple(cfg["inputs"]), cfg["out"], vocab_size=cfg["vocab_size"]), progress=False,
                 overwrite=True)  # a re-run replaces its own earlier output
wall = time.time() - t
print(json.dumps({"wall_s": wall, "peak_rss_mb": int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024,
                  "summary": s}))
"""


def run(name: str, inputs: list[str], out: Path, vocab_size: int) -> dict:
    arg = json.dumps({"inputs": inputs, "out": str(out), "vocab_size": vocab_size})
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    t = time.time()
    proc = subprocess.run([sys.executable, "-c", CHILD, arg], capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode:
        raise SystemExit(f"{name}: child failed\n{proc.stderr[-3000:]}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    s = r["summary"]
    row = {"name": name, "inputs": inputs, "vocab_size_requested": vocab_size,
           "wall_s": round(r["wall_s"], 1), "process_s": round(time.time() - t, 1),
           "peak_rss_mb": round(r["peak_rss_mb"]), "words": s["words"], "documents": s["documents"],
           "sentences": s["sentences"], "vocab": s["vocab"], "ids_written": s["links"],
           "bigram_tokens": s["bigram_tokens"], "rows": s["sets"], "unk_train": s["train"]["unk"],
           "unk_test": s["test"]["unk"], "unk_rate_test": s["test"]["unk_rate"],
           "words_per_s": round(s["words"] / r["wall_s"]), "seconds_by_stage": s["seconds_by_stage"],
           "repaired_utf8_documents": s["corpus"]["repaired_utf8_documents"]}
    print(json.dumps({k: row[k] for k in ("name", "wall_s", "peak_rss_mb", "words", "words_per_s")}), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA_ROOT), help="the shared data folder")
    ap.add_argument("--vocab-size", type=int, default=1_000_000)
    ap.add_argument("--workdir", default="/tmp/superbloom-text-bench")
    ap.add_argument("--alone", action=argparse.BooleanOptionalAction, default=True,
                    help="also prepare each corpus alone")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "text"))
    args = ap.parse_args()
    data = Path(args.data)
    paths = {k: str(data / v) for k, v in CORPORA.items()}
    missing = [p for p in paths.values() if not Path(p).exists()]
    if missing:
        raise SystemExit(f"missing corpora: {missing}")
    load_before = os.getloadavg()
    work = Path(args.workdir)
    rows = [run("all three", list(paths.values()), work / "all", args.vocab_size)]
    if args.alone:
        rows += [run(k, [p], work / k, args.vocab_size) for k, p in paths.items()]
    load_after = os.getloadavg()
    result = {"machine": machine_info(), "load_average_before": [round(x, 2) for x in load_before],
              "load_average_after": [round(x, 2) for x in load_after], "runs": rows}
    md = ["# prepare-text benchmark", "",
          "`superbloom prepare-text` (superbloom/text/) on the real corpora in ../shared/data, default settings "
          f"(vocabulary of {args.vocab_size:,} unigrams+bigrams + [UNK], lower-case, NFKC, segments of 128, "
          "10% of documents held out), each run in a fresh child process; peak RSS is the child's.", "",
          "| corpora | words | documents | wall time | words/s | peak RSS | vocabulary: unigrams + bigrams "
          "| bigram tokens | [UNK] train / test |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        v = r["vocab"]
        md.append(f"| {r['name']} | {r['words']:,} | {r['documents']:,} | {r['wall_s']} s | {r['words_per_s']:,} "
                  f"| {r['peak_rss_mb']:,} MB | {v['size']:,} = {v['unigrams']:,} + {v['bigrams']:,} "
                  f"| {r['bigram_tokens']:,} | {r['unk_train']:,} / {r['unk_test']:,} |")
    md += ["", "Seconds by stage (read + NFKC + sentences + words; word unification; counting; vocabulary; "
           "greedy tokenisation; writing):", ""]
    for r in rows:
        md.append(f"- {r['name']}: " + ", ".join(f"{k} {v}" for k, v in r["seconds_by_stage"].items()))
    md += ["", f"Load average (1/5/15 min) before {result['load_average_before']}, after "
               f"{result['load_average_after']} (a shared 2-core machine: other people's jobs inflate wall time).", ""]
    write_results(Path(args.out), "prepare", result, md)
    print("\n".join(md))


if __name__ == "__main__":
    main()
