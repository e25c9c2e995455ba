"""Behaviour snapshot: a fixed-step run of the demo's configuration (hybrid head, unhashed, one thread)
and a hashed superbloom run, reduced to digests, so that a refactor can be checked bit for bit.

    python -m benchmarks.behaviour --out /tmp/snap_before.json [--work DIR] [--steps 300]
    python -m benchmarks.behaviour --out /tmp/snap_after.json --compare /tmp/snap_before.json

What is recorded per run: sha256 of every weight tensor of the final and BEST checkpoints, the
validation curve (metrics.jsonl rows with a validation), the evaluation on the held-out pages (model,
network alone, baselines) and the top-10 predictions (ids and scores) for the demo's contexts. Only the
public API is used (superbloom.prepare / train / load / evaluate), so the script runs before and after
a restructure. Exit 1 when --compare finds a difference (each difference is printed).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file

import superbloom as sb

CONTEXTS = [["Copenhagen"], ["Miles_Davis", "Jazz"], ["Tunisia", "Tunis", "Thailand"], ["Jupiter", "Saturn"]]


def _weights(path: Path) -> dict:
    return {k: hashlib.sha256(v.contiguous().numpy().tobytes()).hexdigest()[:16]
            for k, v in sorted(load_file(str(path)).items())}


def _run(work: Path, name: str, steps: int, **cfg) -> dict:
    out = work / name
    sb.train(sb.TrainConfig(data=str(work / "data"), out=str(out),
                            loop=sb.LoopConfig(steps=steps, eval_every=100, seed=0), **cfg),
             progress=False, overwrite=True)
    curve = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    curve = [{k: v for k, v in r.items() if k not in ("seconds", "elapsed", "time", "steps_per_second", "sets_per_second")}
             for r in curve if any(k.startswith("val") or k.startswith("rec@") for k in r)]
    ckpts = sorted(p for p in out.glob("**/model.safetensors"))
    model = sb.load(out, mmap=False)
    result = sb.evaluate(model, sb.Dataset(work / "data"),
                         sb.EvalConfig(targets_per_set=10, baselines=("popularity", "cooccurrence", "ease"),
                                       max_sets=150), progress=False)
    keep = {k: v for k, v in (result if isinstance(result, dict) else result.to_dict()).items()  # (dict: before EvalResult)
            if not k.startswith("_") and k not in ("seconds", "queries_per_second")}
    preds = [[(i, round(s, 5)) for i, s in p.items] for p in model.predict_many(CONTEXTS, k=10)]
    return {"weights": {str(p.relative_to(out)): _weights(p) for p in ckpts}, "curve": curve,
            "eval": json.loads(json.dumps(keep, default=str)), "predictions": preds}


def _diff(a, b, path="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: only in {'after' if k not in a else 'before'}")
            else:
                out += _diff(a[k], b[k], f"{path}/{k}")
        return out
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--work", default=None)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--compare", default=None)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    work = Path(a.work or tempfile.mkdtemp(prefix="sb-behaviour-"))
    if not (work / "data").exists():
        sb.prepare(sb.PrepareConfig(str(sb.embedded_dataset()), str(work / "data"), read=sb.ReadConfig(format="edges")),
                   progress=False)
    snap = {"hybrid": _run(work, "hybrid", a.steps, head=sb.head_config("hybrid"), hash=sb.HashConfig(alpha=1, m=1)),
            "superbloom": _run(work, "superbloom", a.steps, hash=sb.HashConfig(alpha=4, m=2))}
    Path(a.out).write_text(json.dumps(snap, indent=1, default=str) + "\n")
    if a.compare:
        diffs = _diff(json.loads(Path(a.compare).read_text()), json.loads(Path(a.out).read_text()))
        for d in diffs:
            print(d)
        print(f"{len(diffs)} differences against {a.compare}")
        return 1 if diffs else 0
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
