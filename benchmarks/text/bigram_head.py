"""The text fusion as a model: a trained text model given the hashed-hybrid head with the bigram term
(heads/bigram.py), its weight and eps chosen by the head's own validation, then the library's `eval`.

    python -m benchmarks.text.bigram_head --model runs/table5_s16_b16_long/hash40-d128 --name NAME

The model keeps its network (the superbloom head's tied weights and hash maps are loaded into the
hashed-hybrid head unchanged). The term is counted from the model's training rows (its validation rows
left out, as `train` does); the weight (MIXES) and eps (bigram.EPS) are chosen by HashedHybridHead.choose
on the masked tokens of VAL_ROWS of the model's validation rows, exactly as text-mlm's validation
(training/text_mlm.py). The test is `evaluate` (the text protocol, table5_bench.py's settings): the hybrid,
its network only and term only (the head's variants) and the bigram baseline on the same masked tokens,
ranked by the head's exact top-k (Algorithm 1 on the untouched ids), with paired intervals by test row.
A model trained with `--head hashed-hybrid --item-term bigram` gets the same head from the start; this
script measures it on a model already trained, without training it again.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
from benchmarks.machine import machine_info, write_results  # noqa: E402

import superbloom as sb  # noqa: E402
from superbloom.evaluation.evaluate import EvalConfig, evaluate  # noqa: E402
from superbloom.evaluation.metrics import hits_at, paired_difference, summarize, target_ranks  # noqa: E402
from superbloom.heads import build_head, head_config  # noqa: E402
from superbloom.inference.fill import Filler  # noqa: E402
from superbloom.inference.rank import rank_masked  # noqa: E402
from superbloom.model.text_batches import masked_rows  # noqa: E402
from superbloom.training.text_mlm import SELECT, VAL_ROWS  # noqa: E402
from superbloom.training.train import split_validation  # noqa: E402

FILL = ["Miles Davis is a jazz musician, he is similar to [MASK] .",
        "The capital of France is [MASK] .",
        "The [MASK] of the United States lives in the White House ."]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a text model directory (train --objective text-mlm)")
    ap.add_argument("--data", default=None, help="its prepare-text dataset (default: the one config.json names)")
    ap.add_argument("--neighbours", type=int, default=1000, help="term values kept per neighbour (default 1000)")
    ap.add_argument("--max-sets", type=int, default=300, help="test rows (default 300, as table5_bench.py)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--name", required=True, help="results file stem in benchmarks/results/text/")
    args = ap.parse_args(argv)
    model_dir = Path(args.model)
    if not (model_dir / "config.json").is_file():
        ap.error(f"--model {model_dir}: no config.json there (a model directory written by `superbloom train`)")
    t0, load0 = time.time(), os.getloadavg()
    sb.set_threads(args.threads)
    p = sb.load(model_dir, device="cpu")
    saved = p.config
    data_dir = args.data or saved["train"]["data"]
    if not Path(data_dir).is_dir():
        ap.error(f"--data {data_dir}: not a directory (pass the model's prepare-text dataset)")
    data = sb.Dataset(data_dir)
    old = p.model.head
    if saved["head"]["name"] != "superbloom":
        ap.error(f"--model {model_dir}: head {saved['head']['name']!r}; this script gives a superbloom-head model the term")

    # the hashed-hybrid head with the model's network: the superbloom head's state loaded unchanged
    cfg = head_config("hashed-hybrid", term="bigram", neighbours=args.neighbours,
                      per_hash_softmax=saved["head"].get("per_hash_softmax", False))
    head = build_head(cfg, p.model.encoder.embed, p.hashing, data.counts)
    missing, unexpected = head.load_state_dict(old.state_dict(), strict=False)
    assert not unexpected, unexpected
    train_cfg = saved["train"]
    seed = train_cfg["loop"]["seed"]
    train_rows, val_rows = split_validation(data.train, train_cfg["val_fraction"], seed)
    t = time.time()
    built = head.fit(data.train.subset(train_rows))
    fit_s = time.time() - t
    p.model.head = head
    p.model.eval()

    # validation: text-mlm's own (training/text_mlm.py), the head choosing its weight and eps
    mask = train_cfg["mask"]
    picked = np.sort(np.random.default_rng([seed, 5]).permutation(val_rows)[:VAL_ROWS])
    val = masked_rows(data.train, picked, mask["n"], mask["mask_rate"], seed)
    t = time.time()
    chosen = head.choose(lambda: rank_masked(p.model, p.hashing, val, 20),
                         lambda r: summarize(target_ranks(r.ids.numpy(), val.flat()[2])), SELECT).record()
    val_s = time.time() - t
    print(json.dumps({"fit_s": round(fit_s, 1), "val_s": round(val_s, 1), "chosen": chosen}), flush=True)

    # test: the library's eval (the head's variants and the bigram baseline on the same tokens)
    t = time.time()
    res = evaluate(p, data, EvalConfig(max_sets=args.max_sets, seed=0, depth=20, baselines=("bigram",)),
                   progress=False)
    test_s = time.time() - t
    ranks, groups = res.ranks, res.groups
    hyb = ranks["model"]
    pairs = {}
    for other in [m for m in ranks if m != "model"]:
        pairs[f"hybrid - {other}"] = {f"rec@{k}": paired_difference(hits_at(hyb, k), hits_at(ranks[other], k), groups)
                                      for k in (1, 10, 20)}
    fills = [x.to_json() for x in Filler.from_predictor(p, model_dir).fill_many(FILL, 10)]
    result = {"benchmark": "text_bigram_head", "machine": machine_info() | {"torch_threads": args.threads},
              "model": str(model_dir), "data": str(data_dir), "head": head.describe(), "head_built": built,
              "fit_s": round(fit_s, 1), "validation": {"rows": int(len(picked)), "examples": int(len(val.flat()[2])),
                                                    "chosen": chosen, "seconds": round(val_s, 1)},
              "test": {"examples": int(len(res.targets)), "methods": res.to_dict(), "paired": pairs,
                       "seconds": round(test_s, 1)},
              "fills": fills, "load_before": load0, "load_after": os.getloadavg(),
              "total_s": round(time.time() - t0, 1)}
    write_results(ROOT / "benchmarks" / "results" / "text", args.name, result, report(result, res.report()))
    return 0


def report(r: dict, eval_report: str) -> list[str]:
    v, t, h = r["validation"], r["test"], r["head"]
    md = ["# The text fusion as a model: the hashed-hybrid head with the bigram term (issue 33, item 4)", "",
          f"`benchmarks/text/bigram_head.py --model {r['model']}`: the model's network in the hashed-hybrid head, "
          f"the bigram term ({r['head_built']['item_item_values']:,} values, {r['fit_s']} s to count) from its training "
          f"rows, weight {h.get('item_mix')} and eps {h.get('item_eps')} chosen by the head's validation "
          f"({v['examples']:,} masked tokens of {v['rows']} held-out training rows; validation rec@10 "
          f"{v['chosen']['rec@10']:.1%}, the network alone {v['chosen']['pure_rec@10']:.1%}). Test: `evaluate` "
          f"({t['examples']:,} masked tokens), every method on the same tokens.", "", "```", eval_report, "```", "",
          "Paired differences (whole test rows resampled):", "",
          "| difference | rec@1 | rec@10 | rec@20 |", "|---|---|---|---|"]
    for name, d in t["paired"].items():
        md.append(f"| {name} | " + " | ".join(f"{x['diff']:+.1%} [{x['lo']:+.1%}, {x['hi']:+.1%}]"
                                              for x in d.values()) + " |")
    md += ["", "`fill` with this model (top 10):", ""]
    for f in r["fills"]:
        md.append(f"- {f['text']} -> " + ", ".join(x["display"] for x in f["blanks"][0]["fillers"]))
    md += ["", f"Seconds: count {r['fit_s']}, validation {v['seconds']}, test {t['seconds']}, total {r['total_s']}; "
           f"load average before {[round(x, 2) for x in r['load_before']]}, after "
           f"{[round(x, 2) for x in r['load_after']]}.", ""]
    return md


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    sys.exit(main())
