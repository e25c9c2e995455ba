"""Benchmark: the HTTP service under load — POST /v1/predict at concurrency 1, 8 and 32, 30 s each.

    flock /tmp/superbloom-cpu.lock .venv/bin/python -m benchmarks.load     # ~7 min the first time

Uses a model trained on the embedded Wikispeedia links with the default configuration (2 layers,
d = 128, alpha = 4, m = 2): if --model does not exist yet it is prepared and trained first
(--train-seconds, default 300) under runs/load/. Then `superbloom serve` starts in a child process
on a free loopback port and a closed-loop asyncio client keeps `concurrency` requests in
flight for --duration seconds per level, after a short warm-up. Each request is a context of 1 to 8
ids drawn from one held-out Wikispeedia page, k = 10, approximate decoding (B = k). Client and
server share the machine's cores (the client is a minimal asyncio HTTP/1.1 one, to leave them to
the server). Records requests/s, p50 / p99 / max latency, errors (any non-200
or transport error; the run fails if there is one) and the server's mean batch size (from /health).
Results: benchmarks/results/load.{json,md}.

--before DIR compares versions of the server: DIR is a checkout of other code (e.g.
`git worktree add --detach /tmp/serve_before REV`; repeat --before for several, oldest first),
whose `superbloom serve` runs from DIR with DIR on PYTHONPATH (the same Python and packages, the
same model and settings), and the rounds alternate (before, after, before, after for --rounds 2) so
that load from other work on the machine falls on every version. Each level records the 1-minute
load average at its start and end; the percentiles of each version pool its rounds' latencies.
In the JSON, "versions" lists them all (--labels names them, default before, before2, ..., after),
"before" is the first and "levels" this code's (the last).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

import superbloom as sb
from benchmarks.machine import machine_info, write_results
from superbloom.storage.checkpoint import latest_checkpoint
from superbloom.storage.files import load_json


def ensure_model(model: Path, data: Path, seconds: float) -> None:
    """Prepare the embedded links and train the default model for `seconds`, unless already there."""
    if (model / "LATEST").exists():
        return
    if not (data / "meta.json").exists():
        sb.prepare(sb.PrepareConfig(str(sb.embedded_dataset()), str(data)), progress=False)
    print(f"training {model} for {seconds:.0f} s (default configuration)", flush=True)
    sb.train(sb.TrainConfig(data=str(data), out=str(model), loop=sb.LoopConfig(time_budget=seconds)), progress=False)


def contexts(data: Path, model: Path, n: int, seed: int = 0) -> list[list[str]]:
    """n contexts of 1..8 ids, each from one held-out page (random vocabulary ids without the data)."""
    rng = np.random.default_rng(seed)
    if (data / "meta.json").exists():
        d = sb.Dataset(data)
        sets = [d.test[i] for i in range(len(d.test)) if len(d.test[i]) >= 2]
        names = d.vocab.strings
        out = []
        for _ in range(n):
            s = sets[rng.integers(len(sets))]
            out.append([names[i] for i in rng.choice(s, size=min(len(s), rng.integers(1, 9)), replace=False)])
        return out
    vocab = (model / "vocab.txt").read_text("utf-8").splitlines()
    return [[vocab[i] for i in rng.choice(len(vocab), size=rng.integers(1, 9), replace=False)] for _ in range(n)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: Path, port: int, log: Path, extra: tuple[str, ...] = (), code: Path | None = None) -> subprocess.Popen:
    """`superbloom serve MODEL` (and `extra` flags) on `port`, once /health answers; its output in `log`.
    code: a checkout whose superbloom package runs instead of this one (from there, on PYTHONPATH)."""
    cmd = [sys.executable, "-m", "superbloom", "serve", str(Path(model).resolve()), "--port", str(port),
           "--no-access-log", *extra]
    env = None
    if code is not None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(code), *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env,
                            cwd=None if code is None else str(code))
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited: {log.read_text()}")
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"server did not start: {log.read_text()}")


class Connection:
    """A minimal HTTP/1.1 keep-alive client for POSTing JSON: a tenth of httpx's CPU per request,
    which matters when the client shares the cores with the server it measures."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def post(self, path: str, body: dict) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        data = json.dumps(body).encode()
        self.writer.write(f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
        length = int({k.lower(): v for k, v in headers.items()}["content-length"])
        return int(lines[0].split()[1]), await self.reader.readexactly(length)

    def close(self):
        if self.writer is not None:
            self.writer.close()


async def run_level(url: str, ctxs: list[list[str]], concurrency: int, duration: float, k: int,
                    exact: bool = False, latencies: list[float] | None = None) -> dict:
    """Closed loop: `concurrency` connections, each sending its next request when the last one returns
    (exact: certified exact decoding requested). latencies: a list the seconds of each answer are
    appended to (to pool several runs)."""
    latencies = [] if latencies is None else latencies
    first = len(latencies)
    errors, samples = [], []
    host, port = url.split("//")[1].split(":")
    before = httpx.get(url + "/health").json()
    stop = time.perf_counter() + duration

    async def worker(w: int):
        conn, i = Connection(host, int(port)), w
        try:
            while time.perf_counter() < stop:
                body = {"context": ctxs[i % len(ctxs)], "k": k, **({"exact": True} if exact else {})}
                i += concurrency
                t0 = time.perf_counter()
                try:
                    status, data = await conn.post("/v1/predict", body)
                except (OSError, asyncio.IncompleteReadError, ValueError, KeyError) as e:
                    errors.append(repr(e))
                    conn.close()
                    conn = Connection(host, int(port))
                    continue
                latencies.append(time.perf_counter() - t0)
                preds = json.loads(data).get("predictions", []) if status == 200 else []
                if status != 200 or len(preds) != k:
                    errors.append(f"{status}: {data[:200]!r}")
                elif len(samples) < 3:
                    samples.append({"context": body["context"], "top3": [p["id"] for p in preds[:3]]})
        finally:
            conn.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    elapsed = time.perf_counter() - t0
    after = httpx.get(url + "/health").json()
    lat = np.array(latencies[first:]) * 1000
    batches = after["batches"] - before["batches"]
    return {"concurrency": concurrency, "seconds": round(elapsed, 2), "requests": len(lat),
            "requests_per_s": round(len(lat) / elapsed, 1),
            "p50_ms": round(float(np.percentile(lat, 50)), 2), "p99_ms": round(float(np.percentile(lat, 99)), 2),
            "mean_ms": round(float(lat.mean()), 2), "max_ms": round(float(lat.max()), 2),
            "errors": len(errors), "error_examples": errors[:5],
            "mean_batch": round((after["queries"] - before["queries"]) / max(1, batches), 2), "samples": samples}


def revision(code: Path) -> str:
    """The short commit of the checkout at `code` ("+changes" when its package differs from it)."""
    def git(*a):
        return subprocess.run(["git", "-C", str(code), *a], capture_output=True, text=True).stdout.strip()
    rev = git("rev-parse", "--short", "HEAD") or "?"
    return rev + ("+changes" if git("status", "--porcelain", "--", "superbloom") else "")


def serve_levels(model: Path, ctxs: list[list[str]], levels: list[int], args, code: Path | None,
                 pooled: dict[int, list[float]], label: str = "") -> tuple[list[dict], dict]:
    """One server (this code, or the checkout `code`): a warm-up, then each level in turn, with the
    1-minute load average at its start and end; each level's latencies appended to pooled[c].
    -> (the levels, the server's /v1/model)."""
    port = free_port()
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"superbloom-load-{port}.log"
    proc = start_server(model, port, log, code=code)
    url = f"http://127.0.0.1:{port}"
    out = []
    try:
        asyncio.run(run_level(url, ctxs, 4, args.warmup, args.k))  # warm-up, not recorded
        for c in levels:
            start = os.getloadavg()[0]
            r = asyncio.run(run_level(url, ctxs, c, args.duration, args.k, latencies=pooled.setdefault(c, [])))
            r["load_average_1min"] = [round(start, 2), round(os.getloadavg()[0], 2)]
            print(f"{label + ' ' if label else ''}concurrency {c:>3}: "
                  f"{r['requests_per_s']:8.1f} req/s  p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms  "
                  f"errors {r['errors']}  mean batch {r['mean_batch']}  load {r['load_average_1min']}", flush=True)
            out.append(r)
        info = httpx.get(url + "/v1/model").json()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return out, info


def pool(rounds: list[list[dict]], pooled: dict[int, list[float]]) -> list[dict]:
    """Per level over several rounds of one server: requests/s and mean batch summed over the rounds'
    time and requests, the percentiles of all their latencies, errors summed, each round's p99 and load."""
    out = []
    for i, c in enumerate(sorted(pooled, key=[r["concurrency"] for r in rounds[0]].index)):
        rs = [rnd[i] for rnd in rounds]
        lat = np.array(pooled[c]) * 1000
        seconds = sum(r["seconds"] for r in rs)
        batches = sum(r["requests"] / max(r["mean_batch"], 1e-9) for r in rs)
        out.append({"concurrency": c, "seconds": round(seconds, 2), "requests": len(lat),
                    "requests_per_s": round(len(lat) / seconds, 1),
                    "p50_ms": round(float(np.percentile(lat, 50)), 2), "p99_ms": round(float(np.percentile(lat, 99)), 2),
                    "mean_ms": round(float(lat.mean()), 2), "max_ms": round(float(lat.max()), 2),
                    "errors": sum(r["errors"] for r in rs),
                    "error_examples": [e for r in rs for e in r["error_examples"]][:5],
                    "mean_batch": round(len(lat) / max(batches, 1e-9), 2), "samples": rs[0]["samples"],
                    "rounds_p99_ms": [r["p99_ms"] for r in rs],
                    "rounds_load_average_1min": [r["load_average_1min"] for r in rs]})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="runs/load/model", help="model directory (trained if missing)")
    ap.add_argument("--data", default="runs/load/data", help="prepared Wikispeedia data (made if missing)")
    ap.add_argument("--train-seconds", type=float, default=300.0)
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds per concurrency level")
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--before", action="append", default=[], help="a checkout of other code to compare against "
                    "(its server runs from there; repeat for several, oldest first); the rounds alternate")
    ap.add_argument("--labels", default=None, help="names of the versions, comma-separated, the --before ones "
                    "then this code (default before, before2, ..., after)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds per server (default 1, 2 with --before)")
    ap.add_argument("--results", default="benchmarks/results")
    args = ap.parse_args(argv)

    model, data = Path(args.model), Path(args.data)
    befores = [Path(b).resolve() for b in args.before]
    for b, given in zip(befores, args.before):
        if not (b / "superbloom" / "__init__.py").exists():
            ap.error(f"--before {given}: not a checkout of superbloom (no superbloom/__init__.py there)")
    codes = [*befores, None]
    labels = (args.labels.split(",") if args.labels else
              ["before" + (str(i + 1) if i else "") for i in range(len(befores))] + (["after"] if befores else [""]))
    if len(labels) != len(codes) or len(set(labels)) != len(labels):
        ap.error(f"--labels {args.labels}: {len(codes)} distinct names needed (the --before checkouts, then this code)")
    rounds = args.rounds or (2 if befores else 1)
    ensure_model(model, data, args.train_seconds)
    ctxs = contexts(data, model, 2000)
    levels = [int(x) for x in args.concurrency.split(",")]
    load_before = os.getloadavg()
    runs = [[] for _ in codes]
    pooled = [{} for _ in codes]
    order = []
    for rnd in range(rounds):  # before, after, before, after: drift in the machine's load falls on every version
        for v, (code, label) in enumerate(zip(codes, labels)):
            got, info = serve_levels(model, ctxs, levels, args, code, pooled[v], label)
            runs[v].append(got)
            order.append({"round": rnd + 1, "version": label, "levels": got})

    state = load_json(latest_checkpoint(model) / "state.json")
    here = Path(__file__).resolve().parent.parent
    versions = [{"label": label, "code": revision(code or here), "dir": str(code or here), "levels": pool(rs, pl)}
                for code, label, rs, pl in zip(codes, labels, runs, pooled)]
    after = versions[-1]["levels"]
    result = {
        "benchmark": "HTTP load: POST /v1/predict, closed loop",
        "machine": dict(machine_info(), load_average_before=[round(x, 2) for x in load_before]),
        "model": {"dir": str(model), "parameters": info["parameters"], "n_ids": info["n_ids"],
                  "hash": info["hash"], "layers": info["model"]["layers"], "d": info["model"]["d"],
                  "trained_steps": state["step"], "trained_seconds": round(state["seconds"], 1)},
        "settings": {"duration_s": args.duration, "warmup_s": args.warmup, "k": args.k, "decode": "approximate, B = k",
                     "rounds": rounds,
                     "context_ids": "1-8 ids from one held-out page", "client": "asyncio HTTP/1.1 keep-alive, one connection per concurrent request, same machine",
                     "server": "superbloom serve --no-access-log (uvicorn, 1 process, 1 torch thread: the default)"},
        "code": versions[-1]["code"],
        "levels": after,
    }
    if befores:
        result.update(before=versions[0], versions=versions, rounds=order)
    m = result["machine"]
    md = ["# HTTP load benchmark (POST /v1/predict)", "",
          f"Model: data {Path(args.data).name}, head {info.get('head', {}).get('name', '?')}, {info['n_ids']:,} ids, {info['parameters']:,} parameters "
          f"({info['model']['layers']} layers, d={info['model']['d']}, alpha={info['hash']['alpha']}, "
          f"m={info['hash']['m']}; trained {state['step']} steps). k = {args.k}, approximate decoding; "
          f"closed loop, {args.duration:.0f} s per level{f', {rounds} rounds' if rounds > 1 else ''}; one server process "
          f"(1 torch thread, the default) and the client on the same {m['cores']} cores "
          f"(load average before the run: {', '.join(map(str, m['load_average_before']))}).", ""]
    if befores:
        md += ["Versions: " + "; ".join(f"{v['label']} = the server of `{v['code']}`" for v in versions) +
               f". The runs alternate ({', '.join(o['version'] for o in order)}), {args.duration:.0f} s per level "
               "each; a version's percentiles pool its rounds. p99 per round and load (the 1-minute load average "
               "at the start of the level) list its rounds in order.", "",
               "| concurrency | version | requests/s | p50 ms | p99 ms | p99 ms per round | max ms | errors | mean batch | load per round |",
               "|---:|---|---:|---:|---:|---|---:|---:|---:|---|"]
        for i, c in enumerate(levels):
            for v in versions:
                r = v["levels"][i]
                md.append(f"| {c} | {v['label']} (`{v['code']}`) | {r['requests_per_s']} | {r['p50_ms']} | {r['p99_ms']} | "
                          f"{' / '.join(f'{x:.0f}' for x in r['rounds_p99_ms'])} | {r['max_ms']} | {r['errors']} | "
                          f"{r['mean_batch']} | {' / '.join(f'{x[0]:.1f}' for x in r['rounds_load_average_1min'])} |")
    else:
        md += ["| concurrency | requests/s | p50 ms | p99 ms | max ms | errors | mean batch |",
               "|---:|---:|---:|---:|---:|---:|---:|"]
        md += [f"| {r['concurrency']} | {r['requests_per_s']} | {r['p50_ms']} | {r['p99_ms']} | {r['max_ms']} | "
               f"{r['errors']} | {r['mean_batch']} |" for r in after]
    cmd = "flock /tmp/superbloom-cpu.lock .venv/bin/python -m benchmarks.load"
    if args.model != ap.get_default("model"):  # a model trained elsewhere (e.g. the demo's)
        cmd += f" --model {args.model} --data {args.data}"
    if args.train_seconds != ap.get_default("train_seconds"):
        cmd += f" --train-seconds {args.train_seconds:g}"
    cmd += "".join(f" --before {b}" for b in args.before)
    cmd += (f" --labels {args.labels}" if args.labels else "") + (f" --rounds {rounds}" if args.rounds else "")
    cmd += f" --duration {args.duration:g}" if args.duration != ap.get_default("duration") else ""
    md += ["", f"Regenerate: `{cmd}`", ""]
    write_results(Path(args.results), "load", result, md)
    print(f"results in {args.results}/load.json and load.md")
    return 1 if any(r["errors"] for rs in runs for rnd in rs for r in rnd) else 0


if __name__ == "__main__":
    sys.exit(main())
