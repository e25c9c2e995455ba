"""Pre-integration check of the set-embedding pieces on real data: the existing SetEncoder +
setembed.AttentionPool trained for a few hundred steps with each loss of superbloom/losses.py on
the Wikispeedia link sets, evaluated with exactly the baselines' protocol (common.py).

This is NOT the issue's benchmark: it has its own ten-line loop (AdamW, constant rate) because the
objective-agnostic training loop (issue 9) is not merged yet. Once `superbloom embed-train` exists,
the same evaluation runs on its checkpoints and this file can go. Its purpose is to show that the
losses, the views, the memory bank and the pool train end to end, and with which settings.

    /work/tools/benchlock .venv/bin/python -m benchmarks.setembed.smoke_train   # ~10 min, 1 thread

Objectives (one model each, same seed, same steps, batch 64, segments of <= 32 ids):
  uniformity  alignment + uniformity (t = 2) of the blog's two views (shuffled halves of a segment)
  nca         NCA leave-one-out over the batch + a momentum memory bank of all training pages (T = 0.05)
  softmax     a linear classifier on the pooled vector, label-smoothed cross-entropy (eps = 0.1)
Page vectors for evaluation: the pooled vector of the page's whole link set (eval mode).
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
import torch.nn as nn
from benchmarks.setembed.common import (K, REJECT, RESULTS, classification_report, evaluate_vectors, load_pages, machine,
                    machine_text, plot_projection)

from superbloom.batches import sample_segments, to_batch
from superbloom.hashing import BloomHash, HashConfig
from superbloom.losses import MemoryBank, alignment, nca_loss, smoothed_cross_entropy, split_views, uniformity
from superbloom.embeddings import build_embedding
from superbloom.model import ModelConfig, SetEncoder, count_parameters
from superbloom.setembed import AttentionPool

SEGMENT = 32


class Embedder(nn.Module):
    def __init__(self, hashing: BloomHash, d: int, layers: int, n_labels: int):
        super().__init__()
        self.hashing = hashing
        cfg = ModelConfig(d=d, heads=4, d_ff=2 * d, layers=layers, dropout=0.1)
        self.encoder = SetEncoder(cfg, build_embedding(cfg.embedding, hashing, d), hashing.m)
        self.pool = AttentionPool(d, heads=4)
        self.classifier = nn.Linear(d, n_labels)

    def forward(self, elems: np.ndarray) -> torch.Tensor:
        """elems (B, n) ids, -1 padded (no empty row) -> (B, d) unit vectors."""
        b = to_batch(elems, np.full(elems.shape, -1), self.hashing)
        return self.pool(self.encoder(b.tokens, b.pad), b.pad)


def padded(sets, rows: np.ndarray) -> np.ndarray:
    lengths = sets.lengths[rows]
    out = np.full((len(rows), max(1, int(lengths.max()))), -1, np.int64)
    for i, r in enumerate(rows):  # evaluation only, once per page
        out[i, :lengths[i]] = sets[r]
    return out


@torch.no_grad()
def embed_all(model: Embedder, sets, batch: int = 128) -> np.ndarray:
    model.eval()
    rows = np.flatnonzero(sets.lengths > 0)
    out = np.zeros((len(sets), model.pool.out.out_features), np.float32)
    for a in range(0, len(rows), batch):
        r = rows[a:a + batch]
        out[r] = model(padded(sets, r)).numpy()
    model.train()
    return out


def train(objective: str, p, steps: int, d: int, layers: int, seed: int) -> dict:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    hashing = BloomHash.build(p.data.n_ids, HashConfig(alpha=4, m=2, seed=seed))
    model = Embedder(hashing, d, layers, len(p.label_names))
    labels = torch.from_numpy(p.y_train)
    bank = MemoryBank.random(labels, d, momentum=0.5, generator=gen) if objective == "nca" else None
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    rows_all = np.flatnonzero(p.train.lengths >= 2)
    t0, losses = time.time(), []
    for step in range(steps):
        rows = rng.choice(rows_all, 64, replace=False)
        segs = sample_segments(p.train, rows, SEGMENT, rng)  # (B, w)
        if objective == "uniformity":
            v = split_views(torch.from_numpy(segs), gen)
            keep = v.valid.numpy()
            zl, zr = model(v.left[keep].numpy()), model(v.right[keep].numpy())
            loss = alignment(zl, zr) + 0.5 * (uniformity(zl, 2.0) + uniformity(zr, 2.0))
        elif objective == "nca":
            z = model(segs)
            idx = torch.from_numpy(rows)
            loss = nca_loss(z, labels[idx], bank, idx, temperature=0.05)
            bank.update(idx, z)
        else:
            z = model(segs)
            y = labels[torch.from_numpy(rows)].float()
            loss = smoothed_cross_entropy(model.classifier(z) / 0.1, y / y.sum(1, keepdim=True), eps=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    train_s = time.time() - t0
    vtr, vte = embed_all(model, p.train), embed_all(model, p.test)
    out = {"objective": objective, "steps": steps, "d": d, "layers": layers,
           "parameters": count_parameters(model) - (0 if objective == "softmax" else count_parameters(model.classifier)),
           "train_seconds": round(train_s, 1), "loss_first_50": float(np.mean(losses[:50])),
           "loss_last_50": float(np.mean(losses[-50:])), **evaluate_vectors(vtr, vte, p), "_vectors": (vtr, vte)}
    if objective == "softmax":
        model.eval()
        with torch.no_grad():
            proba = torch.softmax(model.classifier(torch.from_numpy(vte)) / 0.1, dim=1).numpy()
        out["softmax_head"] = classification_report(proba.argmax(1), proba.max(1), p.y_test)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--objectives", default="uniformity,nca,softmax")
    ap.add_argument("--plot", default="uniformity", help="objective whose page vectors get a t-SNE plot ('' none)")
    a = ap.parse_args()
    # one thread: this small model ran 0.12 s/step on 1 thread vs 0.33-0.79 s/step on 2 on the shared,
    # loaded machine (OpenMP threads stall when the cores are busy)
    torch.set_num_threads(1)
    info = machine()
    p = load_pages("links")
    res = {"machine": info, "view": "links", "runs": []}
    for objective in a.objectives.split(","):
        r = train(objective, p, a.steps, a.d, a.layers, a.seed)
        vtr, vte = r.pop("_vectors")
        if objective == a.plot:
            RESULTS.mkdir(parents=True, exist_ok=True)
            plot_projection(np.vstack([vtr, vte]), np.vstack([p.y_train, p.y_test]), p.label_names,
                            RESULTS / f"tsne_smoke_{objective}_links.png",
                            f"t-SNE of page vectors: SetEncoder + AttentionPool, {objective} objective, "
                            f"{a.steps} steps (pre-integration check), links")
        res["runs"].append(r)
        print(objective, {k: r[k] for k in ("train_seconds", "loss_first_50", "loss_last_50", f"precision@{K}")},
              "knn acc", r["knn"]["accuracy"], flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    info["load_average_end"] = [round(x, 2) for x in __import__("os").getloadavg()]
    (RESULTS / "smoke_train.json").write_text(json.dumps(res, indent=1) + "\n")
    lines = ["# Pre-integration check: SetEncoder + AttentionPool trained with each loss (links)", "",
             f"{a.steps} steps each, batch 64, segments <= 32 ids, d = {a.d}, {a.layers} layer(s), alpha = 4, m = 2, "
             "AdamW 1e-3 constant, own minimal loop (not `embed-train`; see smoke_train.py). Same held-out pages "
             "and evaluation as baselines.md.", "",
             f"| objective | params | loss first/last 50 | precision@{K} | kNN acc | kNN macro-F1 | "
             f"coverage@{REJECT} | acc@{REJECT} | train s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in res["runs"]:
        k = r["knn"]
        acc_r = f"{100 * k[f'accuracy@{REJECT}']:.1f}" if k[f"accuracy@{REJECT}"] is not None else "-"
        lines.append(f"| {r['objective']} (kNN) | {r['parameters']:,} | {r['loss_first_50']:.3f} / {r['loss_last_50']:.3f} | "
                     f"{100 * r[f'precision@{K}']:.1f} | {100 * k['accuracy']:.1f} | {100 * k['macro_f1']:.1f} | "
                     f"{100 * k[f'coverage@{REJECT}']:.1f} | {acc_r} | {r['train_seconds']} |")
        if "softmax_head" in r:
            s = r["softmax_head"]
            acc_r = f"{100 * s[f'accuracy@{REJECT}']:.1f}" if s[f"accuracy@{REJECT}"] is not None else "-"
            lines.append(f"| softmax (its own head) | {r['parameters']:,} | | | {100 * s['accuracy']:.1f} | "
                         f"{100 * s['macro_f1']:.1f} | {100 * s[f'coverage@{REJECT}']:.1f} | {acc_r} | |")
    lines += ["", machine_text(info) + f" Load average at end: {info['load_average_end']}.", ""]
    (RESULTS / "smoke_train.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
