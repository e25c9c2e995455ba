"""The blog's heads study ("It is Important to Use Your Heads", issue 15) on a real text task:
Wikispeedia article words -> top-level category (15 classes; superbloom/text/labelled.py).

Model (superbloom/textclass.py): dynamic word embeddings of size d = 100 (MD5 trits, 64 x 100
weights, nothing out of vocabulary), ONE attention layer with H heads, a mean pool, a linear
classifier; label smoothing 0.1, gradient clipping at 1, AdapSGD (no learning rate), no other
regularisation: the blog's recipe. H in {1, 5, 10, 20, 50}: the parameter count does not change
(heads only reshape). Both attentions: the blog's kernelized one (quadratic kernel; "kernel-auto",
the same kernel in its cheaper form per call) and softmax. Every (attention, H) starts from the
same initial weights (same seed, same shapes) and sees the same batches.

    /work/tools/benchlock .venv/bin/python -m benchmarks.heads_study --attention kernel-auto
    /work/tools/benchlock .venv/bin/python -m benchmarks.heads_study --attention softmax
    .venv/bin/python -m benchmarks.heads_study --report     # heads_study.md from the JSON

Sizes (chosen to fit a 20-minute CPU budget on the shared 2-core machine): the first 128 words of
each article (the label-naming header cut), 1,024 training articles (the blog counts errors "of
1024"; a seeded sample of the 80% training split), 5 epochs of batches of 32 (160 steps), test
accuracy on the 10% test split (about 460 articles). 1 torch thread: with the machine
oversubscribed (load 6-8), 2 OpenMP threads were 10-16x slower per step than 1 (measured).

Each invocation merges its runs into benchmarks/results/heads_study.json (keyed by run name) and
rewrites heads_study.md. The documents are cached in runs/heads_study/ (not committed).
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.datasets import DATA_ROOT
from benchmarks.machine import load_average, machine_info, machine_line, read_results, write_results
from superbloom.training.optim import OptimConfig
from superbloom.textclass.docs import LabelledDocs, load_wikispeedia, split_rows
from superbloom.textclass.config import TextClassConfig, TrainTextConfig
from superbloom.textclass.model import TextClassifier
from superbloom.textclass.train import fit_classifier

REPO = Path(__file__).resolve().parents[1]
DATA = DATA_ROOT / "wikispeedia"  # links.tsv, categories.tsv, plaintext_articles.tar.xz (benchmarks/datasets.py)
CACHE = REPO / "runs" / "heads_study"
RESULTS = REPO / "benchmarks" / "results"
NAME = "heads_study"
HEADS = (1, 5, 10, 20, 50)
MAX_WORDS, TRAIN, EPOCHS, BATCH, SEED = 128, 1024, 5, 32, 0

# The blog's table ("It is Important to Use Your Heads"): its own 8-class text task, dynamic
# embeddings d = 100, one kernelized attention layer, AdapSGD; training loss and errors of 1024
# after one epoch, errors after five epochs. No test figures were given.
BLOG = {1: (2.6498, 868, 447), 5: (2.5302, 847, 411), 10: (2.4477, 831, 371), 20: (2.3499, 804, 363),
        50: (2.2531, 784, 355)}


def documents(max_words: int = MAX_WORDS) -> LabelledDocs:
    """Wikispeedia articles (cached as .npz + .json after the first read of the tarball)."""
    npz, meta = CACHE / f"docs_{max_words}.npz", CACHE / f"docs_{max_words}.json"
    if npz.exists() and meta.exists():
        a, m = np.load(npz, allow_pickle=False), json.loads(meta.read_text())
        return LabelledDocs(m["names"], np.array(m["words"], object), a["offsets"], a["ids"], a["labels"],
                            m["label_names"], m["stats"])
    docs = load_wikispeedia(DATA, max_words)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.savez(npz, offsets=docs.offsets, ids=docs.ids, labels=docs.labels)
    meta.write_text(json.dumps({"names": docs.names, "words": list(docs.words), "label_names": docs.label_names,
                                "stats": docs.stats}))
    return docs


def splits(docs: LabelledDocs, n_train: int = TRAIN, seed: int = SEED):
    """(train rows: a seeded sample of n_train from the 80% split, test rows: the 10% test split)."""
    train, _, test = split_rows(len(docs), (0.8, 0.1, 0.1), seed)
    sample = np.sort(np.random.default_rng([seed, 16]).permutation(train)[:n_train]) if n_train else train
    return sample, test


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run(docs: LabelledDocs, train: np.ndarray, test: np.ndarray, attention: str, heads: int,
        embedding: str = "dynamic", optim: str = "adapsgd", epochs: int = EPOCHS, seed: int = SEED,
        name: str | None = None) -> dict:
    """Train one classifier; -> its record (per-epoch training loss/errors and test accuracy)."""
    torch.manual_seed(seed)
    cfg = TextClassConfig(d=100, heads=heads, attention=attention, embedding=embedding, smoothing=0.1)
    vocab = np.unique(docs.ids[np.concatenate([np.arange(docs.offsets[r], docs.offsets[r + 1]) for r in train])])
    model = TextClassifier(cfg, len(docs.label_names), vocab=list(docs.words[vocab]))  # table: training words
    name = name or f"{attention}-h{heads}-{embedding}-{optim}" + (f"-s{seed}" if seed != SEED else "")
    load0, t0 = load_average(), time.time()
    hist = fit_classifier(model, docs, train, TrainTextConfig(epochs=epochs, batch_size=BATCH, seed=seed,
                                                                 optim=OptimConfig(name=optim)),
                            eval_rows=test,
                            on_epoch=lambda r: print(f"  {name} epoch {r['epoch']}: loss {r['loss']:.4f} "
                                                     f"errors {r['errors']}/{r['examples']} test acc "
                                                     f"{100 * r['eval']['accuracy']:.1f} ({r['seconds']} s)",
                                                     flush=True))
    wall = time.time() - t0
    steps = sum(h["steps"] for h in hist)
    return {"name": name, "seed": seed, "attention": attention, "heads": heads, "head_dims": 100 // heads, "embedding": embedding,
            "optimizer": optim, "optim_config": vars(OptimConfig(name=optim)), "parameters": model.n_parameters,
            "embedding_parameters": sum(p.numel() for p in model.embed.parameters()), "epochs": epochs,
            "train_articles": len(train), "test_articles": len(test), "history": hist,
            "test_accuracy": hist[-1]["eval"]["accuracy"], "steps": steps, "wall_seconds": round(wall, 1),
            "seconds_per_step": round(sum(h["seconds"] for h in hist) / steps, 4),
            "load_average_start": load0, "load_average_end": load_average()}


def merge(records: list[dict], info: dict, data_stats: dict) -> dict:
    """The result so far (runs of earlier sessions kept, one record per run name) with these runs."""
    data = read_results(RESULTS, NAME) or {"runs": {}, "sessions": []}
    for r in records:
        data["runs"][r["name"]] = dict(r, machine=info["machine"]["date"])
    data["sessions"].append(info)
    data["data"] = data_stats
    data["machine"] = info["machine"]  # the latest session's
    return data


def pct(x: float) -> str:
    return f"{100 * x:.1f}"


def report(data: dict) -> list[str]:
    """The markdown of a result (its JSON as written): the tables, the runs, every session's machine."""
    runs, st = data["runs"], data["data"]
    sessions = data["sessions"]
    lines = [
        "# Heads study: one attention layer, H heads at a fixed parameter count (issue 15)", "",
        "The blog's experiment (\"It is Important to Use Your Heads\", raberrytv.wordpress.com; the seed "
        "004_da6c5eb583804804.txt) on **a different task**: Wikispeedia article words -> top-level category "
        f"({len(st['class_counts'])} classes, the blog had 8 classes of its own text; its numbers are copied below "
        "for the shape of the trend, not as a like-for-like comparison). `benchmarks/heads_study.py`, model "
        "`superbloom/textclass.py`: dynamic word embeddings (MD5 trits -> 64 x 100), one attention layer, mean "
        "pool, linear classifier, label smoothing 0.1, gradient clipping at 1, AdapSGD at its defaults (no "
        "learning rate; weight decay 0), no other regularisation; d = 100, every H starts from the same weights "
        "and sees the same batches.", "",
        f"Data: {st['kept']:,} articles with a category ({st['multi_label']} list several top-level categories: "
        f"the first listed is the label; {st['dropped_no_label']} without a category dropped), the "
        f"\"Related subjects\" header that names the category cut from all {st['headers_cut']:,}; the first "
        f"{st['max_words']} words of each article. Seeded split 80/10/10 by article; "
        f"{next(iter(runs.values()))['train_articles']:,} training articles (a seeded sample of the 80%: the "
        f"blog counts errors of 1,024), test accuracy on the {next(iter(runs.values()))['test_articles']} test "
        f"articles; batches of {BATCH}, {EPOCHS} epochs. Majority class (Science) on the test split: "
        f"{pct(data.get('majority_test', 0))}%.", "",
        "Training loss and errors are those *during* the epoch (running, as the blog's), errors of the training "
        "articles; loss includes the smoothing term.", ""]
    for att in ("kernel-auto", "softmax"):
        rs = {r["heads"]: r for r in runs.values() if r["attention"] == att and r["embedding"] == "dynamic"
              and r["optimizer"] == "adapsgd" and r.get("seed", SEED) == SEED}
        if not rs:
            continue
        title = "kernelized (quadratic kernel, as the blog)" if att != "softmax" else "softmax"
        lines += [f"## {title} attention", "",
                  "| heads | dims/head | params | loss ep 1 | errors ep 1 | errors ep 5 | test acc ep 1 | "
                  "test acc ep 5 | s/step | blog loss ep 1 | blog errors ep 1 (of 1024) | blog errors ep 5 |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for h in sorted(rs):
            r = rs[h]
            e1, e5 = r["history"][0], r["history"][-1]
            b = BLOG.get(h, ("", "", ""))
            lines.append(f"| {h} | {r['head_dims']} | {r['parameters']:,} | {e1['loss']:.4f} | {e1['errors']} of "
                         f"{e1['examples']} | {e5['errors']} of {e5['examples']} | {pct(e1['eval']['accuracy'])} | "
                         f"{pct(e5['eval']['accuracy'])} | {r['seconds_per_step']:.3f} | {b[0]} | {b[1]} | {b[2]} |")
        lines.append("")
    other = sorted({r.get("seed", SEED) for r in runs.values()} - {SEED})
    if other:
        lines += ["## Another seed (initial weights and batch order; same split)", "",
                  "| attention | heads | " + " | ".join(f"errors ep 5, seed {s}" for s in [SEED] + other) + " | "
                  + " | ".join(f"test acc ep 5, seed {s}" for s in [SEED] + other) + " |",
                  "|---|---|" + "---|" * (2 * (1 + len(other)))]
        for att in ("kernel-auto", "softmax"):
            for h in HEADS:
                rs = [next((r for r in runs.values() if r["attention"] == att and r["heads"] == h and
                            r["embedding"] == "dynamic" and r["optimizer"] == "adapsgd" and r.get("seed", SEED) == s),
                           None) for s in [SEED] + other]
                if rs[0] is None:
                    continue
                lines.append(f"| {att} | {h} | " + " | ".join(str(r["history"][-1]["errors"]) if r else "-" for r in rs)
                             + " | " + " | ".join(pct(r["test_accuracy"]) if r else "-" for r in rs) + " |")
        lines.append("")
    lines += ["## Runs", "", "| run | wall s | load at start | load at end |", "|---|---|---|---|"]
    lines += [f"| {r['name']} | {r['wall_seconds']} | {r['load_average_start']} | {r['load_average_end']} |"
              for r in runs.values() if r["optimizer"] == "adapsgd" and r["embedding"] == "dynamic"]
    lines += ["", "Other runs of this model (optimizers, table embeddings): [adapsgd_text_setembed.md](adapsgd_text_setembed.md)."]
    lines += ["", "## What it shows", "", data.get("conclusion", "(not written yet)"), ""]
    lines += [f"Session {i + 1}: " + machine_line(s["machine"]) + (f" Uptime: {s['uptime']}" if "uptime" in s else "")
              for i, s in enumerate(sessions)]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--attention", default="kernel-auto", help="kernel-auto | kernel | softmax")
    ap.add_argument("--heads", default=",".join(map(str, HEADS)))
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    ap.add_argument("--seed", type=int, default=SEED, help="initial weights and batch order (the split stays seed 0)")
    ap.add_argument("--report", action="store_true", help="only rewrite heads_study.md from the JSON")
    a = ap.parse_args()
    if a.report:
        data = read_results(RESULTS, NAME)
        write_results(RESULTS, NAME, data, report(data), indent=1, rewrite=True)
        return
    torch.set_num_threads(1)
    info = {"machine": machine_info()}
    docs = documents()
    train, test = splits(docs)
    print(f"{len(docs)} articles, {len(train)} training, {len(test)} test; load average "
          f"{info['machine']['load_average']}", flush=True)
    t0 = time.time()
    records = [run(docs, train, test, a.attention, int(h), epochs=a.epochs, seed=a.seed) for h in a.heads.split(",")]
    info["wall_seconds"] = round(time.time() - t0, 1)
    info["load_average_end"] = load_average()
    data = merge(records, info, docs.stats)
    majority = np.bincount(docs.labels[train]).argmax()
    data["majority_test"] = float((docs.labels[test] == majority).mean())
    write_results(RESULTS, NAME, data, report(data), indent=1)


if __name__ == "__main__":
    main()
