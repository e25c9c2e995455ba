"""GPU benchmark: the demo's recipe and the hashed superbloom model trained on one CUDA GPU for a fixed
time each, then evaluated on the held-out pages, with exact decoding throughput.

    python -m benchmarks.gpu --seconds 60 --out benchmarks/results      # needs torch.cuda

Per model: optimizer steps in the budget (steps/s), examples/s, peak GPU memory, rec@1/10/20 of the
held-out pages (the evaluation protocol of `superbloom eval`, 10 held-out ids per page, beside the
co-occurrence and EASE baselines on the same examples) and exact top-10 queries/s on the GPU. Uses the
public API only (superbloom.prepare / train / load / evaluate). Results: gpu.{json,md}, with the
machine and the GPU named.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

import superbloom as sb
from benchmarks.machine import machine_info, write_results

RECIPES = {  # name -> TrainConfig settings
    "hybrid (demo recipe, unhashed)": dict(head=sb.head_config("hybrid"), hash=sb.HashConfig(alpha=1, m=1)),
    "superbloom (alpha 4, m 2)": dict(hash=sb.HashConfig(alpha=4, m=2)),
    "hashed hybrid (alpha 4, m 2, co-occurrence term, weighting chosen)": dict(
        head=sb.head_config("hashed-hybrid", term="cooccurrence"), hash=sb.HashConfig(alpha=4, m=2)),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="training seconds per model")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    ap.add_argument("--name", default="gpu")
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("benchmarks.gpu needs a CUDA GPU (torch.cuda.is_available() is False)")
    work = Path(tempfile.mkdtemp(prefix="sb-gpu-"))
    sb.prepare(sb.PrepareConfig(str(sb.embedded_dataset()), str(work / "data"), read=sb.ReadConfig(format="edges")),
               progress=False)
    data = sb.Dataset(work / "data")
    rows = []
    for name, settings in RECIPES.items():
        out = work / name.split()[0]
        torch.cuda.reset_peak_memory_stats()
        t0 = time.time()
        sb.train(sb.TrainConfig(data=str(work / "data"), out=str(out),
                                loop=sb.LoopConfig(time_budget=a.seconds, steps=0, device="cuda",
                                                   batch_size=a.batch_size, eval_every=500), **settings),
                 progress=False, overwrite=True)
        wall = time.time() - t0
        log = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
        steps = max(r.get("step", 0) for r in log)
        peak = torch.cuda.max_memory_allocated() / 2**20
        model = sb.load(out, device="cuda")
        res = sb.evaluate(model, data, sb.EvalConfig(targets_per_set=10, baselines=("cooccurrence", "ease"),
                                                     decode=sb.DecodeConfig(exact=True)), progress=False)
        res = res if isinstance(res, dict) else res.to_dict()
        rows.append({"model": name, "train_seconds": round(wall, 1), "steps": steps,
                     "steps_per_second": round(steps / a.seconds, 1),
                     "examples_per_second": round(steps * a.batch_size / a.seconds),
                     "peak_gpu_mib": round(peak), "rec@1": res["rec@1"], "rec@10": res["rec@10"],
                     "rec@20": res["rec@20"], "queries_per_second": res.get("queries_per_second"),
                     "certified_exact": res.get("certified_exact"),
                     "network_only_rec@10": res.get("network_only", {}).get("rec@10"),
                     "term_only_rec@10": res.get("term_only", {}).get("rec@10"), "head": res.get("head"),
                     "cooccurrence_rec@10": res["baselines"]["cooccurrence"]["rec@10"],
                     "ease_rec@10": res["baselines"]["ease"]["rec@10"]})
        print(json.dumps(rows[-1]))
    result = {"machine": machine_info() | {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__},
              "seconds_per_model": a.seconds, "batch_size": a.batch_size, "rows": rows}
    md = [f"# GPU training and decoding ({result['machine']['gpu']}, {a.seconds:.0f} s per model, batch {a.batch_size})",
          "", "| model | steps | steps/s | peak GPU MiB | rec@1 | rec@10 | rec@20 | network alone rec@10 | "
          "term alone rec@10 | co-occurrence rec@10 | EASE rec@10 | exact top-10 q/s |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        na = "" if r["network_only_rec@10"] is None else f"{r['network_only_rec@10']:.4f}"
        ta = "" if r["term_only_rec@10"] is None else f"{r['term_only_rec@10']:.4f}"
        md.append(f"| {r['model']} | {r['steps']:,} | {r['steps_per_second']} | {r['peak_gpu_mib']:,} | {r['rec@1']:.4f} "
                  f"| {r['rec@10']:.4f} | {r['rec@20']:.4f} | {na} | {ta} | {r['cooccurrence_rec@10']:.4f} | "
                  f"{r['ease_rec@10']:.4f} | {r['queries_per_second']} |")
    md += ["", "Held-out Wikispeedia pages, 10 held-out ids per page, context excluded; one run each (no repeat)."]
    write_results(Path(a.out), a.name, result, md)
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
