"""Issue 13's benchmarks: set embeddings trained with `superbloom.setembed.embed_train` (the one
training loop, train.fit) on the Wikispeedia pages, evaluated with exactly the baselines' protocol
(common.evaluate_vectors: the same 917 held-out pages, neighbours among the training pages).

    /work/tools/benchlock .venv/bin/python -m benchmarks.setembed.embed_bench --view links
    /work/tools/benchlock .venv/bin/python -m benchmarks.setembed.embed_bench --view words
    /work/tools/benchlock .venv/bin/python -m benchmarks.setembed.embed_bench --view links --sweep
    .venv/bin/python -m benchmarks.setembed.embed_bench --report        # tables + plots from the JSON

(a) unsupervised: alignment/uniformity embeddings, kNN precision@10 of category agreement;
(b) supervised: NCA (+ memory bank) with kNN votes, and softmax + label smoothing with its own head;
    accuracy, macro-F1, accuracy-vs-coverage with rejection at confidence 0.8;
(c) the "10K parameters" claim: the same supervised objective at decreasing sizes (d, alpha), the
    smallest model within 2 points of the best accuracy and its parameter count.

Each run appends its record to benchmarks/results/setembed/embed.json (keyed by run name, so runs
made under separate locks accumulate); --report writes embed.md and the plots. Settings per run:
1 torch thread (OpenMP threads stall on the shared 2-core machine), batch 64, segments of 32 ids,
AdamW 1e-3 with 100 warm-up steps, 10% of the training pages held out to pick BEST. Model
directories go to runs/setembed/models/ (not committed).
"""
from __future__ import annotations

import argparse
import json
import re
import time

import numpy as np
import torch

from benchmarks.machine import load_average, read_results, write_results
from benchmarks.setembed.common import (K, REJECT, RESULTS, WORK, classification_report, evaluate_vectors, load_pages,
                                        machine, machine_text, plot_curves, plot_projection)
from superbloom.hashing.bloom import HashConfig
from superbloom.model.encoder import ModelConfig
from superbloom.training.optim import OptimConfig
from superbloom.setembed import EmbedConfig, EmbedTrainConfig, embed_train, load_embedder
from superbloom.training.train import LoopConfig

MODELS = WORK / "models"


def run(view: str, objective: str, steps: int, d: int, alpha: int, layers: int, seed: int = 0,
        max_len: int = 256, evals: int = 2, name: str | None = None) -> dict:
    p = load_pages(view)
    name = name or f"{view}-{objective}-d{d}-a{alpha}-l{layers}-s{steps}"
    cfg = EmbedTrainConfig(
        data=str(WORK / f"data_{view}"), out=str(MODELS / name), labels=str(WORK / "labels.tsv"),
        embed=EmbedConfig(objective=objective, segment=32, pool_heads=min(4, d // 2) or 1, max_len=max_len),
        hash=HashConfig(alpha=alpha, m=2, seed=seed),
        model=ModelConfig(d=d, heads=min(4, d // 2) or 1, d_ff=2 * d, layers=layers, dropout=0.1),
        optim=OptimConfig(lr=1e-3, warmup=100, weight_decay=0.01),
        loop=LoopConfig(steps=steps, batch_size=64, eval_every=steps // evals if evals > 1 else 0, checkpoint_every=600, seed=seed),
        val_fraction=0.1)
    t0 = time.time()
    out = embed_train(cfg, progress=False, overwrite=True)
    wall = time.time() - t0
    emb = load_embedder(out, device="cpu")
    config = json.loads((out / "config.json").read_text())
    best = json.loads((out / (out / "BEST").read_text().strip() / "state.json").read_text()) if (out / "BEST").exists() else {}
    latest = json.loads((out / (out / "LATEST").read_text().strip() / "state.json").read_text())
    t1 = time.time()
    test = emb.embed_sets(p.test)  # (917, d); ids unseen in training are skipped
    embed_s = time.time() - t1
    train_v = emb.vectors.numpy()  # the index: every training page, BEST weights
    r = {"name": name, "view": view, "objective": objective, "steps": steps, "d": d, "alpha": alpha, "layers": layers,
         "seed": seed, "max_len": max_len, "validations": evals, "parameters": config["parameters"], "classifier_parameters": config["classifier_parameters"],
         "tokens": int(emb.hashing.n_tokens), "train_seconds": round(latest["seconds"], 1),
         "wall_seconds": round(wall, 1), "index_seconds": config["index"]["seconds"],
         "embed_test_seconds": round(embed_s, 1), "best_step": best.get("step"), "best_validation": best.get("best"),
         "load_average": load_average(), **evaluate_vectors(train_v, test, p)}
    if objective == "softmax":
        shares, _ = emb.shares(test, "head")
        r["head"] = classification_report(shares.argmax(1), shares.max(1), p.y_test)
    np.save(MODELS / name / "test_vectors.npy", test)
    print(f"{name}: p@{K} {100 * r[f'precision@{K}']:.1f}  knn acc {100 * r['knn']['accuracy']:.1f}"
          + (f"  head acc {100 * r['head']['accuracy']:.1f}" if "head" in r else "")
          + f"  params {r['parameters']:,}  train {r['train_seconds']} s", flush=True)
    return r


def dumps(data) -> str:
    """JSON, indented, with lists of numbers (the coverage curves) on one line each."""
    text = json.dumps(data, indent=1)
    return re.sub(r"\[\n\s*([-+0-9.eE]+(?:,\n\s*[-+0-9.eE]+)*)\n\s*\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",\n")) + "]", text) + "\n"


def save(records: list[dict], info: dict, session: bool = True) -> None:
    """Merge the records into embed.json (a run of the same name is replaced); a finished session's
    machine and load go to its "sessions" list."""
    data = read_results(RESULTS, "embed") or {"runs": {}, "sessions": []}
    for r in records:
        data["runs"][r["name"]] = dict(r, machine=info)
    if session:
        data["sessions"].append(info)
    data["machine"] = info
    write_results(RESULTS, "embed", data, None, dumps=dumps)


# ------------------------------------------------------------------------------ report


def accuracy_of(r: dict) -> float:
    """The run's classification accuracy: the head's for softmax, the kNN votes' otherwise."""
    return (r["head"] if "head" in r else r["knn"])["accuracy"]


def pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def report() -> None:
    data = read_results(RESULTS, "embed")
    runs = data["runs"]
    base = json.loads((RESULTS / "baselines.json").read_text())
    lines = ["# Set embeddings on Wikispeedia: trained models vs the baselines", "",
             "Same held-out pages (917 of 4,584) and evaluation as baselines.md (benchmarks/setembed/common.py): "
             "neighbours among the training pages, a neighbour agrees / a prediction is correct if it shares one of "
             "the page's top-level categories. Models: `superbloom.setembed.embed_train` on train.fit (set encoder "
             "+ attention pool, batch 64, segments of 32 ids, AdamW 1e-3, 100 warm-up steps, weight decay 0.01, "
             "dropout 0.1, m = 2 hash maps, 10% of the training pages held out to pick BEST, 1 torch thread). "
             "Parameters exclude the softmax classifier (d x 15 + 15) and the NCA memory bank (not used at inference). "
             "[95% bootstrap CI over held-out pages.]", ""]
    for view in ("links", "words"):
        rs = [r for r in runs.values() if r["view"] == view and not r["name"].startswith("sweep")]
        if not rs:
            continue
        b = base[view]
        settings = sorted({(r.get("max_len", 256), r.get("validations", 2)) for r in rs})
        lines += [f"## {view}", "", "Pages longer than max_len ids are embedded as the mean of chunks; BEST is the best "
                  "of the validations on held-out training pages: " +
                  "; ".join(f"max_len {m}, {v} validation(s)" for m, v in settings) + ".", "",
                  "### (a) unsupervised: kNN category agreement", "",
                  "| method | steps | parameters | precision@10 | kNN-10 accuracy | kNN macro-F1 | train s |",
                  "|---|---|---|---|---|---|---|",
                  f"| chance | | | {pct(b['chance_precision@10'])} | | | |"]
        for m, u in b["unsupervised"].items():
            ci = u[f"precision@{K}_ci"]
            lines.append(f"| {m} (baseline) | | | {pct(u[f'precision@{K}'])} [{pct(ci[0])}, {pct(ci[1])}] | "
                         f"{pct(u['knn']['accuracy'])} | {pct(u['knn']['macro_f1'])} | |")
        for r in sorted(rs, key=lambda r: r["objective"]):
            ci = r[f"precision@{K}_ci"]
            uses = " (trained with labels)" if r["objective"] in ("nca", "softmax") else " (no labels)"
            lines.append(f"| {r['objective']}{uses} d={r['d']} alpha={r['alpha']} | {r['steps']} | {r['parameters']:,} | "
                         f"{pct(r[f'precision@{K}'])} [{pct(ci[0])}, {pct(ci[1])}] | {pct(r['knn']['accuracy'])} | "
                         f"{pct(r['knn']['macro_f1'])} | {r['train_seconds']} |")
        lines += ["", "### (b) supervised: page -> category", "",
                  "| method | accuracy | macro-F1 | coverage@0.8 | accuracy@0.8 | parameters |", "|---|---|---|---|---|---|",
                  f"| majority class | {pct(b['majority']['accuracy'])} | {pct(b['majority']['macro_f1'])} | | | 0 |"]
        lr = b["logreg_tfidf"]
        lines.append(f"| logistic regression, TF-IDF (baseline) | {pct(lr['accuracy'])} [{pct(lr['accuracy_ci'][0])}, "
                     f"{pct(lr['accuracy_ci'][1])}] | {pct(lr['macro_f1'])} | {pct(lr['coverage@0.8'])} | "
                     f"{pct(lr['accuracy@0.8'])} | {lr['parameters']:,} |")
        tf = b["unsupervised"]["tfidf"]["knn"]
        lines.append(f"| TF-IDF kNN-10 votes (baseline) | {pct(tf['accuracy'])} | {pct(tf['macro_f1'])} | "
                     f"{pct(tf['coverage@0.8'])} | {pct(tf['accuracy@0.8'])} | |")
        for r in sorted(rs, key=lambda r: r["objective"]):
            for how, c in (("kNN-10 votes", r["knn"]), ("its softmax head", r.get("head"))):
                if c is None:
                    continue
                lines.append(f"| {r['objective']} d={r['d']}, {how} | {pct(c['accuracy'])} [{pct(c['accuracy_ci'][0])}, "
                             f"{pct(c['accuracy_ci'][1])}] | {pct(c['macro_f1'])} | {pct(c['coverage@0.8'])} | "
                             f"{pct(c['accuracy@0.8'])} | {r['parameters']:,} |")
        lines.append("")
        curves = {"logistic regression (TF-IDF)": lr, "TF-IDF kNN": tf}
        for r in rs:
            curves[f"{r['objective']} kNN"] = r["knn"]
            if "head" in r:
                curves[f"{r['objective']} head"] = r["head"]
        plot_curves(curves, RESULTS / f"coverage_embed_{view}.png",
                    f"Accuracy vs coverage, {view}: trained set embeddings vs baselines")
        lines += [f"Curves: coverage_embed_{view}.png.", ""]
    sweep = [r for r in runs.values() if r["name"].startswith("sweep")]
    if sweep:
        view, objective, steps = sweep[0]["view"], sweep[0]["objective"], sweep[0]["steps"]
        sweep += [r for r in runs.values() if not r["name"].startswith("sweep") and r["layers"] == sweep[0]["layers"]
                  and (r["view"], r["objective"], r["steps"]) == (view, objective, steps)]  # the main run's size
        best = max(accuracy_of(r) for r in sweep)
        ok = [r for r in sweep if accuracy_of(r) >= best - 0.02]
        small = min(ok, key=lambda r: r["parameters"])
        lines += [f"## (c) how small can it be? ({view}, {objective}, same steps)", "",
                  "| d | alpha | tokens | parameters | accuracy | macro-F1 | within 2 points of the best |",
                  "|---|---|---|---|---|---|---|"]
        for r in sorted(sweep, key=lambda r: -r["parameters"]):
            c = r["head"] if "head" in r else r["knn"]
            lines.append(f"| {r['d']} | {r['alpha']} | {r['tokens']:,} | {r['parameters']:,} | {pct(c['accuracy'])} "
                         f"[{pct(c['accuracy_ci'][0])}, {pct(c['accuracy_ci'][1])}] | {pct(c['macro_f1'])} | "
                         f"{'yes' if r in ok else 'no'} |")
        lines += ["", f"Smallest within 2 points of the best ({pct(best)}): d={small['d']}, alpha={small['alpha']}, "
                  f"{small['parameters']:,} parameters ({pct(accuracy_of(small))}).", ""]
    sessions = data["sessions"]
    lines += ["## Machine and load", ""] + [f"- {machine_text(s)} Load at end: {s.get('load_average_end')}; "
                                            f"runs: {', '.join(s.get('runs', []))}; {s.get('seconds')} s." for s in sessions]
    write_results(RESULTS, "embed", data, lines, dumps=dumps, rewrite=True)
    print("\n".join(lines))


def projection(name: str) -> None:
    """t-SNE of a run's page vectors (training index + held-out), coloured by category."""
    r = read_results(RESULTS, "embed")["runs"][name]
    p = load_pages(r["view"])
    emb = load_embedder(MODELS / name, device="cpu")
    test = np.load(MODELS / name / "test_vectors.npy")
    plot_projection(np.vstack([emb.vectors.numpy(), test]), np.vstack([p.y_train, p.y_test]), p.label_names,
                    RESULTS / f"tsne_embed_{name}.png",
                    f"t-SNE of page vectors ({r['view']}, {r['objective']}, d={r['d']}, {r['steps']} steps): "
                    f"precision@10 {pct(r[f'precision@{K}'])}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--view", choices=("links", "words"), default="links")
    ap.add_argument("--objectives", default="uniformity,nca,softmax")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--alpha", type=int, default=4)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--max-len", type=int, default=256, help="inference chunks (words: 128, see README)")
    ap.add_argument("--evals", type=int, default=2, help="validations per run (1: at the end only; BEST = last)")
    ap.add_argument("--sweep", default="", help="objective for (c): d and alpha from --sizes")
    ap.add_argument("--sizes", default="32:4,16:4,16:16,8:16,4:32", help="d:alpha pairs of the sweep")
    ap.add_argument("--report", action="store_true", help="tables and curves from embed.json (no training)")
    ap.add_argument("--tsne", default="", help="run name whose page vectors get a t-SNE plot")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.report or a.tsne:
        if a.tsne:
            projection(a.tsne)
        if a.report:
            report()
        return
    info = machine()
    t0 = time.time()
    records = []
    if a.sweep:
        for pair in a.sizes.split(","):
            d, alpha = map(int, pair.split(":"))
            records.append(run(a.view, a.sweep, a.steps, d, alpha, a.layers, max_len=a.max_len, evals=a.evals,
                               name=f"sweep-{a.view}-{a.sweep}-d{d}-a{alpha}-s{a.steps}"))
            save(records[-1:], info, session=False)  # kept if a later run is cut off
    else:
        for objective in a.objectives.split(","):
            records.append(run(a.view, objective, a.steps, a.d, a.alpha, a.layers, max_len=a.max_len, evals=a.evals))
    info["load_average_end"] = load_average()
    info["seconds"] = round(time.time() - t0, 1)
    info["runs"] = [r["name"] for r in records]
    save(records, info)


if __name__ == "__main__":
    main()
