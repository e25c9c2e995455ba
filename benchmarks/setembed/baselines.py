"""Baselines for Wikispeedia page embeddings and page classification (issue 13), on the held-out
pages of benchmarks/setembed/data.py, for the link sets and the word sets:

  (a) unsupervised: kNN category agreement (precision@10 among the training pages) with
      - svd-mean   the mean of the page's ids' co-occurrence SVD vectors (superbloom.hashing.coherent,
                   rank 32 and 128, fitted on the training pages)
      - tfidf      TF-IDF cosine (binary term frequency: a page is a *set*; IDF from training pages)
      - chance     the expected agreement of random neighbours
      and kNN classification from those neighbours (similarity-weighted votes).
  (b) supervised: multinomial logistic regression on the TF-IDF features (C chosen on a seeded 15%
      validation slice of the training pages, then refitted on all of them; a page with k labels
      is k rows of weight 1/k), plus the majority class: accuracy, macro-F1, the accuracy-vs-
      coverage curve with rejection below confidence 0.8 (the blog's threshold).

    /work/tools/benchlock .venv/bin/python -m benchmarks.setembed.baselines

Writes benchmarks/results/setembed/baselines.{json,md}, coverage_baselines.png and
tsne_svd_mean_links.png (`--plot-only` redraws that figure alone). About 12 minutes on 2 loaded
cores, mostly the logistic regressions on the 191K word features. scikit-learn is used here only (the bench extra), never by the library.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from benchmarks.machine import load_average, read_results, write_results
from benchmarks.setembed.common import (K, REJECT, RESULTS, THREADS, Pages, chance_agreement, classification_report,
                    evaluate_vectors, incidences, load_pages, machine, machine_text, plot_curves,
                    plot_projection)
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.linear_model import LogisticRegression

from superbloom.hashing.coherent import cooccurrence_embeddings

RANKS = (32, 128)
CS = (1.0, 10.0, 100.0)
SEED = 0


def svd_mean(p: Pages, rank: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Page vectors = mean of the page's id vectors (unit rows of the co-occurrence SVD)."""
    emb = cooccurrence_embeddings(p.train, p.data.n_ids, rank=rank, seed=SEED)  # (N, r)
    xtr, xte = incidences(p)
    vtr, vte = xtr @ emb, xte @ emb  # sums; cosine ignores the 1/|set| of the mean
    empty = int((np.abs(vte).sum(1) == 0).sum())  # held-out pages with no id seen in training
    return vtr, vte, empty


def expand_multilabel(x, y: np.ndarray):
    """A page with k labels -> k rows of weight 1/k (a uniform target over its labels)."""
    rows, labels = np.nonzero(y)
    weight = 1.0 / y.sum(1)[rows]
    return x[rows], labels, weight


def logistic(xtr, ytr: np.ndarray, xte, rng: np.random.Generator) -> dict:
    """C by validation accuracy on a held-out slice of the training pages, then refit on all."""
    n = xtr.shape[0]
    val = np.zeros(n, bool)
    val[rng.permutation(n)[: int(0.15 * n)]] = True
    scores = {}
    for c in CS:
        x, lab, w = expand_multilabel(xtr[~val], ytr[~val])
        model = LogisticRegression(C=c, max_iter=2000).fit(x, lab, sample_weight=w)
        pred = model.classes_[model.predict_proba(xtr[val]).argmax(1)]
        scores[c] = float(ytr[val][np.arange(val.sum()), pred].mean())
    best = max(CS, key=lambda c: (scores[c], -c))
    x, lab, w = expand_multilabel(xtr, ytr)
    t0 = time.time()
    model = LogisticRegression(C=best, max_iter=2000).fit(x, lab, sample_weight=w)
    fit_s = time.time() - t0
    proba = model.predict_proba(xte)
    pred = model.classes_[proba.argmax(1)]
    return {"C": best, "validation_accuracy_by_C": {str(c): round(v, 4) for c, v in scores.items()},
            "fit_seconds": round(fit_s, 2), "parameters": int(model.coef_.size + model.intercept_.size),
            "pred": pred, "confidence": proba.max(1)}


def run_view(name: str) -> dict:
    p = load_pages(name)
    out = {"pages": {"train": len(p.train), "test": len(p.test)}, "ids": p.data.n_ids, "labels": p.label_names,
           "label_summary": p.label_summary,
           "test_pages_with_no_known_id": int((p.test.lengths == 0).sum())}
    t0 = time.time()
    out["chance_precision@10"] = chance_agreement(p)
    xtr, xte = incidences(p)
    tfidf = TfidfTransformer().fit(xtr)  # l2-normalised rows, smoothed idf
    ttr, tte = tfidf.transform(xtr), tfidf.transform(xte)
    methods = {"tfidf": evaluate_vectors(ttr, tte, p)}
    vectors = {}
    for r in RANKS:
        vtr, vte, empty = svd_mean(p, r)
        vectors[r] = (vtr, vte)
        methods[f"svd-mean r={r}"] = evaluate_vectors(vtr, vte, p)
        methods[f"svd-mean r={r}"]["test_pages_with_zero_vector"] = empty
    out["unsupervised"] = methods
    majority = int(p.y_train.sum(0).argmax())
    pred = np.full(len(p.y_test), majority)
    out["majority"] = classification_report(pred, np.ones(len(pred)), p.y_test)
    out["majority"]["label"] = p.label_names[majority]
    lr = logistic(ttr, p.y_train, tte, np.random.default_rng(SEED))
    report = classification_report(lr.pop("pred"), lr.pop("confidence"), p.y_test)
    out["logreg_tfidf"] = {**lr, **report}
    out["seconds"] = round(time.time() - t0, 1)
    out["_vectors"] = vectors
    return out


def fmt_ci(v, ci) -> str:
    return f"{100 * v:.1f} [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def markdown(res: dict) -> list[str]:
    lines = ["# Set embeddings on Wikispeedia: baselines", "",
             f"Held-out pages: {res['pages']['held_out_pages']} of {res['pages']['kept']} "
             f"(prepare's seeded split, test_fraction {res['pages']['test_fraction']}, seed {res['pages']['seed']}); "
             f"neighbours searched among the training pages. 15 top-level categories; "
             f"{res['pages']['pages_with_2plus_labels']} pages have 2+. A neighbour agrees / a prediction is "
             "correct if it shares one of the page's categories. [95% bootstrap CI over held-out pages.]", "",
             "## (a) Unsupervised: kNN category agreement", "",
             f"| view | method | precision@{K} | kNN-{K} accuracy | kNN macro-F1 | coverage@{REJECT} | accuracy@{REJECT} |",
             "|---|---|---|---|---|---|---|"]
    for view in ("links", "words"):
        v = res[view]
        lines.append(f"| {view} | chance (random neighbours) | {100 * v['chance_precision@10']:.1f} | | | | |")
        for name, m in v["unsupervised"].items():
            k = m["knn"]
            acc_r = f"{100 * k[f'accuracy@{REJECT}']:.1f}" if k[f"accuracy@{REJECT}"] is not None else "-"
            lines.append(f"| {view} | {name} | {fmt_ci(m[f'precision@{K}'], m[f'precision@{K}_ci'])} | "
                         f"{fmt_ci(k['accuracy'], k['accuracy_ci'])} | {100 * k['macro_f1']:.1f} | "
                         f"{100 * k[f'coverage@{REJECT}']:.1f} | {acc_r} |")
    lines += ["", "## (b) Supervised: page -> category", "",
              f"| view | method | accuracy | macro-F1 | coverage@{REJECT} | accuracy@{REJECT} | parameters |",
              "|---|---|---|---|---|---|---|"]
    for view in ("links", "words"):
        v = res[view]
        for name, m in (("majority class (" + v["majority"]["label"] + ")", v["majority"]),
                        (f"logistic regression, TF-IDF (C={v['logreg_tfidf']['C']})", v["logreg_tfidf"])):
            acc_r = f"{100 * m[f'accuracy@{REJECT}']:.1f}" if m[f"accuracy@{REJECT}"] is not None else "-"
            lines.append(f"| {view} | {name} | {fmt_ci(m['accuracy'], m['accuracy_ci'])} | {100 * m['macro_f1']:.1f} | "
                         f"{100 * m[f'coverage@{REJECT}']:.1f} | {acc_r} | {m.get('parameters', 0):,} |")
    lines += ["", f"Vocabulary (training pages): links {res['links']['ids']:,} ids, words {res['words']['ids']:,}. "
              f"Held-out pages none of whose ids occur in training: links {res['links']['test_pages_with_no_known_id']}, "
              f"words {res['words']['test_pages_with_no_known_id']}.",
              "Curves: coverage_baselines.png; 2-D t-SNE of the links svd-mean r=128 page vectors: "
              "tsne_svd_mean_links.png.", f"Wall time: {res['seconds']} s.", ""]
    return lines


def plot_links_tsne(p: Pages, vtr: np.ndarray, vte: np.ndarray) -> None:
    allv = np.vstack([vtr, vte])
    ally = np.vstack([p.y_train, p.y_test])
    nz = np.abs(allv).sum(1) > 0
    plot_projection(allv[nz] / np.linalg.norm(allv[nz], axis=1, keepdims=True), ally[nz], p.label_names,
                    RESULTS / "tsne_svd_mean_links.png",
                    "t-SNE of page vectors: mean of co-occurrence SVD vectors of the page's links (r=128)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plot-only", action="store_true",
                    help="redraw the t-SNE figure only (seconds of SVD + the t-SNE)")
    args = ap.parse_args()
    torch.set_num_threads(THREADS)
    if args.plot_only:  # redraw the t-SNE figure only (seconds of SVD + the t-SNE)
        p = load_pages("links")
        vtr, vte, _ = svd_mean(p, 128)
        plot_links_tsne(p, vtr, vte)
        return
    t0 = time.time()
    info = machine()
    res = {"machine": info, "pages": json.loads((RESULTS.parents[2] / "runs" / "setembed" / "pages.json").read_text())}
    for view in ("links", "words"):
        res[view] = run_view(view)
        print(view, "done", round(time.time() - t0, 1), "s", flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    curves = {}
    for view in ("links", "words"):
        curves[f"{view}: logistic regression (TF-IDF)"] = res[view]["logreg_tfidf"]
        curves[f"{view}: kNN-{K} TF-IDF"] = res[view]["unsupervised"]["tfidf"]["knn"]
        curves[f"{view}: kNN-{K} svd-mean r=128"] = res[view]["unsupervised"]["svd-mean r=128"]["knn"]
    plot_curves(curves, RESULTS / "coverage_baselines.png", "Wikispeedia category from a page's links / words")
    plot_links_tsne(load_pages("links"), *res["links"]["_vectors"][128])
    for view in ("links", "words"):
        res[view].pop("_vectors")
    res["seconds"] = round(time.time() - t0, 1)
    info["load_average_end"] = load_average()
    md = markdown(res) + [f"Load average at the end: {info['load_average_end']}."]
    write_results(RESULTS, "baselines", res, md, indent=1)
    print("\n".join(md))


if __name__ == "__main__":
    main()
