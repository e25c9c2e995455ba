"""kNN over set embeddings: exact top-k by cosine, kNN classification with confidence rejection,
and the scores the benchmarks report.

- `topk_cosine`: exact top-k of queries (Q, d) against a bank (N, d) by one matrix product per
  chunk of queries (chunks sized so a chunk's (q, N) score block stays under `chunk_elems`
  floats), optionally excluding one bank row per query (a training set looking up its own
  neighbours). Exact search is the default; an index (FAISS) only if a benchmark shows the need.
- `knn_votes`: each neighbour votes for its labels with its similarity (clamped at 0; or
  exp(sim / T), Wu et al. 2018); a neighbour with several labels splits its vote evenly. The vote
  *shares* sum to 1 per query; the top share is the confidence.
- `classify`: argmax label, or -1 (rejected) below a confidence threshold (the blog's "Simple
  First": "we rejected all predictions with y_hat < 0.8").
- `coverage_curve`: accuracy of the kept predictions vs the fraction kept, over all thresholds.
- `label_agreement`: the fraction of a query's k neighbours sharing one of its labels
  (precision@k of category agreement).
- `multilabel_scores`: accuracy and macro-F1 when a set may have several true labels.

Labels are multi-hot (S, L) bool arrays; a prediction is correct if it is one of the set's labels.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

CHUNK_ELEMS = 1 << 24  # scores per chunk: 64 MB of float32


def topk_cosine(queries: torch.Tensor, bank: torch.Tensor, k: int, exclude: torch.Tensor | None = None,
                chunk_elems: int = CHUNK_ELEMS) -> tuple[torch.Tensor, torch.Tensor]:
    """queries (Q, d), bank (N, d) -> (scores (Q, k'), index (Q, k')) best first, k' = min(k, N).

    exclude (Q,): a bank row per query to leave out (-1: none). Slots that have no candidate left
    (k >= N with an exclusion) get index -1 and score -inf."""
    if queries.dim() != 2 or bank.dim() != 2 or queries.shape[1] != bank.shape[1]:
        raise ValueError(f"need queries (Q, d) and bank (N, d) of one d, got {tuple(queries.shape)}, {tuple(bank.shape)}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    q, bk = F.normalize(queries.float(), dim=1), F.normalize(bank.float(), dim=1)
    k = min(k, len(bk))
    step = max(1, chunk_elems // max(1, len(bk)))
    scores, index = [], []
    for a in range(0, len(q), step):
        s = q[a:a + step] @ bk.T  # (q, N)
        if exclude is not None:
            ex = exclude[a:a + step].to(s.device)
            rows = torch.nonzero(ex >= 0).flatten()
            s[rows, ex[rows]] = float("-inf")
        top = s.topk(k, dim=1)
        scores.append(top.values)
        index.append(top.indices.masked_fill(torch.isneginf(top.values), -1))
    if not scores:
        return torch.zeros(0, k), torch.zeros(0, k, dtype=torch.long)
    return torch.cat(scores), torch.cat(index)


def knn_votes(scores: torch.Tensor, index: torch.Tensor, bank_labels: torch.Tensor,
              temperature: float | None = None) -> torch.Tensor:
    """Vote shares (Q, L) from the neighbours' labels (Q, k) scores/index, bank_labels (N, L) bool.

    weight = max(sim, 0) (temperature None) or exp(sim / temperature); a neighbour's weight is
    split evenly over its labels; rows are normalised to sum 1. A tiny floor (1e-12) on the weight
    makes a query whose neighbours all have similarity <= 0 fall back to plain counts. A query
    with no labelled neighbour gets an all-zero row (confidence 0)."""
    valid = index >= 0  # (Q, k)
    if temperature is None:
        w = scores.clamp_min(0.0) + 1e-12
    else:
        w = torch.exp((scores - scores.masked_fill(~valid, float("-inf")).amax(1, keepdim=True).clamp_min(-1e30))
                      / temperature)  # shifted by the row max: the shares are unchanged
    w = torch.where(valid, w, torch.zeros_like(w))  # (Q, k)
    lab = bank_labels.to(w.device).float()[index.clamp_min(0)]  # (Q, k, L)
    lab = lab / lab.sum(2, keepdim=True).clamp_min(1.0)  # split a multi-label neighbour's vote
    votes = (w[:, :, None] * lab).sum(1)  # (Q, L)
    return votes / votes.sum(1, keepdim=True).clamp_min(1e-30)


def classify(shares: torch.Tensor, reject: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """shares (Q, L) -> (label (Q,) with -1 where rejected, confidence (Q,) = the top share).

    A prediction is kept if confidence >= reject (0 keeps all; the blog uses 0.8). A query without
    any vote (all-zero row) is always rejected."""
    confidence, label = shares.max(dim=1)
    keep = (confidence >= reject) & (confidence > 0)
    return torch.where(keep, label, torch.full_like(label, -1)), confidence


def coverage_curve(confidence: np.ndarray, correct: np.ndarray) -> dict[str, np.ndarray]:
    """Accuracy of the kept predictions vs coverage, one point per distinct confidence threshold.

    confidence (Q,), correct (Q,) bool -> {"threshold", "coverage", "accuracy"} (T,) arrays,
    thresholds decreasing: a prediction is kept iff its confidence >= threshold; coverage = kept /
    Q, accuracy = correct among kept. The last point (lowest threshold) keeps everything."""
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    if confidence.shape != correct.shape or confidence.ndim != 1:
        raise ValueError(f"confidence and correct must be (Q,) arrays of one length, got {confidence.shape}, {correct.shape}")
    if len(confidence) == 0:
        return {"threshold": np.zeros(0), "coverage": np.zeros(0), "accuracy": np.zeros(0)}
    order = np.argsort(-confidence, kind="stable")
    conf, hits = confidence[order], np.cumsum(correct[order])
    last = np.r_[conf[1:] != conf[:-1], True]  # the last index of each run of equal confidence
    kept = np.flatnonzero(last) + 1
    return {"threshold": conf[last], "coverage": kept / len(conf), "accuracy": hits[last] / kept}


def label_agreement(index: np.ndarray, query_labels: np.ndarray, bank_labels: np.ndarray) -> np.ndarray:
    """(Q,) fraction of each query's neighbours (index (Q, k), -1 = none) that share a label with
    it: precision@k of category agreement. query_labels (Q, L), bank_labels (N, L) bool."""
    index = np.asarray(index)
    ql, bl = np.asarray(query_labels, bool), np.asarray(bank_labels, bool)
    valid = index >= 0
    shared = (ql[:, None, :] & bl[np.maximum(index, 0)]).any(2) & valid  # (Q, k)
    return shared.sum(1) / np.maximum(valid.sum(1), 1)


def multilabel_scores(pred: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Accuracy and macro-F1 of single-label predictions against multi-hot truth.

    pred (Q,) label ints (-1: rejected, counted as wrong), truth (Q, L) bool. A prediction is
    correct if it is one of the set's labels. For F1 each query gets one reference label: the
    prediction if correct, else its lowest-numbered true label; macro-F1 averages per-label F1 over
    the labels that occur as a reference or a prediction (scikit-learn's convention)."""
    pred = np.asarray(pred)
    truth = np.asarray(truth, bool)
    q, n_labels = truth.shape
    if q == 0:
        return {"accuracy": 0.0, "macro_f1": 0.0, "n": 0}
    correct = (pred >= 0) & truth[np.arange(q), np.maximum(pred, 0)]
    ref = np.where(correct, pred, truth.argmax(1))  # (Q,)
    has_truth = truth.any(1)
    ref = np.where(has_truth, ref, -1)
    tp = np.bincount(pred[correct], minlength=n_labels)
    npred = np.bincount(pred[pred >= 0], minlength=n_labels)
    nref = np.bincount(ref[ref >= 0], minlength=n_labels)
    present = (npred + nref) > 0
    f1 = 2 * tp / np.maximum(npred + nref, 1)
    return {"accuracy": float(correct.mean()), "macro_f1": float(f1[present].mean()) if present.any() else 0.0,
            "n": int(q)}
