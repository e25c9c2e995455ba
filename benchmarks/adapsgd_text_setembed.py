"""AdapSGD vs AdamW at their defaults (no tuning) on a text classifier and on a set-embedding
objective, and dynamic vs table word embeddings (issue 15). The id-model comparison is
benchmarks/adapsgd_bench.py (results/adapsgd.md); it is not repeated here.

    /work/tools/benchlock .venv/bin/python -m benchmarks.adapsgd_text_setembed
    .venv/bin/python -m benchmarks.adapsgd_text_setembed --report

(a) text classifier (superbloom/textclass.py, the heads study's setting: benchmarks/heads_study.py):
    Wikispeedia article words -> top-level category, d = 100, one kernelized attention layer
    ("kernel-auto") with 10 heads (the blog's final choice), label smoothing 0.1, 1,024 training
    articles, first 128 words, 5 epochs of batches of 32 (160 steps, equal for every run), test
    accuracy on the test split. Embeddings: dynamic (64 x 100 weights) and a table over the
    training articles' words (+ one row for unknown words), each with both optimizers.
(b) set embedding (superbloom/setembed, `embed_train` on train.fit): the softmax objective on the
    Wikispeedia link sets (benchmarks/setembed/data.py), d = 64, 1 layer, 300 steps of batch 64,
    the same held-out pages as benchmarks/results/setembed/embed.md; accuracy of its classifier
    head on them.

Defaults, untouched: AdamW = OptimConfig(name="adamw") for the text classifier (lr 3e-3, 300
warm-up steps then inverse square root, clipping 1, no weight decay) and the set embedding's own
default (EmbedTrainConfig: lr 1e-3, 100 warm-up steps, weight decay 0.01); AdapSGD =
OptimConfig(name="adapsgd") (no learning rate, Hessian every 5 steps, clipping 1, weight decay 0).
Time per step is measured in the same process, 1 torch thread, and the load is recorded. The set
embedding is scored with its final weights (no weight averaging: LoopConfig.ema = 0 for both).
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.heads_study import documents, run, splits
from benchmarks.machine import load_average, machine_info, read_results, write_results

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
NAME = "adapsgd_text_setembed"
SETEMBED_STEPS = 300


def text_runs() -> list[dict]:
    docs = documents()
    train, test = splits(docs)
    out = []
    for embedding in ("dynamic", "table"):
        for optim in ("adapsgd", "adamw"):
            out.append(run(docs, train, test, "kernel-auto", 10, embedding=embedding, optim=optim))
    return out


def setembed_runs(steps: int = SETEMBED_STEPS) -> list[dict]:
    from benchmarks.setembed.common import WORK, classification_report, load_pages
    from superbloom.hashing.bloom import HashConfig
    from superbloom.model.encoder import ModelConfig
    from superbloom.training.optim import OptimConfig
    from superbloom.setembed import EmbedConfig, EmbedTrainConfig, embed_train, load_embedder
    from superbloom.training.train import LoopConfig

    if not (WORK / "data_links" / "meta.json").exists():
        from benchmarks.setembed.data import build

        build()
    p = load_pages("links")
    out = []
    for optim in ("adapsgd", "adamw"):
        base = EmbedTrainConfig(data="", out="")
        opt = OptimConfig(name="adapsgd") if optim == "adapsgd" else base.optim  # each at its default
        name = f"setembed-links-softmax-{optim}"
        cfg = EmbedTrainConfig(
            data=str(WORK / "data_links"), out=str(REPO / "runs" / NAME / name), labels=str(WORK / "labels.tsv"),
            embed=EmbedConfig(objective="softmax", segment=32, pool_heads=4),
            hash=HashConfig(alpha=4, m=2, seed=0), model=ModelConfig(d=64, heads=4, d_ff=128, layers=1, dropout=0.1),
            optim=opt, loop=LoopConfig(steps=steps, batch_size=64, eval_every=0, checkpoint_every=600, seed=0,
                                       ema=0.0),
            val_fraction=0.1)
        load0, t0 = [round(x, 2) for x in os.getloadavg()], time.time()
        model_dir = embed_train(cfg, progress=False, overwrite=True)
        wall = time.time() - t0
        latest = json.loads((model_dir / (model_dir / "LATEST").read_text().strip() / "state.json").read_text())
        emb = load_embedder(model_dir, device="cpu")
        shares, _ = emb.shares(emb.embed_sets(p.test), "head")
        head = classification_report(shares.argmax(1), shares.max(1), p.y_test)
        metrics = [json.loads(x) for x in (model_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
        losses = [m["loss"] for m in metrics if "loss" in m]
        out.append({"name": name, "optimizer": optim, "optim_config": vars(opt), "steps": steps,
                    "train_seconds": round(latest["seconds"], 1), "seconds_per_step": latest["seconds"] / steps,
                    "wall_seconds": round(wall, 1), "head_accuracy": head["accuracy"], "head_macro_f1": head["macro_f1"],
                    "last_logged_loss_ema": losses[-1] if losses else None, "test_pages": len(p.y_test),
                    "load_average_start": load0, "load_average_end": [round(x, 2) for x in os.getloadavg()]})
        print(f"{name}: head accuracy {100 * head['accuracy']:.1f}, {out[-1]['seconds_per_step']:.3f} s/step", flush=True)
    return out


def report(data: dict) -> list[str]:
    """The markdown of a result (its JSON as written): the two tables and what they show."""
    text, sets = data.get("text", []), data.get("setembed", [])
    lines = ["# AdapSGD vs AdamW at their defaults; dynamic vs table word embeddings (issue 15)", "",
             "`benchmarks/adapsgd_text_setembed.py` (settings in its docstring). Nothing was tuned: each optimizer "
             "runs at the project's defaults, at equal steps, in one process with 1 torch thread. The id model "
             "(Wikispeedia, masked training) comparison is [adapsgd.md](adapsgd.md).", ""]
    if text:
        r0 = text[0]
        lines += ["## Text classifier: Wikispeedia words -> top-level category", "",
                  f"d = 100, one kernelized attention layer, 10 heads, {r0['train_articles']:,} training articles, "
                  f"{r0['steps']} steps (5 epochs of 32), test accuracy on {r0['test_articles']} test articles.", "",
                  "| embedding | optimizer | parameters (embedding) | train loss ep 1 / ep 5 | train errors ep 5 | "
                  "test acc ep 1 | test acc ep 5 | s/step |", "|---|---|---|---|---|---|---|---|"]
        for r in text:
            h1, h5 = r["history"][0], r["history"][-1]
            lines.append(f"| {r['embedding']} | {r['optimizer']} | {r['parameters']:,} ({r['embedding_parameters']:,}) | "
                         f"{h1['loss']:.3f} / {h5['loss']:.3f} | {h5['errors']} of {h5['examples']} | "
                         f"{100 * h1['eval']['accuracy']:.1f} | {100 * h5['eval']['accuracy']:.1f} | "
                         f"{r['seconds_per_step']:.3f} |")
        lines.append("")
    if sets:
        lines += ["## Set embedding: softmax objective on the Wikispeedia link sets", "",
                  f"`embed_train`, d = 64, 1 layer, {sets[0]['steps']} steps of batch 64; accuracy of the classifier "
                  f"head on the {sets[0]['test_pages']} held-out pages of setembed/embed.md.", "",
                  "| optimizer | settings | head accuracy | head macro-F1 | s/step |", "|---|---|---|---|---|"]
        for r in sets:
            o = r["optim_config"]
            how = "no learning rate" if r["optimizer"] == "adapsgd" else f"lr {o['lr']}, warm-up {o['warmup']}"
            lines.append(f"| {r['optimizer']} | {how}, weight decay {o['weight_decay']}, clip {o['clip']} | "
                         f"{100 * r['head_accuracy']:.1f} | {100 * r['head_macro_f1']:.1f} | "
                         f"{r['seconds_per_step']:.3f} |")
        lines.append("")
    lines += ["## What it shows", "", data.get("conclusion", "(not written yet)"), "",
              f"Load average at the end: {data.get('load_average_end')}."]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=["all", "text", "setembed"], default="all")
    ap.add_argument("--report", action="store_true")
    a = ap.parse_args()
    data = read_results(RESULTS, NAME) or {}
    if a.report:
        write_results(RESULTS, NAME, data, report(data), indent=1, rewrite=True)
        return
    torch.set_num_threads(1)
    data["machine"] = machine_info()  # at the start: its load average is the start's

    def save():
        data["load_average_end"] = load_average()
        write_results(RESULTS, NAME, data, report(data), indent=1)

    if a.part in ("all", "text"):
        data["text"] = text_runs()
        save()  # kept even if the set-embedding part fails
    if a.part in ("all", "setembed"):
        data["setembed"] = setembed_runs()
        save()


if __name__ == "__main__":
    main()
