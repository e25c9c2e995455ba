"""Shared helpers of the set-embedding benchmarks: the prepared Wikispeedia datasets and their
labels, the evaluation of any page vectors (unsupervised kNN category agreement, kNN
classification, rejection), and the plots. A learned set embedding (superbloom embed-train) is
evaluated with exactly the same functions as the baselines: `evaluate_vectors(train, test, ...)`.

Protocol: queries are the held-out pages (prepare's seeded split, benchmarks/setembed/data.py),
their neighbours are searched among the training pages only. A page may have several top-level
categories: a neighbour agrees if it shares any of them, a prediction is correct if it is one of
them (superbloom/setembed/knn.py). Confidence intervals are 95% percentile bootstraps over the
held-out pages (superbloom.evaluation.metrics.bootstrap_ci).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

import superbloom as sb
from benchmarks.machine import machine_info, machine_line
from superbloom.data.dataset import SetArray
from superbloom.evaluation.metrics import bootstrap_ci
from superbloom.setembed import classify, coverage_curve, knn_votes, label_agreement, load_labels, multilabel_scores, topk_cosine

REPO = Path(__file__).resolve().parents[2]

WORK = REPO / "runs" / "setembed"
RESULTS = REPO / "benchmarks" / "results" / "setembed"
K = 10  # neighbours: precision@10 and kNN votes
REJECT = 0.8  # the blog's confidence threshold
THREADS = 2


@dataclass
class Pages:
    """One prepared view of the pages (links or words) with its labels."""
    name: str
    data: sb.Dataset
    train: SetArray
    test: SetArray  # ids unseen in training removed
    y_train: np.ndarray  # (S_train, L) bool
    y_test: np.ndarray  # (S_test, L) bool
    label_names: list[str]
    label_summary: dict


def drop_unseen(sets: SetArray) -> SetArray:
    """The same sets without their -1 ids (test ids unseen in training)."""
    ids = np.asarray(sets.ids)
    keep = ids >= 0
    owner = np.repeat(np.arange(len(sets)), sets.lengths)  # (links,) set of each id
    per = np.bincount(owner[keep], minlength=len(sets))
    offsets = np.zeros(len(sets) + 1, np.int64)
    np.cumsum(per, out=offsets[1:])
    return SetArray(offsets, ids[keep].astype(np.int32))


def load_pages(name: str, work: Path = WORK) -> Pages:
    path = work / f"data_{name}"
    if not (path / "meta.json").exists():
        sys.exit(f"{path} is missing: run `.venv/bin/python -m benchmarks.setembed.data` first")
    data = sb.Dataset(path)
    table = load_labels(work / "labels.tsv", data)
    return Pages(name, data, data.train, drop_unseen(data.test), table["train"], table["test"], table.names,
                 table.summary())


def incidences(p: Pages) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    return p.train.incidence(p.data.n_ids), p.test.incidence(p.data.n_ids)


def neighbours(test: np.ndarray | sp.spmatrix, train: np.ndarray | sp.spmatrix, k: int = K):
    """Top-k training pages of every held-out page by cosine -> (scores (Q, k), index (Q, k)) tensors.
    Dense vectors go through setembed.topk_cosine; sparse ones (TF-IDF, rows L2-normalised) through
    a chunked sparse product."""
    if not sp.issparse(test):
        return topk_cosine(torch.as_tensor(test, dtype=torch.float32), torch.as_tensor(train, dtype=torch.float32), k)
    train_t = sp.csr_matrix(train).T.tocsc()
    scores, index = [], []
    for a in range(0, test.shape[0], 256):
        s = torch.from_numpy((test[a:a + 256] @ train_t).toarray().astype(np.float32))  # (q, S_train)
        top = s.topk(min(k, s.shape[1]), dim=1)
        scores.append(top.values)
        index.append(top.indices)
    return torch.cat(scores), torch.cat(index)


def chance_agreement(p: Pages) -> float:
    """Expected precision@k of random neighbours: per query, the fraction of training pages that
    share one of its labels, averaged."""
    shared = (p.y_test.astype(np.float32) @ p.y_train.astype(np.float32).T) > 0  # (Q, S_train)
    return float(shared.mean(1).mean())


def classification_report(pred: np.ndarray, confidence: np.ndarray, truth: np.ndarray) -> dict:
    """Accuracy / macro-F1 of all predictions, the coverage curve, and the operating point at REJECT."""
    s = multilabel_scores(pred, truth)
    correct = (pred >= 0) & truth[np.arange(len(pred)), np.maximum(pred, 0)]
    curve = coverage_curve(confidence, correct)
    kept = confidence >= REJECT
    s["accuracy_ci"] = bootstrap_ci(correct.astype(np.float64))
    s[f"coverage@{REJECT}"] = float(kept.mean())
    s[f"accuracy@{REJECT}"] = float(correct[kept].mean()) if kept.any() else None
    s["curve"] = {k: v.round(5).tolist() for k, v in curve.items()}
    return s


def evaluate_vectors(train: np.ndarray | sp.spmatrix, test: np.ndarray | sp.spmatrix, p: Pages) -> dict:
    """Unsupervised kNN category agreement (precision@K) and kNN classification (similarity-
    weighted votes of the K nearest training pages) for any page vectors."""
    scores, index = neighbours(test, train, K)
    agree = label_agreement(index.numpy(), p.y_test, p.y_train)
    shares = knn_votes(scores, index, torch.from_numpy(p.y_train))
    pred, conf = classify(shares)
    return {f"precision@{K}": float(agree.mean()), f"precision@{K}_ci": bootstrap_ci(agree),
            "knn": classification_report(pred.numpy(), conf.numpy(), p.y_test)}


machine = machine_info  # the one results writer's record: CPU, cores, memory, torch, load average, date
machine_text = machine_line


def plot_curves(curves: dict[str, dict], path: Path, title: str) -> None:
    """Accuracy vs coverage, one line per method; the REJECT operating points marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for name, c in curves.items():
        cov, acc, thr = (np.asarray(c["curve"][k]) for k in ("coverage", "accuracy", "threshold"))
        line, = ax.plot(cov, acc, label=name, lw=1.4)
        at = np.flatnonzero(thr >= REJECT)
        if len(at):
            ax.plot(cov[at[-1]], acc[at[-1]], "o", color=line.get_color(), ms=5)
    ax.set_xlabel("coverage (fraction of held-out pages answered)")
    ax.set_ylabel("accuracy of the answered pages")
    ax.set_title(title + f"\n(dots: confidence >= {REJECT})", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_projection(vectors: np.ndarray, labels: np.ndarray, names: list[str], path: Path, title: str,
                    seed: int = 0) -> None:
    """A 2-D t-SNE of page vectors (cosine), coloured by category (a page with several: its least
    frequent one, the more specific: every Countries page is also a Geography page)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.manifold import TSNE
    xy = TSNE(2, metric="cosine", init="pca", random_state=seed, perplexity=30).fit_transform(np.asarray(vectors))
    colour = labels.shape[1] - 1 - labels[:, ::-1].argmax(1)  # the highest label int = the rarest label
    fig, ax = plt.subplots(figsize=(7.5, 6.2))
    cmap = plt.get_cmap("tab20")
    for c in range(len(names)):
        m = colour == c
        ax.scatter(xy[m, 0], xy[m, 1], s=3, color=cmap(c % 20), label=f"{names[c]} ({int(m.sum())})")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=9, wrap=True)
    ax.legend(fontsize=6, markerscale=3, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
