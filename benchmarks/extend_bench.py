"""Benchmark: growing the id vocabulary of a trained model (`superbloom extend`, issue 15) on Wikispeedia.

    /work/tools/benchlock .venv/bin/python -m benchmarks.extend_bench
    /work/tools/benchlock .venv/bin/python -m benchmarks.extend_bench --steps 20 --finetune-steps 10 --d 32 --layers 1

Cost: 2 x (steps + finetune-steps) training steps plus 6 rankings of ~4,000 examples. Under a load
average of 6-7 on the 2-core machine, d = 64 / 2 layers ran at 2.4 s a step with 2 threads (an
attempt stopped at step 200 of 400); the 20 + 10-step pipeline check (results/extend_smoke.md) took
98 s. Prefer --threads 1 when the cores are shared.

The embedded Wikispeedia links are prepared as the demo prepares them (sets = pages, 10% of the pages
held out as test sets). Then 10% of the vocabulary's ids (seeded) are held out from training: they
are removed from every training set, and the vocabulary without them is what the first model knows.

1. train a hashed model (alpha = 4, m = 2, superbloom head; d = 64, 2 layers) for --steps steps on
   the training sets without the held-out ids, with the table embedding only and with the dynamic
   input (train --dynamic-embedding: + the 64 x d projection of each id string's MD5 trits);
2. `extend` it with the held-out ids (they take the least-filled buckets; tables keep their shapes);
3. fine-tune the extended model with `train --resume` for --finetune-steps more steps on the full
   training sets (which contain the held-out ids; the dataset's own vocabulary is mapped onto the
   model's by string, remap.py).

Evaluated on the same test examples throughout (the paper's protocol, evaluate.py: a segment of up to
32 ids of a test page, 10 held-out targets per page, the rest the context, excluded from the
ranking; default decoding, beam = k): rec@10 / rec@20 / MRR for targets among the held-out ids ("new")
and among the others ("old"), with 95% bootstrap intervals over pages, for the model before `extend`
(new targets cannot be returned, new context ids are unknown and dropped), just after it, and after
the fine-tune. With --reference, a model trained from the start on the full training sets for the
same total steps (table only) gives the figure the fine-tune could hope for. Equal steps everywhere.
Results: benchmarks/results/extend.{json,md}.
"""
from __future__ import annotations

import argparse
import dataclasses
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.machine import machine_info, write_results

import superbloom as sb
from superbloom.data.dataset import Dataset, SetArray
from superbloom.heads.beam import DecodeConfig
from superbloom.training.extend import extend
from superbloom.storage.files import load_json, write_lines
from superbloom.evaluation.metrics import summarize_ci, target_ranks
from superbloom.model.encoder import count_parameters
from superbloom.inference.rank import rank_contexts
from superbloom.evaluation.protocols import make_examples
from superbloom.data.remap import vocabulary_map
from superbloom.training.train import TrainConfig
from superbloom.data.writer import write_split, write_staged, write_vocabulary


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def without_ids(sets: SetArray, drop: np.ndarray, remap: np.ndarray, keep_as_unseen: bool) -> SetArray:
    """Sets with the ids of `drop` (bool per id) removed (training) or made -1 (test), others renumbered."""
    ids = np.asarray(sets.ids, np.int64)
    gone = (ids >= 0) & drop[np.maximum(ids, 0)]
    new = np.where(ids >= 0, remap[np.maximum(ids, 0)], -1)
    if keep_as_unseen:
        return SetArray(sets.offsets.copy(), np.where(gone, -1, new).astype(np.int32))
    keep = ~gone
    row = np.repeat(np.arange(len(sets)), sets.lengths)
    offsets = np.zeros(len(sets) + 1, np.int64)
    np.cumsum(np.bincount(row[keep], minlength=len(sets)), out=offsets[1:])
    return SetArray(offsets, new[keep].astype(np.int32))


def write_dataset(path: Path, data: Dataset, held: np.ndarray) -> None:
    """`data` without the held-out ids (bool mask over its ids), as a prepared dataset directory (writer.py)."""
    keep = np.flatnonzero(~held)
    remap = np.full(len(held), -1, np.int64)
    remap[keep] = np.arange(len(keep))

    def build(work: Path) -> dict:
        write_vocabulary(work, [data.vocab.strings[i] for i in keep], data.counts[keep])
        for name, keep_as_unseen in (("train", False), ("test", True)):
            s = without_ids(getattr(data, name), held, remap, keep_as_unseen)
            write_split(work, name, s.lengths, s.ids, data.set_names(name))
        return dict(data.meta, ids=int(len(keep)), held_out_ids=int(held.sum()),
                    note="benchmarks/extend_bench.py: the held-out ids removed")

    write_staged(str(path), build)


def evaluate_groups(model_dir: Path, full: Dataset, examples, new_mask: np.ndarray, checkpoint: str = "") -> dict:
    """rec@k of the model in `model_dir` on the examples (full dataset's numbering), split by target
    new / old; ids the model does not know are dropped from contexts (and are misses as targets)."""
    pred = sb.load(model_dir, mmap=False)
    to_model = vocabulary_map(full.vocab, pred.vocab)  # full id -> model id, -1 if unknown
    ctx = np.where(examples.contexts >= 0, to_model[np.maximum(examples.contexts, 0)], -1)
    targets = np.where(examples.targets >= 0, to_model[np.maximum(examples.targets, 0)], -1)
    t0 = time.time()
    r = rank_contexts(pred.model, pred.hashing, ctx, 20, DecodeConfig())
    seconds = time.time() - t0
    ranks = target_ranks(r.ids.numpy(), targets)
    out = {"seconds": round(seconds, 2), "checkpoint": pred.config["checkpoint"]}
    is_new = (examples.targets >= 0) & new_mask[np.maximum(examples.targets, 0)]
    for name, sel in (("new", is_new), ("old", ~is_new)):
        s = summarize_ci(ranks[sel], examples.set_rows[sel], ks=(10, 20), n_boot=500)
        out[name] = {"examples": int(sel.sum()), **{k: round(float(v), 4) for k, v in s.items()}}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=400, help="first training, steps")
    ap.add_argument("--finetune-steps", type=int, default=200, help="fine-tune after extend, steps")
    ap.add_argument("--held-out", type=float, default=0.10, help="fraction of the ids held out of training")
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reference", action="store_true", help="also train on the full data from the start")
    ap.add_argument("--variants", default="table,dynamic")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--name", default="extend")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    t_start = time.time()
    load_before = uptime()
    tmp = Path(tempfile.mkdtemp(prefix="extend_bench_"))

    full_dir = tmp / "full"
    sb.prepare(sb.PrepareConfig(str(sb.embedded_dataset()), str(full_dir)), progress=False)
    full = Dataset(full_dir)
    n = full.n_ids
    rng = np.random.default_rng(15)
    held = np.zeros(n, bool)
    held[rng.choice(n, int(round(args.held_out * n)), replace=False)] = True
    write_dataset(tmp / "train_without", full, held)
    new_file = tmp / "new_ids.txt"
    write_lines(new_file, [full.vocab.strings[i] for i in np.flatnonzero(held)])
    examples = make_examples(full.test, 32, 10, seed=0)
    ex_new = (examples.targets >= 0) & held[np.maximum(examples.targets, 0)]
    print(f"{n:,} ids, {int(held.sum()):,} held out; {len(examples.targets):,} test examples, "
          f"{int(ex_new.sum()):,} with a held-out target; train links without them "
          f"{len(Dataset(tmp / 'train_without').train.ids):,} of {len(full.train.ids):,}")

    base = dict(hash=sb.HashConfig(alpha=4, m=2),
                loop=sb.LoopConfig(steps=args.steps, eval_every=0, seed=0))
    model_kw = dict(d=args.d, heads=4, d_ff=4 * args.d, layers=args.layers)
    results = {"machine": machine_info(), "load_before": load_before, "settings": {
        **vars(args), "alpha": 4, "m": 2, "heads": 4, "d_ff": 4 * args.d, "batch_size": base["loop"].batch_size,
        "ids": n, "held_out_ids": int(held.sum()), "test_examples": int(len(examples.targets)),
        "test_examples_new_target": int(ex_new.sum()), "train_links_full": int(len(full.train.ids)),
        "train_links_without": int(len(Dataset(tmp / "train_without").train.ids))}, "variants": {}}

    for variant in args.variants.split(","):
        dyn = variant == "dynamic"
        res = {}
        model_dir = tmp / f"{variant}-model"
        t0 = time.time()
        sb.train(TrainConfig(data=str(tmp / "train_without"), out=str(model_dir),
                             model=sb.ModelConfig(**model_kw, dynamic=dyn), **base), progress=False)
        res["train_seconds"] = round(time.time() - t0, 1)
        res["parameters"] = count_parameters(sb.load(model_dir).model)
        res["before_extend"] = evaluate_groups(model_dir, full, examples, held)
        grown = tmp / f"{variant}-extended"
        t0 = time.time()
        res["extend"] = extend(model_dir, new_file, grown)
        res["extend_seconds"] = round(time.time() - t0, 2)
        res["after_extend"] = evaluate_groups(grown, full, examples, held)
        saved = load_json(grown / "config.json")
        cfg = TrainConfig.from_saved(saved, str(full_dir), str(grown))
        cfg = dataclasses.replace(cfg, loop=dataclasses.replace(cfg.loop, steps=args.steps + args.finetune_steps))
        t0 = time.time()
        sb.train(cfg, progress=False, resume=True)
        res["finetune_seconds"] = round(time.time() - t0, 1)
        res["after_finetune"] = evaluate_groups(grown, full, examples, held)
        results["variants"][variant] = res
        print(variant, {k: (v if not isinstance(v, dict) else {g: v[g].get("rec@10") for g in ("new", "old")
                                                               if g in v}) for k, v in res.items() if k != "extend"})
    if args.reference:
        ref = tmp / "reference"
        t0 = time.time()
        sb.train(TrainConfig(data=str(full_dir), out=str(ref), model=sb.ModelConfig(**model_kw),
                             **dict(base, loop=dataclasses.replace(base["loop"], steps=args.steps + args.finetune_steps))),
                 progress=False)
        results["reference"] = {"train_seconds": round(time.time() - t0, 1),
                                "eval": evaluate_groups(ref, full, examples, held)}
    results["load_after"] = uptime()
    results["total_seconds"] = round(time.time() - t_start, 1)
    write_results(Path(args.out), args.name, results, markdown(results))
    print("\n".join(markdown(results)))


def _cell(e: dict, group: str, k: str = "rec@10") -> str:
    g = e[group]
    if f"{k}_lo" in g:
        return f"{g[k]:.3f} [{g[k + '_lo']:.3f}, {g[k + '_hi']:.3f}]"
    return f"{g[k]:.3f}"


def markdown(r: dict) -> list[str]:
    s = r["settings"]
    lines = [f"# extend: {s['held_out_ids']:,} of {s['ids']:,} Wikispeedia ids held out of training, added by "
             "`superbloom extend`, fine-tuned with `train --resume`", "",
             f"Model: alpha = 4, m = 2 (superbloom head), d = {s['d']}, {s['layers']} layers, d_ff = {s['d_ff']}, "
             f"batch {s['batch_size']}; first training {s['steps']} steps on the training sets without the held-out "
             f"ids ({s['train_links_without']:,} of {s['train_links_full']:,} links), fine-tune {s['finetune_steps']} "
             f"more steps on all training sets. Test: {s['test_examples']:,} examples (10 targets per test page), "
             f"{s['test_examples_new_target']:,} of them with a held-out (\"new\") target. rec@10 with 95% bootstrap "
             "intervals over pages; equal steps for both inputs.", "",
             "| input | parameters | stage | new rec@10 | new rec@20 | old rec@10 | old rec@20 |",
             "|---|---|---|---|---|---|---|"]
    for name, v in r["variants"].items():
        for stage, label in (("before_extend", f"after {s['steps']} steps, before extend"),
                             ("after_extend", "just after extend"),
                             ("after_finetune", f"after +{s['finetune_steps']} fine-tune steps")):
            e = v[stage]
            lines.append(f"| {name} | {v['parameters']:,} | {label} | {_cell(e, 'new')} | {_cell(e, 'new', 'rec@20')} "
                         f"| {_cell(e, 'old')} | {_cell(e, 'old', 'rec@20')} |")
    if "reference" in r:
        e = r["reference"]["eval"]
        lines.append(f"| table, full data from the start | | {s['steps'] + s['finetune_steps']} steps | "
                     f"{_cell(e, 'new')} | {_cell(e, 'new', 'rec@20')} | {_cell(e, 'old')} | {_cell(e, 'old', 'rec@20')} |")
    lines += ["", "Bucket fill and collisions (`extend`'s summary; the same hash maps for both inputs):", "",
              "| | ids | max fill | mean fill | ids sharing >= 1 token | full collisions |", "|---|---|---|---|---|---|"]
    ext = next(iter(r["variants"].values()))["extend"]
    for when in ("before", "after"):
        b = ext[when]
        lines.append(f"| {when} | {b['ids']:,} | {b['max_fill']} | {b['mean_fill']:.3f} | {b['ids_sharing_a_token']:,} "
                     f"| {b['full_collisions']} |")
    lines += ["", f"{ext['n_buckets_per_map']:,} buckets per map, {ext['n_tokens']:,} tokens (unchanged); "
              f"{ext['new_ids_moved_apart']} new ids moved apart to avoid a full collision. Seconds: "
              + "; ".join(f"{k}: train {v['train_seconds']}, extend {v['extend_seconds']}, fine-tune "
                          f"{v['finetune_seconds']}" for k, v in r["variants"].items())
              + f"; whole run {r['total_seconds']} s.",
              f"Load: before `{r['load_before']}`; after `{r['load_after']}`.", ""]
    return lines


if __name__ == "__main__":
    main()
