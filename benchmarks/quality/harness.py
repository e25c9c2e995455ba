"""Model quality over many set datasets (issue 16): the recipe vs popularity, co-occurrence and EASE.

    /work/tools/benchlock .venv/bin/python -m benchmarks.quality.harness \\
        --datasets wikispeedia,fb15k237,beauty --recipes default --steps 2000 --split test

For every dataset: prepare it once (10% of the sets held out, seed 0, under runs/quality/data/),
train a named recipe for a number of steps, rank the evaluation examples with the model and every
baseline (the very same examples: superbloom.evaluation.protocols.make_examples, 5 held-out ids per set, context
ids excluded), and report rec@1/10/20 with 95% set-bootstrap intervals (benchmarks/paper/report.py).
Dataset names: those of benchmarks/datasets.py; here `beauty` is S3-Rec's Beauty and `bert4rec_beauty`
BERT4Rec's, as in results/quality.json. A name with a `/` is your own folder from `superbloom prepare`
(held-out sets, its default split), e.g. `--datasets ./clicks`: run on data outside the registry.

Splits:
  val   the held-out sets are carved from the *training* sets (10% of them, seed 1); the model and
        the baselines are fitted on the other 90%. Every recipe choice is made here.
  test  the prepared test sets; the model and baselines are fitted on all training sets.

Results accumulate in benchmarks/results/quality.json (one row per dataset x split x method x
recipe x steps, the newest run of a row replaces an older one) and quality.md, its table (`--name`:
another file stem, e.g. quality_decomposition).

A model whose head has variants (the hybrid: heads/base.py `variants()`) gets a row per variant on the
same examples (issue 33): "<recipe> network only" (mix 0) and "<recipe> term only" (the chosen
item-item term and decay, no network), and every model row the paired 95% interval of its rec@10
minus each baseline's (`vs_<baseline>_rec@10`) and minus each variant's (`vs_term_only_rec@10`,
`vs_network_only_rec@10`; the network-alone row: minus the term alone). Each model row
records its steps, training seconds, examples/s and the load average before and after it trained.
Trained models go to runs/quality/models/ (git-ignored) with their metrics.jsonl learning curves.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from benchmarks.datasets import REPO, key
from benchmarks.datasets import prepare as prepare_dataset
from benchmarks.paper.report import paired
from benchmarks.quality.recipes import RECIPES, Recipe, auto_alpha  # harness.RECIPES / Recipe: the tests use them
from benchmarks.paper.report import rec_metrics as metrics
from superbloom.evaluation.metrics import hits_at
from benchmarks.machine import load_average, machine_info, read_results, write_results

import superbloom as sb
from superbloom.evaluation.baselines import baseline_entry, fit_baseline
from superbloom.model.batches import MaskConfig
from superbloom.storage.checkpoint import inference_checkpoint, latest_checkpoint
from superbloom.evaluation.evaluate import Examples, make_examples
from superbloom.storage.files import load_json
from superbloom.heads import head_config
from superbloom.data.holdout import hold_out
from superbloom.evaluation.metrics import target_ranks

WORK = REPO / "runs" / "quality"
RESULTS = REPO / "benchmarks" / "results"
THREADS = 1  # torch threads: 1 is ~8x faster than 2 when other jobs share the 2 cores (OpenMP stalls; measured)
FAMILY = "quality"  # the registry's aliases for the names in results/quality.json
TARGETS_PER_SET = 5
EVAL_SEED = 0
VAL_SEED = 1
BASELINES = ("popularity", "cooccurrence", "ease", "puresvd")


# ------------------------------------------------------------------------------------ datasets


def dataset(name: str) -> sb.Dataset:
    """Dataset `name` (the registry's, benchmarks/datasets.py; "beauty" is S3-Rec's file here) prepared
    once (seed 0, 10% of the sets held out) under runs/quality/data/."""
    return prepare_dataset(name, WORK / "data" / name, FAMILY)


def split_dataset(name: str, split: str) -> sb.Dataset:
    """split 'test': the prepared dataset; 'val': its training sets, 10% of them held out (seed 1),
    written as a dataset directory of its own (superbloom.data.holdout: same vocabulary; counts from its
    training part)."""
    if split not in ("val", "test"):
        raise SystemExit(f"--split must be val or test, got {split!r}")
    data = dataset(name)
    name = key(name)  # your own folder: under its key (benchmarks/datasets.py)
    return data if split == "test" else hold_out(data, WORK / "data" / f"{name}-val", 0.1, VAL_SEED, name)


def examples(data: sb.Dataset) -> Examples:
    return make_examples(data.test, 32, TARGETS_PER_SET, EVAL_SEED)


def train_model(recipe: Recipe, data: sb.Dataset, out: Path, steps: int, seed: int = 0) -> None:
    """The ONE place that calls the library's training API (adapt here when TrainConfig changes)."""
    alpha, m = (1, 1) if recipe.head in ("hybrid", "full") else auto_alpha(data.n_ids, recipe.alpha, recipe.m)
    cfg = sb.TrainConfig(
        data=str(data.path), out=str(out),
        hash=sb.HashConfig(alpha=alpha, m=m),
        model=sb.ModelConfig(d=recipe.d, heads=recipe.heads, d_ff=recipe.d_ff, layers=recipe.layers,
                             dropout=recipe.dropout),
        head=(head_config("hybrid", neighbours=recipe.neighbours, term=recipe.item_term,
                          label_smoothing=recipe.label_smoothing, samples=recipe.samples, proposal=recipe.proposal,
                          mix=recipe.mix) if recipe.head == "hybrid"
              else head_config("full", label_smoothing=recipe.label_smoothing) if recipe.head == "full"
              else sb.SuperbloomConfig(label_smoothing=recipe.label_smoothing)),
        mask=MaskConfig(n=recipe.segment, mask_rate=recipe.mask_rate, p_mask=recipe.p_mask, p_random=recipe.p_random,
                        element_dropout=recipe.element_dropout),
        optim=sb.OptimConfig(lr=recipe.lr, warmup=recipe.warmup, weight_decay=recipe.weight_decay,
                             schedule=recipe.schedule),
        loop=sb.LoopConfig(batch_size=recipe.batch_size, ema=recipe.ema, steps=steps, eval_every=recipe.eval_every,
                           keep_best=True, checkpoint_every=1e9, seed=seed,
                           time_budget=recipe.time_budget),
        val_fraction=recipe.val_fraction, init=recipe.init)
    teaching = contextlib.nullcontext()
    if recipe.exclude_shown:  # a probe: the shown ids out of the training softmax (benchmarks/quality/shown.py)
        from benchmarks.quality.shown import shown_excluded
        teaching = shown_excluded()
    with teaching:
        if recipe.members > 1:
            from superbloom.training.members import train_members
            train_members(cfg, recipe.members, progress=False, overwrite=True, proposals=recipe.member_proposals)
        else:
            sb.train(cfg, progress=False, overwrite=True)


# ------------------------------------------------------------------------------------ training and runs


def model_ranks(name: str, split: str, recipe_name: str, steps: int, data: sb.Dataset, ex: Examples) -> dict:
    """Train (unless done) and rank `ex`. -> record with ranks (E,), steps, seconds, load."""
    recipe = RECIPES[recipe_name]
    run_dir = WORK / "models" / f"{name}-{split}" / f"{recipe_name}-{steps}"
    done = run_dir / "done.json"
    if not done.exists():
        shutil.rmtree(run_dir, ignore_errors=True)
        load_before = os.getloadavg()[0]
        t0 = time.time()
        train_model(recipe, data, run_dir, steps, recipe.seed)
        wall = time.time() - t0
        first = run_dir / "member-0" if recipe.members > 1 else run_dir  # an ensemble: its first member's files
        states = [load_json(latest_checkpoint(d) / "state.json")
                  for d in ([run_dir / f"member-{i}" for i in range(recipe.members)] if recipe.members > 1 else [run_dir])]
        state = dict(states[0], seconds=sum(st["seconds"] for st in states), examples=sum(st["examples"] for st in states))
        config = load_json(first / "config.json")
        torch.set_num_threads(THREADS)
        t1 = time.time()
        predictor = sb.load(run_dir)
        with predictor.ranked_alongside() as alongside:  # the variants ranked in the same pass (evaluate.py)
            ranking = predictor.rank(ex.contexts, 20, sb.DecodeConfig(), 256, False)
        ranks = target_ranks(ranking.ids.numpy(), ex.targets)
        variants = predictor.variants()  # a hybrid (or ensemble): its network alone and its term alone, same examples
        for variant, context in variants.items():
            if variant in alongside:
                alone = alongside[variant]
            else:
                with context:
                    alone = predictor.rank(ex.contexts, 20, sb.DecodeConfig(), 256, False)
            np.save(run_dir / f"ranks.{context.key}.npy",
                    target_ranks(alone.ids.numpy(), ex.targets).astype(np.int16))
        best = state.get("best", {})
        record = {"recipe": recipe_name, "threads": THREADS, "config": asdict(recipe), "alpha": config["hash"]["alpha"],
                  "m": config["hash"]["m"], "parameters": predictor.n_parameters, "steps": state["step"],
                  "best_step": best.get("step"),
                  **({"members_best_steps": [st.get("best", {}).get("step") for st in states]} if len(states) > 1 else {}), "train_seconds": round(state["seconds"], 1),
                  "wall_seconds": round(wall, 1), "rank_seconds": round(time.time() - t1, 1),
                  "examples_per_s": round(state["examples"] / max(state["seconds"], 1e-9), 1),
                  "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
                  "inference_checkpoint": inference_checkpoint(first).name,
                  "variants": [v.key for v in variants.values()],
                  **({k: v for k, v in predictor.describe_head().items() if k.startswith("item_")} if variants else {}),
                  **({"item_item_values": config["head_built"]["item_item_values"]} if variants else {})}
        np.save(run_dir / "ranks.npy", ranks.astype(np.int16))
        done.write_text(json.dumps(record, indent=2) + "\n")
    record = load_json(done)
    record["ranks"] = np.load(run_dir / "ranks.npy")
    record["variant_ranks"] = {v: np.load(run_dir / f"ranks.{v}.npy") for v in record.pop("variants", [])}
    record["dir"] = str(run_dir.relative_to(REPO))
    return record


def baseline_ranks(name: str, split: str, data: sb.Dataset, ex: Examples, which=BASELINES) -> dict:
    out = {}
    for b in which:
        why = baseline_entry(b).skipped(data.n_ids)  # the registry's size limit (EASE and its term: dense)
        if why:
            out[b] = {"skipped": why}
            continue
        cache = WORK / "baselines" / f"{name}-{split}-{b}.npz"
        if not cache.exists():
            cache.parent.mkdir(parents=True, exist_ok=True)
            t0 = time.time()
            base = fit_baseline(b, data.train, data.n_ids)
            ranks = target_ranks(base.rank(ex.contexts, ex.contexts, 20), ex.targets).astype(np.int16)
            np.savez(cache, ranks=ranks, seconds=time.time() - t0)
        z = np.load(cache)
        out[b] = {"ranks": z["ranks"], "seconds": round(float(z["seconds"]), 1)}
    return out


def run(datasets: list[str], recipes: list[str], steps: int, split: str, baselines=BASELINES) -> list[dict]:
    rows = []
    for name in datasets:
        data = split_dataset(name, split)
        rows += run_on(key(name), split, data, examples(data), recipes, steps, baselines)
    return rows


def run_on(name: str, split: str, data: sb.Dataset, ex: Examples, recipes: list[str], steps: int,
           baselines=BASELINES) -> list[dict]:
    """The rows of one dataset (`name`: its models' and baselines' cache names): the baselines, then
    each recipe's model and its variants, with the paired intervals."""
    torch.set_num_threads(THREADS)
    rows = []
    base = baseline_ranks(name, split, data, ex, baselines)
    groups = ex.set_rows
    common = {"dataset": name, "split": split, "ids": data.n_ids, "train_sets": len(data.train),
              "examples": int(len(ex.targets)), "targets_unseen": int((ex.targets < 0).sum())}
    for b, v in base.items():
        row = dict(common, method=b)
        if b in BASELINE_PARAMETERS and "skipped" not in v:
            row["parameters"] = BASELINE_PARAMETERS[b](data.n_ids)
        row.update(v if "skipped" in v else dict(metrics(v["ranks"], groups), seconds=v["seconds"]))
        row.pop("ranks", None)
        rows.append(row)
    for r in recipes:
        rec = model_ranks(name, split, r, steps, data, ex)
        variants = rec["variant_ranks"]  # {"network_only": (E,), "term_only": (E,)} for a hybrid, else {}
        runs = [(r, rec["ranks"], dict(variants))]  # a hybrid head's row, then its variants' rows beside it
        runs += [(f"{r} {v.replace('_', ' ')}", vr, {"term_only": variants["term_only"]}
                  if v == "network_only" and "term_only" in variants else {}) for v, vr in variants.items()]
        for recipe_name, ranks, versus in runs:
            row = dict(common, method="superbloom",
                       **{k: v for k, v in rec.items() if k not in ("ranks", "variant_ranks", "recipe")},
                       recipe=recipe_name)
            row.update(metrics(ranks, groups))
            for b in base:  # every baseline ranked here (item2vec, ALS too when asked for)
                if "ranks" in base[b]:
                    row[f"vs_{b}_rec@10"] = paired(hits_at(ranks, 10), hits_at(base[b]["ranks"], 10), groups)
            for v, vr in versus.items():  # hybrid - each variant; network alone - term alone
                row[f"vs_{v}_rec@10"] = paired(hits_at(ranks, 10), hits_at(vr, 10), groups)
            rows.append(row)
            print(f"{name} [{split}] {recipe_name} {rec['steps']} steps {rec['train_seconds']:.0f} s: rec@10 "
                  f"{row['rec@10']:.4f} (co-occurrence {rows_metric(rows, name, split, 'cooccurrence')}, "
                  f"EASE {rows_metric(rows, name, split, 'ease')}, "
                  f"PureSVD {rows_metric(rows, name, split, 'puresvd')})", flush=True)
    return rows


# parameters of the linear baselines: EASE's dense N x N matrix, PureSVD's N x 128 factors
BASELINE_PARAMETERS = {"ease": lambda n: n * n, "puresvd": lambda n: n * 128}


def rows_metric(rows, name, split, method, k=10):
    for r in rows:
        if r["dataset"] == name and r["split"] == split and r["method"] == method and f"rec@{k}" in r:
            return f"{r[f'rec@{k}']:.4f}"
    return "-"


# ------------------------------------------------------------------------------------ results


def row_key(r: dict) -> tuple:
    return (r["dataset"], r["split"], r["method"], r.get("recipe"), r.get("steps"))


def save(rows: list[dict], name: str = "quality") -> None:
    """Merge `rows` into NAME.json (newer rows replace rows with the same key) and rewrite NAME.md."""
    old = read_results(RESULTS, name) or {"rows": []}
    stamp = {"machine": machine_info(), "load_avg": load_average()}
    merged = {row_key(r): r for r in old["rows"]}
    for r in rows:
        merged[row_key(r)] = dict(r, **stamp)
    out = {"protocol": {"targets_per_set": TARGETS_PER_SET, "segment": 32, "eval_seed": EVAL_SEED,
                        "val": "10% of the training sets (seed 1) held out, models and baselines fitted on the rest",
                        "test": "the prepared 10% test sets (seed 0)", "ci": "95% bootstrap over held-out sets",
                        "torch_threads": THREADS},
           "rows": sorted_rows(merged.values()), "machine": stamp["machine"]}
    write_results(RESULTS, name, out, markdown(name, out["rows"]))


def markdown(name: str, rows: list[dict]) -> list[str]:
    """NAME.md: a title, the protocol in one line, the table of every row."""
    return [f"# The quality harness: every row of {name}.json", "",
            f"`python -m benchmarks.quality.harness --name {name}` (see its --help). Every method of a dataset and "
            "split on the same examples: 5 held-out ids per set, segments of <= 32 ids, context ids excluded, "
            "seed 0; 95% bootstrap intervals over held-out sets. Each row's machine and load: the JSON.", "",
            *table(rows)]


def sorted_rows(rows) -> list[dict]:
    """Rows in the files' order: by dataset and split, the model rows first."""
    return sorted(rows, key=lambda r: (r["dataset"], r["split"], r["method"] != "superbloom", r["method"],
                                       str(r.get("recipe")), r.get("steps") or 0))


def table(rows: list[dict]) -> list[str]:
    cols = ["dataset", "split", "method", "recipe", "alpha", "params", "steps", "train s", "load",
            "rec@1 [95% CI]", "rec@10 [95% CI]", "rec@20 [95% CI]", "rec@10 - term alone [95% CI]",
            "rec@10 - EASE [95% CI]"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]

    def ci(r, k):
        return f"{r[f'rec@{k}']:.4f} [{r[f'rec@{k}_lo']:.3f}, {r[f'rec@{k}_hi']:.3f}]" if f"rec@{k}" in r else "-"

    def vs(d):
        return f"{d['diff']:+.4f} [{d['lo']:+.3f}, {d['hi']:+.3f}]" if d else "-"

    for r in rows:
        lines.append("| " + " | ".join([
            r["dataset"], r["split"], r["method"], str(r.get("recipe", "-")), str(r.get("alpha", "-")),
            f"{r['parameters'] / 1e6:.2f}M" if r.get("parameters") else "-", str(r.get("steps", "-")),
            f"{r['train_seconds']:.0f}" if r.get("train_seconds") else f"{r.get('seconds', 0):.0f} (fit)",
            f"{r['load_before']:.1f}/{r['load_after']:.1f}" if "load_before" in r else "-",
            ci(r, 1) if "rec@1" in r else r.get("skipped", "-"), ci(r, 10), ci(r, 20),
            vs(r.get("vs_term_only_rec@10")), vs(r.get("vs_ease_rec@10"))]) + " |")
    return lines


def main(argv=None) -> None:
    global THREADS
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="wikispeedia,fb15k237,beauty",
                   help="comma-separated: names of benchmarks/datasets.py, or a path with a / to a folder "
                        "`superbloom prepare` wrote (your own data)")
    p.add_argument("--recipes", default="default", help=f"comma-separated, of {', '.join(sorted(RECIPES))}")
    p.add_argument("--steps", type=int, default=2000, help="training steps of each recipe")
    p.add_argument("--split", default="val", choices=("val", "test"),
                   help="val: 10%% of the training sets held out (choose here); test: the prepared test sets")
    p.add_argument("--baselines", default=",".join(BASELINES), help=f"of {', '.join(BASELINES)}")
    p.add_argument("--name", default="quality", help="results file stem in benchmarks/results/ (NAME.json, "
                   "NAME_table.md)")
    p.add_argument("--threads", type=int, default=THREADS,
                   help="torch threads (1 is faster when other jobs share the 2 cores: no OpenMP stalls)")
    a = p.parse_args(argv)
    THREADS = a.threads
    recipes = [r for r in a.recipes.split(",") if r]
    for r in recipes:
        if r not in RECIPES:
            raise SystemExit(f"unknown recipe {r!r}; choose from {sorted(RECIPES)}")
    rows = []
    for name in [d for d in a.datasets.split(",") if d]:  # saved after each dataset
        rows += run([name], recipes, a.steps, a.split, tuple(b for b in a.baselines.split(",") if b))
        save(rows, a.name)
    print("\n".join(table(rows)))


if __name__ == "__main__":
    main()
