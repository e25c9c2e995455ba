"""Benchmark: the paper's Table 4/5 comparison at this machine's scale (Superbloom sec. 4), on the real
1,000,001-entry unigram+bigram vocabulary of the three corpora, and appendix E's fill-in-the-blank.

    /work/tools/benchlock .venv/bin/python -m benchmarks.text.table5_bench --data runs/data_text --steps 150

DATA is `superbloom prepare-text` of Wikispeedia's articles, GCIDE and Brown (default settings:
1M vocabulary, segments of 128, lower-case). Each configuration trains in a child process (its own
peak RSS) for the SAME number of steps and batch size, one torch thread, with --objective text-mlm
(BERT masking: 15%, 80/10/10, positions on), then is evaluated with the text protocol on the same
masked test tokens (the same seed and test rows for every model: masked in place, nothing
excluded), next to the unigram and bigram-context baselines, and fills appendix E's sentences.

Configurations (the paper's Table 4, scaled down to what 2 shared CPU cores can train):
  baseline-d32   alpha 1, m 1, full softmax over 1M ids, d 32          (the paper's baseline-h64)
  hash8-d128     alpha 8, m 2, hashed softmax, d 128: about the same parameters as baseline-d32
  hash40-d128    alpha 40, m 2, hashed softmax, d 128 (the paper's alpha; 5x fewer parameters)
  hash40-d128-coherent  the same with both hash maps coherent (train --coherent 2: similar words share
                 a bucket, appendix C) and the token table started from co-occurrence factors (--init
                 cooccurrence): what made the 5.1M-id set model learn (results/scale/e2e7_ablation.md)
  sampled-d32    alpha 1, m 1, sampled softmax over 1M ids, d 32
  hier-d32       alpha 1, m 1, hierarchical (tree) softmax over 1M ids, d 32 (the notes' output layer;
                 not in the default --configs: its step cost at 1M ids, run on its own)
  baseline-d6    alpha 1, m 1, full softmax over 1M ids, d 6: about hash40-d128's parameters (7.0M vs 6.8M;
                 the paper's smaller pair, baseline-h64 vs hash40-h512); not in the default --configs
  sampled-d6     the same with the sampled softmax; not in the default --configs

Results: benchmarks/results/text/table5.{json,md} with the machine and the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
from benchmarks.machine import machine_info, write_results  # noqa: E402

CONFIGS = {
    "baseline-d32": {"alpha": 1, "m": 1, "head": "full", "d": 32, "heads": 2, "d_ff": 128},
    "hash8-d128": {"alpha": 8, "m": 2, "head": "superbloom", "d": 128, "heads": 4, "d_ff": 512},
    "hash40-d128": {"alpha": 40, "m": 2, "head": "superbloom", "d": 128, "heads": 4, "d_ff": 512},
    "hash40-d128-coherent": {"alpha": 40, "m": 2, "head": "superbloom", "d": 128, "heads": 4, "d_ff": 512,
                             "coherent": 2, "init": "cooccurrence"},
    "sampled-d32": {"alpha": 1, "m": 1, "head": "sampled", "d": 32, "heads": 2, "d_ff": 128},
    "hier-d32": {"alpha": 1, "m": 1, "head": "hierarchical", "d": 32, "heads": 2, "d_ff": 128},
    "baseline-d6": {"alpha": 1, "m": 1, "head": "full", "d": 6, "heads": 2, "d_ff": 24},
    "sampled-d6": {"alpha": 1, "m": 1, "head": "sampled", "d": 6, "heads": 2, "d_ff": 24},
}

# appendix E (Figure 5) of the paper, plus two of our own in its spirit
FILL = ["Miles Davis is a Jazz musician, he is similar to [MASK] .",
        "Empire state building is an iconic site of [MASK1] , it is close to [MASK2] .",
        "Copenhagen is the capital of [MASK] .",
        "The [MASK] is the largest planet of the solar system ."]

CHILD = r"""
import json, os, resource, sys, time
import torch
torch.set_num_threads(1)
import superbloom as sb
from superbloom.heads import head_config
from superbloom.model.text_batches import TEXT_MASK
from superbloom.evaluation.evaluate import EvalConfig, evaluate
from superbloom.inference.fill import Filler
a = json.loads(sys.argv[1])
c = a["config"]
head = head_config(c["head"], **({"samples": a["samples"]} if c["head"] == "sampled" else {}))
cfg = sb.TrainConfig(data=a["data"], out=a["out"], hash=sb.HashConfig(alpha=c["alpha"], m=c["m"], coherent=c.get("coherent", 0)),
    model=sb.ModelConfig(d=c["d"], heads=c["heads"], d_ff=c["d_ff"], layers=a["layers"], positions=128),
    head=head, mask=TEXT_MASK, optim=sb.OptimConfig(lr=a["lr"], warmup=a["warmup"]),
    loop=sb.LoopConfig(steps=a["steps"], time_budget=a["time_cap"], batch_size=a["batch_size"], eval_every=0,
                       seed=0, checkpoint_every=600, device="cpu", ema=0.0),
    val_fraction=a.get("val_fraction", 0.0), objective="text-mlm", init=c.get("init", "auto"))  # the LATEST weights are evaluated
load0 = os.getloadavg()
t = time.time()
sb.train(cfg, progress=False, resume=a["resume"], overwrite=not a["resume"])
train_s = time.time() - t
load1 = os.getloadavg()
log = os.path.join(a["out"], "metrics.jsonl")
rows = [json.loads(x) for x in open(log)] if os.path.exists(log) else []
steps = [r for r in rows if "loss" in r]  # every 50 steps: seconds of pure training so far
val = ([r for r in rows if "val_rec@10" in r] or [None])[-1]
p = sb.load(a["out"], device="cpu")
t = time.time()
r = evaluate(p, sb.Dataset(a["data"]), EvalConfig(max_sets=a["max_sets"], seed=0, depth=20,
             baselines=("unigram", "bigram") if a["baselines"] else ()), progress=False).to_dict()
eval_s = time.time() - t
f = Filler.from_predictor(p, a["out"])
fills = [x.to_json() for x in f.fill_many(a["fill"], 10)]
from superbloom.storage.checkpoint import latest_checkpoint
st = json.load(open(latest_checkpoint(a["out"]) / "state.json"))
print(json.dumps({"train_s": train_s, "eval_s": eval_s, "steps_done": st["step"], "seconds_in_loop": st["seconds"],
                  "step_s": steps[-1]["seconds"] / steps[-1]["step"] if steps else None,
                  "loss_curve": [(x["step"], x["loss"]) for x in steps], "val": val,
                  "parameters": p.n_parameters, "n_tokens": p.hashing.n_tokens, "eval": r, "fills": fills,
                  "load_before": load0, "load_after": load1,
                  "peak_rss_mb": int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024}))
"""


def run(name: str, args) -> dict:
    out = Path(args.workdir) / name
    arg = json.dumps({"config": CONFIGS[name], "data": args.data, "out": str(out), "steps": args.steps,
                      "batch_size": args.batch_size, "layers": args.layers, "lr": args.lr, "warmup": args.warmup,
                      "samples": args.samples, "max_sets": args.max_sets, "fill": FILL, "time_cap": args.time_cap,
                      "baselines": name == args.configs.split(",")[0], "resume": args.resume,
                      "val_fraction": args.val_fraction})
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    t = time.time()
    proc = subprocess.run([sys.executable, "-c", CHILD, arg], capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode:
        raise SystemExit(f"{name}: child failed\n{proc.stderr[-3000:]}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    r.update(name=name, config=CONFIGS[name], process_s=round(time.time() - t, 1))
    r["step_s"] = round(r["seconds_in_loop"] / max(r["steps_done"], 1), 3)  # the loop's own time per step
    e = r["eval"]
    print(json.dumps({"name": name, "step_s": r["step_s"], "params": r["parameters"], "rec@1": e["rec@1"],
                      "rec@10": e["rec@10"], "rec@20": e["rec@20"], "peak_rss_mb": round(r["peak_rss_mb"])}),
          flush=True)
    return r


def table(results: list[dict]) -> list[str]:
    lines = ["| model | alpha | m | d | head | parameters | tokens | steps | step time | peak RSS | rec@1 | rec@10 | rec@20 "
             "| MRR | rec@10 95% CI | unigram-target rec@10 | bigram-target rec@10 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        c, e = r["config"], r["eval"]
        lines.append(f"| {r['name']} | {c['alpha']} | {c['m']} | {c['d']} | {c['head']} | {r['parameters'] / 1e6:.1f}M "
                     f"| {r['n_tokens']:,} | {r['steps_done']} | {r['step_s']:.2f} s | {r['peak_rss_mb'] / 1024:.1f} GB | {e['rec@1']:.1%} "
                     f"| {e['rec@10']:.1%} | {e['rec@20']:.1%} | {e['mrr']:.3f} | [{e['rec@10_lo']:.1%}, {e['rec@10_hi']:.1%}] "
                     f"| {e['by_kind']['unigram']['rec@10']:.1%} | {e['by_kind']['bigram']['rec@10']:.1%} |")
    e = results[0]["eval"]
    for name, b in e["baselines"].items():
        lines.append(f"| {name} baseline | | | | | | | | | | {b['rec@1']:.1%} | {b['rec@10']:.1%} | {b['rec@20']:.1%} "
                     f"| {b['mrr']:.3f} | [{b['rec@10_lo']:.1%}, {b['rec@10_hi']:.1%}] "
                     f"| {b['by_kind']['unigram']['rec@10']:.1%} | {b['by_kind']['bigram']['rec@10']:.1%} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT / "runs" / "data_text"))
    ap.add_argument("--workdir", default=str(ROOT / "runs" / "table5"))
    ap.add_argument("--configs", default="baseline-d32,hash8-d128,hash40-d128,sampled-d32",
                    help=f"comma-separated, of {', '.join(CONFIGS)}")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--samples", type=int, default=4096, help="sampled head: ids drawn per step")
    ap.add_argument("--max-sets", type=int, default=300, help="test rows evaluated (15%% of their tokens masked)")
    ap.add_argument("--time-cap", type=float, default=0.0, help="seconds of training per model at most (a safety "
                    "cap: a model that hits it has fewer steps, reported as steps_done)")
    ap.add_argument("--resume", action="store_true", help="continue each model's newest checkpoint in WORKDIR "
                    "(same architecture) up to --steps / --time-cap in all, counting the training it already had")
    ap.add_argument("--val-fraction", type=float, default=0.0,
                    help="training rows held out of training (train.split_validation, seed 0): the rows "
                    "benchmarks/text/fusion_bench.py chooses its mix on; 0: none (every training row trains)")
    ap.add_argument("--name", default="table5")
    ap.add_argument("--rewrite", action="store_true", help="only rewrite NAME.md from NAME.json (no training)")
    args = ap.parse_args()
    if args.rewrite:
        saved = json.loads((ROOT / "benchmarks" / "results" / "text" / f"{args.name}.json").read_text())
        args = argparse.Namespace(**{**saved["settings"], "rewrite": True})
        report(saved["results"], args, time.time() - saved["total_s"], saved["load_before"], saved)
        return
    t0, load0 = time.time(), os.getloadavg()
    results = []
    for name in args.configs.split(","):  # results are written after every model (a cut run keeps them)
        results.append(run(name, args))
        report(results, args, t0, load0)


def verdict(results: list[dict]) -> str:
    """Which models the rec@10 intervals separate from the unigram-frequency list (computed, not written)."""
    base = results[0]["eval"]["baselines"].get("unigram")
    if not base:
        return ""
    lo, hi = base["rec@10_lo"], base["rec@10_hi"]
    same = [r["name"] for r in results if r["eval"]["rec@10_lo"] <= hi and r["eval"]["rec@10_hi"] >= lo]
    return (f"rec@10 interval overlapping the unigram-frequency baseline's [{lo:.1%}, {hi:.1%}]: "
            f"{', '.join(same) or 'none'}; above it: "
            f"{', '.join(r['name'] for r in results if r['eval']['rec@10_lo'] > hi) or 'none'}.")


def report(results: list[dict], args, t0: float, load0, saved: dict | None = None) -> None:
    e = results[0]["eval"]
    meta = json.loads((Path(args.data) / "meta.json").read_text())
    result = {"benchmark": "table5", "machine": machine_info() | {"torch_threads_children": 1},
              "settings": {k: v for k, v in vars(args).items()}, "data": {k: meta[k] for k in ("ids", "links", "sets")},
              "examples": e["examples"], "test_rows": e["rows"], "protocol": e["protocol"],
              "load_before": load0, "load_after": os.getloadavg(), "total_s": round(time.time() - t0, 1),
              "results": results, "fill_sentences": FILL}
    if saved:  # --rewrite: the run's own record, not this moment's
        result.update({k: saved[k] for k in ("machine", "load_after", "total_s")})
    md = ["# Table 4/5 at CPU scale: hashed vs unhashed masked LM on the 1M unigram+bigram vocabulary",
          "",
          f"{meta['ids']:,} ids (Wikispeedia + GCIDE + Brown, prepare-text defaults). Every model: {args.steps} steps of "
          f"{args.batch_size} rows "
          + (f"(or fewer: training capped at {args.time_cap:.0f} s per model, see the steps column) " if args.time_cap else "")
          + ("(resumed from the models already in the work directory: the steps and the cap count the training "
             "they had before) " if getattr(args, "resume", False) else "")
          + (f"({getattr(args, 'val_fraction', 0.0):.2%} of the training rows held out, never trained on: "
             "fusion_bench.py's validation) " if getattr(args, "val_fraction", 0.0) else "")
          + f"(segments of <= 128 tokens, 15% masked, 80/10/10, positions on), {args.layers} "
          f"layers, AdamW lr {args.lr} (warm-up {args.warmup}), one torch thread, each in its own process. "
          f"Evaluation: {e['examples']:,} masked tokens of {e['rows']} held-out test rows, the same for every "
          "model and baseline (masked in place, all fed as [MASK], nothing excluded); intervals resample rows.",
          ""] + table(results) + ["", verdict(results)] + [
          "", f"Load average (1/5/15 min) before {[round(x, 2) for x in load0]}, after "
              f"{[round(x, 2) for x in result['load_after']]}; per model: " + "; ".join(
              f"{r['name']} {[round(x, 2) for x in r['load_before']]} -> {[round(x, 2) for x in r['load_after']]}"
              for r in results) + ".", ""]
    md.append("## Fill in the blank (appendix E sentences)")
    md.append("")
    for i, sentence in enumerate(FILL):
        md.append(f"**{sentence}**")
        md.append("")
        for r in results:
            f = r["fills"][i]
            for j, b in enumerate(f["blanks"]):
                tag = f" [MASK{j + 1}]" if len(f["blanks"]) > 1 else ""
                md.append(f"- {r['name']}{tag}: " + " ".join(x["token"] for x in b["fillers"]))
        md.append("")
    write_results(ROOT / "benchmarks" / "results" / "text", args.name, result, md)


if __name__ == "__main__":
    main()
