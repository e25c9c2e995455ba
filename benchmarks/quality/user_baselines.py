"""What a user would run instead on the shared set datasets: item2vec and ALS, settings chosen on val.

    .venv/bin/python -m benchmarks.quality.user_baselines --datasets wikispeedia,fb15k237,lastfm \\
        --name quality_user_baselines

For each dataset, every setting in GRID is fitted on the val split's training sets and ranks its
held-out sets (the harness's examples: 5 held-out ids per set). The best setting of each family by
val rec@10 (ties: the earlier, the library's default first) is then fitted on the test split's
training sets and ranks the test examples once. On the same test examples come the harness's
`hybrid_x6` (train --members 6: trained unless runs/quality/models holds it), its networks alone and
its term alone, and the harness's EASE and co-occurrence rows. Every row gets the paired 95% interval
of hybrid_x6 - it and of the networks alone - it. Results: benchmarks/results/NAME.json and NAME.md.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import asdict

import numpy as np

from benchmarks.machine import write_results
from benchmarks.paper.report import paired
from benchmarks.paper.report import rec_metrics as metrics
from benchmarks.quality.harness import RESULTS, baseline_ranks, examples, model_ranks, split_dataset
from superbloom.evaluation.als import ALS, ALSConfig
from superbloom.evaluation.item2vec import Item2Vec, Item2VecConfig
from superbloom.evaluation.metrics import hits_at, target_ranks

# each family's settings, the library's default first: item2vec with more passes over these small sets
# and the whole set as the window; ALS with more factors, more regularisation, or plain confidences (a
# first pass found plain confidences with 128 factors best on most sets, a second 256: 256 and 512 added)
GRID = {
    "item2vec": (Item2Vec, [Item2VecConfig(), Item2VecConfig(epochs=30),
                            Item2VecConfig(epochs=30, window=0, shrink_windows=False)]),
    "als": (ALS, [ALSConfig(), ALSConfig(factors=128), ALSConfig(regularization=1.0),
                  ALSConfig(confidence="plain", alpha=10.0), ALSConfig(confidence="plain", alpha=40.0),
                  ALSConfig(confidence="plain", alpha=10.0, factors=128),
                  ALSConfig(confidence="plain", alpha=10.0, factors=256),
                  ALSConfig(confidence="plain", alpha=10.0, factors=512)]),
}
RECIPE, STEPS = "hybrid_x6", 2000


def fit_rank(cls, config, data, ex) -> tuple[np.ndarray, float]:
    t0 = time.time()
    model = cls(data.train, data.n_ids, config)
    return target_ranks(model.rank(ex.contexts, ex.contexts, 20), ex.targets).astype(np.int16), time.time() - t0


def changed(config) -> dict:
    """The settings that differ from the family's default."""
    default = asdict(type(config)())
    return {k: v for k, v in asdict(config).items() if default[k] != v}


def dataset_rows(name: str) -> list[dict]:
    val = split_dataset(name, "val")
    val_ex = examples(val)
    test = split_dataset(name, "test")
    ex = examples(test)
    groups = ex.set_rows
    rec = model_ranks(name, "test", RECIPE, STEPS, test, ex)
    ours = {RECIPE: rec["ranks"], **{f"{RECIPE} {k.replace('_', ' ')}": v for k, v in rec["variant_ranks"].items()}}
    theirs = {b: v["ranks"] for b, v in baseline_ranks(name, "test", test, ex, ("cooccurrence", "ease")).items()
              if "ranks" in v}
    rows, chosen = [], {}
    for family, (cls, grid) in GRID.items():
        scores = []
        for config in grid:
            ranks, seconds = fit_rank(cls, config, val, val_ex)
            scores.append(float(hits_at(ranks, 10).mean()))
            print(f"{name} [val] {family} {changed(config) or 'default'}: rec@10 {scores[-1]:.4f} ({seconds:.0f} s)",
                  flush=True)
        best = grid[int(np.argmax(scores))]
        ranks, seconds = fit_rank(cls, best, test, ex)
        theirs[family] = ranks
        chosen[family] = dict(setting=changed(best), val_rec10={str(changed(c) or "default"): s
                                                                 for c, s in zip(grid, scores)}, seconds=round(seconds, 1))
    common = {"dataset": name, "split": "test", "ids": test.n_ids, "examples": int(len(ex.targets))}
    for method, ranks in {**ours, **theirs}.items():
        row = dict(common, method=method, **metrics(ranks, groups), **chosen.get(method, {}))
        for mine in (RECIPE, f"{RECIPE} network only"):
            if method != mine:
                row[f"{mine} - it, rec@10"] = paired(hits_at(ours[mine], 10), hits_at(ranks, 10), groups)
        rows.append(row)
    return rows


def table(rows: list[dict]) -> list[str]:
    def ci(p):
        return f"{p['diff']:+.4f} [{p['lo']:+.3f}, {p['hi']:+.3f}]" if p else "-"
    out = ["| dataset | method | setting (chosen on val) | rec@10 | hybrid_x6 - it | its networks alone - it |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        setting = ", ".join(f"{k} {v}" for k, v in r["setting"].items()) or "default" if "setting" in r else ""
        out.append(f"| {r['dataset']} | {r['method']} | {setting} | {r['rec@10']:.4f} | "
                   f"{ci(r.get(f'{RECIPE} - it, rec@10'))} | {ci(r.get(f'{RECIPE} network only - it, rec@10'))} |")
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", default="wikispeedia,fb15k237,lastfm,beauty,toys,bert4rec_beauty,wn18rr")
    p.add_argument("--name", default="quality_user_baselines")
    a = p.parse_args(argv)
    rows = []
    for name in a.datasets.split(","):
        rows += dataset_rows(name)
    result = {"recipe": RECIPE, "steps": STEPS,
              "grid": {f: [asdict(c) for c in g] for f, (_, g) in GRID.items()}, "rows": rows}
    md = [f"# {__doc__.splitlines()[0]}", "", *table(rows)]
    write_results(RESULTS, a.name, result, md, indent=1)
    print("\n".join(md))


if __name__ == "__main__":
    main()
