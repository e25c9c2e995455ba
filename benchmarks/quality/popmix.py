"""Experiment (issue 33): a term weight that depends on the candidate's popularity, chosen on validation.

    .venv/bin/python -m benchmarks.quality.popmix DATA MODEL [--out results.json]

The diagnosis (quality_decomposition.md) found the network ahead of the EASE term on rare targets and
behind on popular ones, so one constant mix keeps only part of each side. Here the hybrid's score is

    log p_network(j | context) + mix x (n_j / mean n) ** beta x term(j | context)

with n_j the candidate's training count: beta > 0 leans on the term for popular candidates and on the
network for rare ones; beta 0 is the hybrid as it ships. On a trained `hybrid` model (unhashed, its
term and network unchanged), every (mix, beta) of MIXES x BETAS is scored on the run's own validation
examples (train's split and examples) from one network pass; the best is chosen there, and the best
with beta 0 (the shipped choice) beside it; both, the network alone and the term alone are then ranked
on the test examples of the quality harness (5 held-out ids per test set, seed 0: `eval
--targets-per-set 5`), with paired 95% intervals. Nothing is tuned on the test split.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

BETAS = (0.0, -0.25, 0.25, -0.5, 0.5, 1.0)  # 0 first: a tie keeps the shipped constant mix


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data")
    ap.add_argument("model")
    ap.add_argument("--out", help="write the results JSON here")
    a = ap.parse_args(argv)

    import torch
    import torch.nn.functional as F

    import superbloom as sb
    from superbloom.data.dataset import Dataset
    from superbloom.evaluation.compare import paired
    from superbloom.evaluation.config import EvalConfig
    from superbloom.evaluation.metrics import summarize, target_ranks
    from superbloom.evaluation.protocols import make_examples, resolve
    from superbloom.heads.hybrid import MIXES
    from superbloom.heads.ranking import NEG_INF, Ranking
    from superbloom.inference.rank import rank_contexts
    from superbloom.training.objectives import VAL_TARGETS_PER_SET
    from superbloom.training.train import split_validation

    torch.set_num_threads(1)
    p = sb.load(a.model, device="cpu", mmap=False)
    head, train = p.model.head, p.config["train"]
    if head.cfg.name != "hybrid":
        raise SystemExit(f"{a.model}: a hybrid model is needed, got {head.cfg.name}")
    data = Dataset(a.data)
    counts = torch.from_numpy(np.asarray(data.counts, np.float64)).float()
    rel = (counts / counts.mean()).clamp(min=1e-3)
    grid = [(0.0, 0.0)] + [(m, b) for b in BETAS for m in MIXES[1:]]
    weights = {b: rel ** b for b in BETAS}
    store: list[list] = []

    @torch.no_grad()
    def topk(hidden, k, exclude=None, decode=None, context=None, **_):  # every (mix, beta) from one pass
        v, w, n = hidden.mean(1), head.rows(), head.n_ids
        ctx = context.masked_fill((context < 0) | (context >= n), -1)
        s = F.log_softmax(v @ w.T + head.bias, -1)
        t = head.item_item(ctx)
        bad = torch.zeros_like(s, dtype=torch.bool)
        if exclude is not None:
            ex = exclude.clamp(min=0)
            bad.scatter_(1, ex, exclude >= 0)
        out = []
        for mix, beta in grid + [("term", None)]:
            score = t if mix == "term" else (s + mix * weights[beta] * t if mix else s)
            score = score.masked_fill(bad, NEG_INF)
            out.append(torch.topk(score, k, dim=1).indices)
        store.append(out)
        ids = out[0]
        return Ranking(ids, s.gather(1, ids), torch.ones(len(ids), dtype=torch.bool), torch.full((len(ids),), n))

    head.topk = topk

    def ranked(contexts, exclude=None):
        store.clear()
        rank_contexts(p.model, p.hashing, contexts, 20, exclude=exclude)
        return [torch.cat([b[c] for b in store]).numpy() for c in range(len(grid) + 1)]

    t0 = time.time()
    seed = train["loop"]["seed"]
    _, val_rows = split_validation(data.train, train["val_fraction"], seed)
    val = make_examples(data.train.subset(val_rows), train["mask"]["n"], VAL_TARGETS_PER_SET, seed)
    vr = ranked(val.contexts)
    vscore = [summarize(target_ranks(r, val.targets))["rec@10"] for r in vr[:-1]]
    best = int(np.argmax(vscore))  # ties: the earlier
    best0 = max((c for c, (m, b) in enumerate(grid) if b == 0.0 or m == 0.0), key=lambda c: (vscore[c], -c))
    cfg = EvalConfig(seed=0, targets_per_set=5)
    ex = resolve("auto", data).drawer(cfg, {}).examples(data)
    tr = ranked(ex.contexts, ex.exclude)
    ranks = {name: target_ranks(tr[c], ex.targets) for name, c in
             (("popularity-dependent mix", best), ("constant mix (as shipped)", best0), ("network alone", 0),
              ("term alone", len(grid)))}
    groups = ex.set_rows  # bootstrap over held-out sets
    res = {"data": a.data, "model": a.model, "validation_examples": int(len(val.targets)), "test_examples": int(len(ex.targets)),
           "chosen": {"mix": grid[best][0], "beta": grid[best][1], "val_rec@10": vscore[best]},
           "shipped": {"mix": grid[best0][0], "beta": 0.0, "val_rec@10": vscore[best0]},
           "validation_by_beta": {str(b): max(vscore[c] for c, (m, bb) in enumerate(grid) if bb == b and m) for b in BETAS},
           "test_rec@10": {k: float(summarize(r)["rec@10"]) for k, r in ranks.items()},
           "paired": {"popularity-dependent - constant": paired(ranks["popularity-dependent mix"], ranks["constant mix (as shipped)"], groups),
                      "popularity-dependent - term alone": paired(ranks["popularity-dependent mix"], ranks["term alone"], groups),
                      "constant - term alone": paired(ranks["constant mix (as shipped)"], ranks["term alone"], groups)},
           "seconds": round(time.time() - t0, 1)}
    print(json.dumps(res, indent=1, default=float))
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1, default=float) + "\n")


if __name__ == "__main__":
    main()
