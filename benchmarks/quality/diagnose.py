"""Why the model loses (issue 16, step 2): learning curves, recall per target-frequency decile and per
context length against the baselines on the very same examples, and what the models predict.

    .venv/bin/python -m benchmarks.quality.diagnose --dataset wikispeedia --split val --runs demo-2000,a1-2000

Reads what benchmarks/quality/harness.py left in runs/quality/ (cached ranks of every method on the
same examples, each model's metrics.jsonl); ranks a few contexts again for the prediction examples.
Prints markdown (pasted, with the reading of it, into benchmarks/results/quality.md).
"""
from __future__ import annotations

import argparse
import json

import numpy as np
import torch

import superbloom as sb
from superbloom.baselines import fit_baseline

from .harness import THREADS, WORK, examples, split_dataset


def curves(name: str, split: str, runs: list[str]) -> list[str]:
    lines = ["| run | step | train loss (EMA of batches) | inner val rec@10 |", "|---|---|---|---|"]
    for r in runs:
        recs = [json.loads(x) for x in open(WORK / "models" / f"{name}-{split}" / r / "metrics.jsonl")]
        loss = {x["step"]: x["loss"] for x in recs if "loss" in x}
        for x in recs:
            if "val_rec@10" in x and not x.get("final"):
                lines.append(f"| {r} | {x['step']} | {loss.get(x['step'], float('nan')):.3f} | {x['val_rec@10']:.4f} |")
    return lines


def hit10(ranks: np.ndarray) -> np.ndarray:
    return ((ranks > 0) & (ranks <= 10)).astype(float)


def breakdown(name: str, split: str, runs: list[str]) -> list[str]:
    data = split_dataset(name, split)
    ex = examples(data)
    counts = np.asarray(data.counts)
    methods = {}
    for b in ("cooccurrence", "ease"):
        f = WORK / "baselines" / f"{name}-{split}-{b}.npz"
        if f.exists():
            methods[b] = np.load(f)["ranks"]
    for r in runs:
        methods[r] = np.load(WORK / "models" / f"{name}-{split}" / r / "ranks.npy")
    tcount = np.where(ex.targets >= 0, counts[np.maximum(ex.targets, 0)], 0)
    edges = np.quantile(tcount, np.linspace(0, 1, 11))
    dec = np.clip(np.searchsorted(edges, tcount, side="right") - 1, 0, 9)
    head = "| target-frequency decile | training count of target | examples | " + " | ".join(methods) + " |"
    lines = ["rec@10 per decile of the held-out id's training count (decile 1 = rarest):", "", head,
             "|" + "---|" * (3 + len(methods))]
    for d in range(10):
        sel = dec == d
        if not sel.any():
            continue
        lines.append(f"| {d + 1} | {int(tcount[sel].min())}-{int(tcount[sel].max())} | {int(sel.sum())} | "
                     + " | ".join(f"{hit10(v[sel]).mean():.3f}" for v in methods.values()) + " |")
    clen = (ex.contexts >= 0).sum(1)
    lines += ["", "rec@10 per context length (ids in the context):", "",
              "| context ids | examples | " + " | ".join(methods) + " |", "|" + "---|" * (2 + len(methods))]
    for lo, hi in ((1, 2), (3, 5), (6, 10), (11, 20), (21, 31)):
        sel = (clen >= lo) & (clen <= hi)
        if sel.any():
            lines.append(f"| {lo}-{hi} | {int(sel.sum())} | "
                         + " | ".join(f"{hit10(v[sel]).mean():.3f}" for v in methods.values()) + " |")
    if "ease" in methods:
        for r in runs:
            e, mdl = hit10(methods["ease"]), hit10(methods[r])
            lines.append(f"\n{r}: EASE right & model wrong on {int(((e == 1) & (mdl == 0)).sum())} examples, "
                         f"model right & EASE wrong on {int(((e == 0) & (mdl == 1)).sum())} (of {len(e)})")
    return lines


def predictions(name: str, split: str, runs: list[str], contexts: list[list[str]], n_random: int) -> list[str]:
    """Top-8 of each model and of EASE for named contexts, and for random examples where EASE has the
    held-out id in its top 10 and the first model does not."""
    torch.set_num_threads(THREADS)
    data = split_dataset(name, split)
    vocab = data.vocab
    ease = fit_baseline("ease", data.train, data.n_ids)
    preds = {r: sb.load(WORK / "models" / f"{name}-{split}" / r) for r in runs}
    ex = examples(data)
    chosen = []
    for ctx in contexts:
        ids = list(vocab.lookup(ctx)[0])
        if ids:
            chosen.append((np.array(ids, np.int64), -1))
    if n_random and runs:
        e = np.load(WORK / "baselines" / f"{name}-{split}-ease.npz")["ranks"]
        mdl = np.load(WORK / "models" / f"{name}-{split}" / runs[0] / "ranks.npy")
        cand = np.flatnonzero((e > 0) & (e <= 10) & ((mdl == 0) | (mdl > 10)))
        for i in np.random.default_rng(0).choice(cand, min(n_random, len(cand)), replace=False):
            c = ex.contexts[i]
            chosen.append((c[c >= 0], int(ex.targets[i])))
    show = vocab.display
    lines = []
    for ctx, target in chosen:
        q = ctx[None, :]
        names = ", ".join(show(int(i)) for i in ctx[:8]) + (f", ... ({len(ctx)} ids)" if len(ctx) > 8 else "")
        lines.append(f"- context {{{names}}}" + (f", held out: **{show(target)}**" if target >= 0 else ""))
        top = {"EASE": ease.rank(q, q, 8)[0]}
        for r, p in preds.items():
            top[r] = p.rank(q, 8, sb.DecodeConfig(), 1, False).ids[0].numpy()
        for k, ids in top.items():
            lines.append(f"  - {k}: " + ", ".join(("**%s**" if i == target else "%s") % show(int(i))
                                                  for i in ids if i >= 0))
    return lines


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", default="wikispeedia")
    p.add_argument("--split", default="val")
    p.add_argument("--runs", default="demo-2000,a1-2000")
    p.add_argument("--contexts", default="", help="named contexts: a,b;c,d")
    p.add_argument("--random", type=int, default=4)
    a = p.parse_args(argv)
    runs = [r for r in a.runs.split(",") if r]
    out = [f"### {a.dataset} ({a.split})", "", "Learning curves:", ""] + curves(a.dataset, a.split, runs)
    out += [""] + breakdown(a.dataset, a.split, runs)
    ctxs = [c.split(",") for c in a.contexts.split(";") if c]
    if ctxs or a.random:  # fits EASE again: dense, slow above ~10K ids
        out += ["", "Predictions (top-8; held-out id in bold where it appears):", ""]
        out += predictions(a.dataset, a.split, runs, ctxs, a.random)
    text = "\n".join(out)
    print(text)
    (WORK / f"diag-{a.dataset}-{a.split}.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
