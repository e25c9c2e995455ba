"""Benchmark: bulk recommendations (contexts/s) of `superbloom predict MODEL --input F --output recs.parquet`
at 1 and 2 torch threads, against the HTTP API answering one context per request (1 and 8 concurrent).

    flock /tmp/superbloom-cpu.lock .venv/bin/python -m benchmarks.bulk_predict         # ~4 min here
    .venv/bin/python -m benchmarks.bulk_predict --model runs/big/model --data runs/big/data --results DIR

The model: --model (any id model; the 5.1M-id one for its row), else the demo's quick model, trained
first with `superbloom demo --quick --out runs/bulk` if missing. The contexts: --contexts of 1 to 8 ids,
each from one held-out page of --data (load.py's contexts; random vocabulary ids without it),
written once as JSONL. Bulk: the command as a user runs it, in a child process with OMP_NUM_THREADS
= 1 or 2; recorded are the command's own throughput line (the streaming phase: read, rank, write)
and its wall time (Python's start and the model's load included). HTTP: `superbloom serve MODEL
--threads T` in a child process and load.py's closed-loop asyncio client, one context per POST
/v1/predict, for --duration seconds per level after a warm-up. Same k, the same default decoding
on both sides; client, server and the other jobs of the machine share its cores (the load average
is recorded). Results: benchmarks/results/bulk_predict.{json,md}.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path


from benchmarks.load import contexts, free_port, run_level, start_server
from benchmarks.machine import machine_info, write_results
from superbloom.storage.files import load_json

SUMMARY = re.compile(r"([\d,]+) contexts in ([\d.]+) s \(([\d,.]+) contexts/s\)")


def ensure_model(model: Path, out: Path) -> None:
    """The demo's quick model, trained unless `model` already holds one."""
    if (model / "config.json").exists():
        return
    print(f"training the demo's quick model in {out}", flush=True)
    subprocess.run([sys.executable, "-m", "superbloom", "demo", "--quick", "--out", str(out), "--quiet"], check=True,
                   stdout=subprocess.DEVNULL)


def bulk(model: Path, inp: Path, out: Path, k: int, threads: int) -> dict:
    """One `superbloom predict --input --output` run with `threads` torch threads."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "superbloom", "predict", str(model), "--input", str(inp), "--out",
                        str(out), "--k", str(k)], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"predict failed ({p.returncode}): {p.stderr[-2000:]}")
    m = SUMMARY.search(p.stderr)
    if m is None:
        raise RuntimeError(f"no throughput line in predict's output: {p.stderr[-500:]}")
    n, seconds = int(m.group(1).replace(",", "")), float(m.group(2))
    return {"threads": threads, "contexts": n, "stream_seconds": seconds,
            "contexts_per_s": round(float(m.group(3).replace(",", "")), 1),
            "wall_seconds": round(wall, 2), "contexts_per_s_wall": round(n / wall, 1)}


def serve(model: Path, port: int, threads: int, log: Path) -> subprocess.Popen:
    return start_server(model, port, log, ("--threads", str(threads)))


def http_levels(model: Path, ctxs: list[list[str]], threads: int, concurrency: list[int], duration: float,
                k: int, work: Path) -> list[dict]:
    port = free_port()
    proc = serve(model, port, threads, work / f"serve-{port}.log")
    url = f"http://127.0.0.1:{port}"
    try:
        asyncio.run(run_level(url, ctxs, 2, 2.0, k))  # warm-up, not recorded
        out = []
        for c in concurrency:
            r = asyncio.run(run_level(url, ctxs, c, duration, k))
            r.pop("samples", None)
            out.append(dict(r, threads=threads, contexts_per_s=r["requests_per_s"]))
            print(f"HTTP, {threads} thread(s), concurrency {c}: {r['requests_per_s']:,.1f} contexts/s "
                  f"(p50 {r['p50_ms']} ms, errors {r['errors']}, mean batch {r['mean_batch']})", flush=True)
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="runs/bulk/model", help="model directory (the demo's quick model is "
                    "trained there if missing)")
    ap.add_argument("--data", default="runs/bulk/data", help="prepared data the contexts come from")
    ap.add_argument("--contexts", type=int, default=2000, help="contexts in the bulk file (default %(default)s)")
    ap.add_argument("--threads", default="1,2", help="torch threads of the bulk runs and the server")
    ap.add_argument("--concurrency", default="1,8", help="concurrent HTTP requests")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per HTTP level (default %(default)s)")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--work", default="runs/bulk/work", help="where the contexts and recommendations are written")
    ap.add_argument("--results", default="benchmarks/results")
    ap.add_argument("--name", default="bulk_predict", help="results file name (default %(default)s)")
    args = ap.parse_args(argv)

    model, data, work = Path(args.model), Path(args.data), Path(args.work)
    ensure_model(model, model.parent)
    work.mkdir(parents=True, exist_ok=True)
    ctxs = contexts(data, model, args.contexts)
    inp = work / "contexts.jsonl"
    inp.write_text("".join(json.dumps({"context": c, "id": f"q{i}"}) + "\n" for i, c in enumerate(ctxs)))
    threads = [int(t) for t in args.threads.split(",")]
    load_before = [round(x, 2) for x in os.getloadavg()]
    t_start = time.perf_counter()
    rows = []
    for t in threads:
        r = bulk(model, inp, work / f"recs-{t}.parquet", args.k, t)
        print(f"bulk, {t} thread(s): {r['contexts_per_s']:,.1f} contexts/s streaming, "
              f"{r['contexts_per_s_wall']:,.1f} with start and load ({r['wall_seconds']} s)", flush=True)
        rows.append(dict(r, method="superbloom predict --input --output"))
    conc = [int(c) for c in args.concurrency.split(",")]
    for t in threads:
        rows += [dict(r, method="HTTP POST /v1/predict, one context per request")
                 for r in http_levels(model, ctxs, t, conc, args.duration, args.k, work)]
    load_after = [round(x, 2) for x in os.getloadavg()]
    config = load_json(model / "config.json")
    result = {
        "benchmark": "bulk predict throughput vs the HTTP API one context at a time",
        "machine": dict(machine_info(), load_average_before=load_before, load_average_after=load_after),
        "model": {"dir": model.name, "kind": config.get("kind"), "ids": config["data"]["ids"],
                  "parameters": config["parameters"], "head": config["head"]["name"], "hash": config["hash"]},
        "settings": {"contexts": len(ctxs), "k": args.k, "decode": "the default of both (DecodeConfig())",
                     "context_ids": "1-8 ids from one held-out page", "http_duration_s": args.duration,
                     "client": "benchmarks/load.py's asyncio HTTP/1.1 keep-alive client, same machine"},
        "seconds": round(time.perf_counter() - t_start, 1), "rows": rows,
    }
    m = result["machine"]
    md = ["# Bulk predict throughput (contexts/s)", "",
          f"Model: `{model.name}`, {config['data']['ids']:,} ids, {config['parameters']:,} parameters, head "
          f"{config['head']['name']}, alpha={config['hash']['alpha']}, m={config['hash']['m']}. {len(ctxs):,} "
          f"contexts of 1-8 ids from held-out pages, k = {args.k}, the default decoding. Bulk: `superbloom predict "
          "MODEL --input contexts.jsonl --output recs.parquet` with OMP_NUM_THREADS = threads (streaming: the "
          "command's own figure; wall: with Python's start and the model's load). HTTP: `superbloom serve "
          f"--threads T`, one context per POST /v1/predict, closed loop, {args.duration:g} s per level. "
          f"{m['cores']} cores shared with other jobs: load average {', '.join(map(str, load_before))} before, "
          f"{', '.join(map(str, load_after))} after.", "",
          "| method | threads | concurrency | contexts/s | contexts/s with start and load |",
          "|---|---:|---:|---:|---:|"]
    for r in rows:
        md.append(f"| {r['method']} | {r['threads']} | {r.get('concurrency', '')} | {r['contexts_per_s']:,.1f} | "
                  f"{r.get('contexts_per_s_wall', ''):{',.1f' if 'contexts_per_s_wall' in r else ''}} |")
    md += ["", f"The measurements took {result['seconds']:,.0f} s (the model's training not included)."]
    cmd = "flock /tmp/superbloom-cpu.lock .venv/bin/python -m benchmarks.bulk_predict"
    if args.model != ap.get_default("model"):
        cmd += f" --model {args.model} --data {args.data}"
    md += ["", f"Regenerate: `{cmd}`", ""]
    write_results(Path(args.results), args.name, result, md)
    print(f"results in {args.results}/{args.name}.json and .md ({result['seconds']} s)")
    return 1 if any(r.get("errors") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
