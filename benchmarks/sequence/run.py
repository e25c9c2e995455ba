"""Sequence recommendation against the published full-ranking numbers (issue 12).

    /work/tools/benchlock .venv/bin/python -m benchmarks.sequence.run --datasets beauty --steps 3000

For each dataset: `prepare --split leave-one-out` (last id = test target, the one before =
validation target), train a next-item (causal, SASRec-style) or masked-sequence (BERT4Rec-style)
model for --steps steps with 1 torch thread, the BEST checkpoint picked by validation NDCG@10 on
the validation targets, then ONE evaluation on the test targets: full ranking over every id, the
user's history excluded (S3-Rec's convention; also the model without exclusion), popularity and
item co-occurrence (from the newest id) on the very same examples. Results are merged into
benchmarks/results/sequence.{json,md} (one entry per dataset and setting), with the machine, the
load average before and after, the steps and the seconds.

A hybrid-head run records its decomposition on the same users (issue 33): the network alone (mix 0),
the term alone (the chosen term and decay, no network) and the paired 95% intervals of HR@10 for
hybrid - network alone, hybrid - term alone and hybrid - each baseline (`paired_hr@10`).

`--terms-only` trains nothing (issue 33, the term at mix -> infinity): the transition term alone,
its decay chosen from DECAYS on the validation targets by NDCG@10 (as the hybrid chooses it; the
`transition` baseline of `eval --baselines` makes that choice, protocols.rank_baseline), then ranked once
on the test targets beside popularity, co-occurrence and EASE (where it fits), with
paired intervals of transition - each; written to results/sequence_decomposition.{json,md}.

Published HR@10 (leave-one-out, full ranking; S3-Rec table, arXiv 2508.06450 for eSASRec,
Klenitskiy & Vasilev 2023 for BERT4Rec's Beauty) are in PUBLISHED below.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

import superbloom as sb
from superbloom.model.batches import MaskConfig
from superbloom.evaluation.compare import paired
from superbloom.evaluation.evaluate import EvalConfig, evaluate
from superbloom.evaluation.metrics import target_ranks
from superbloom.evaluation.protocols import resolve as resolve_protocol
from superbloom.hashing.bloom import HashConfig
from superbloom.heads import PROPOSALS, head_config
from superbloom.heads.hybrid import TERMS as HYBRID_TERMS
from superbloom.model.encoder import ModelConfig
from superbloom.model.config import INIT_NAMES
from superbloom.training.optim import OptimConfig
from superbloom.training.sequence import DECAYS
from superbloom.inference.ensemble import Ensemble
from superbloom.storage.files import atomic_path
from superbloom.training.members import train_members
from superbloom.training.train import LoopConfig, TrainConfig, train

from ..datasets import DATASETS, key, own_folder, resolve
from ..datasets import prepare as prepare_dataset
from ..machine import machine_info, read_results, write_results

WORK = Path("runs/sequence")
RESULTS = Path("benchmarks/results")
FAMILY = "sequence"  # the registry's aliases for the names in results/sequence.json: "beauty" is S3-Rec's file
PUBLISHED = {  # HR@10, leave-one-out, full ranking (none for wikispeedia-paths)
    "beauty": {"SASRec": 0.0605, "S3-Rec": 0.0647, "eSASRec": 0.0928},
    "toys": {"SASRec": 0.0675, "S3-Rec": 0.0700, "eSASRec": 0.0939},
    "lastfm": {"SASRec": 0.0688, "S3-Rec": 0.0743},
    "bert4rec_beauty": {"BERT4Rec": 0.0338, "SASRec (full softmax)": 0.0533},
}
BAR = {"beauty": "SASRec", "toys": "SASRec", "lastfm": "SASRec", "bert4rec_beauty": "SASRec (full softmax)"}


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def prepared(name: str) -> Path:
    """Dataset `name` (the registry's, benchmarks/datasets.py) split leave-one-out under runs/sequence/data/;
    a path: your own folder prepared with --split leave-one-out, where it is."""
    out = own_folder(name) or WORK / "data" / name
    prepare_dataset(name, out, FAMILY, split="leave-one-out")
    return out


def source(name: str) -> str:
    """The raw file a result row names: the registry's, or your own prepared folder."""
    return name if own_folder(name) else DATASETS[resolve(name, FAMILY)].path


def config(name: str, data: Path, out: Path, args) -> TrainConfig:
    causal = args.objective == "next-item"
    settings = {"samples": args.samples} if args.head in ("sampled", "hybrid") else {}
    if args.head == "hybrid":
        settings.update(neighbours=args.neighbours, term=args.item_term)
    if args.proposal in PROPOSALS:  # a library setting (heads/config.py); "mixed" stays a probe (history.py)
        settings["proposal"] = args.proposal
    if args.label_smoothing:
        settings["label_smoothing"] = args.label_smoothing
    head = head_config(args.head, **settings)
    return TrainConfig(
        data=str(data), out=str(out), hash=HashConfig(alpha=args.alpha, m=args.m), head=head,
        model=ModelConfig(d=args.d, heads=args.heads, d_ff=4 * args.d, layers=args.layers, dropout=args.dropout,
                          attn_dropout=args.attn_dropout, positions=args.window, causal=causal,
                          norm_first=not args.post_ln),
        mask=MaskConfig(n=args.window, mask_rate=args.mask_rate), objective=args.objective,
        optim=OptimConfig(lr=args.lr, warmup=args.warmup, weight_decay=args.weight_decay),
        loop=LoopConfig(batch_size=args.batch_size, steps=args.steps, eval_every=args.eval_every,
                        time_budget=args.time_budget, ema=args.ema, seed=args.seed,
                        checkpoint_every=1e9, device="cpu"),
        init=args.init)


def extras(args) -> str:
    """The settings of this session's flags that differ from their defaults, for the setting name."""
    parts = [f"-neg{args.samples}" if args.head in ("sampled", "hybrid") and args.samples != 1024 else "",
             f"-nb{args.neighbours}" if args.head == "hybrid" else "",
             f"-{args.item_term}" if args.head == "hybrid" else "",  # (no term in session 6's names: ease / cosine)
             f"-attndrop{args.attn_dropout:g}" if args.attn_dropout else "",
             f"-ls{args.label_smoothing:g}" if args.label_smoothing else "",
             "-postLN" if args.post_ln else "", f"-h{args.heads}" if args.heads != 2 else "",
             f"-w{args.window}" if args.window != 50 else "", f"-wd{args.weight_decay:g}" if args.weight_decay else "",
             f"-ema{args.ema:g}" if args.ema != 0.999 else "", f"-warm{args.warmup}" if args.warmup != 200 else "",
             f"-{args.time_budget:g}s" if args.time_budget else "", f"-seed{args.seed}" if args.seed else "",
             f"-t{args.threads}" if args.threads != 1 else "", f"-init{args.init}" if args.init != "auto" else "",
             "-xh" if args.exclude_history else "", f"-q{args.proposal}" if args.proposal else "",
             f"-x{args.members}" if args.members > 1 else "",
             f"-p{'+'.join(args.member_proposals)}" if args.member_proposals else "", f"-{args.tag}" if args.tag else ""]
    return "".join(parts)


def run_one(name: str, args) -> dict:
    data_dir = prepared(name)
    setting = (f"{args.objective}-{args.head}-a{args.alpha}m{args.m}-d{args.d}L{args.layers}-lr{args.lr:g}"
               f"-drop{args.dropout:g}-b{args.batch_size}-{args.steps}steps" + extras(args))
    out = WORK / "models" / key(name) / setting
    cfg = config(name, data_dir, out, args)
    load_before = load_average()
    t0 = time.time()
    probe = contextlib.nullcontext()
    if args.exclude_history:  # a probe: each position's seen ids out of its negatives (history.py)
        from .history import history_excluded
        probe = history_excluded()
    elif args.proposal == "mixed":  # a probe: the hybrid's negatives from a mixed proposal (history.py)
        from .history import proposal
        probe = proposal(args.proposal)
    with probe:
        if args.members > 1:  # one ensemble folder (training/members.py): its weight chosen on held-out users
            train_members(cfg, args.members, progress=False, overwrite=True, proposals=args.member_proposals)
        else:
            train(cfg, progress=False, overwrite=True)
    train_s = time.time() - t0
    first = out / "member-0" if args.members > 1 else out  # an ensemble's validation curve: its first member's
    vals = [json.loads(x) for x in (first / "metrics.jsonl").read_text().splitlines() if "val_ndcg@10" in x]
    model, data = sb.load(out, device="cpu"), sb.Dataset(data_dir)
    # whose term and decay the row reports: an ensemble's term member (training/members.py: a hybrid head)
    head = model.term_member.model.head if isinstance(model, Ensemble) else model.model.head
    t0 = time.time()
    res = evaluate(model, data, EvalConfig(protocol="leave-one-out", split="test", context_len=args.window,
                                           baselines=tuple(args.baselines.split(",")) if args.baselines else ()),
                   progress=False)
    r = res.to_dict()
    free = evaluate(model, data, EvalConfig(protocol="leave-one-out", split="test", context_len=args.window,
                                            exclude_history=False, baselines=()), progress=False).to_dict()
    eval_s = time.time() - t0
    save_ranks(out / "ranks.test.npz", res.ranks)  # every method's rank per test user: paired comparisons later
    keys = ("hr@1", "hr@5", "hr@10", "hr@20", "ndcg@5", "ndcg@10", "ndcg@20", "mrr", "hr@10_lo", "hr@10_hi")
    pick = lambda d: {k: round(d[k], 4) for k in keys}  # noqa: E731
    return {
        "dataset": name, "setting": setting, "file": source(name), "users": r["examples"],
        "ids": data.n_ids, "targets_unseen": r["targets_unseen"], "targets_in_history": r["targets_in_history"],
        "model": pick(r), "model_no_exclusion": pick(free),
        "baselines": {b: pick(v) for b, v in r["baselines"].items() if "skipped" not in v},
        "published_hr@10": PUBLISHED.get(name, {}), "bar": BAR.get(name),
        "beats_bar": r["hr@10"] > PUBLISHED[name][BAR[name]] if name in BAR else None,
        "validation": [{k: v[k] for k in ("step", "val_hr@10", "val_ndcg@10")} for v in vals],
        "best_step": max(vals, key=lambda v: v["val_ndcg@10"])["step"] if vals else None,
        **({"item_mix": float(model.mix if isinstance(model, Ensemble) else head.mix),
            "item_decay": round(float(head.decay), 3),
            "item_term": r["head"].get("item_term") or r["head"]["term"]["item_term"], "model_network_only": pick(r["network_only"]),
            "model_term_only": pick(r["term_only"])}
           if "network_only" in r else {}),
        "paired_hr@10": paired_hr10(res.ranks, "model", res.groups),
        "session": args.session, "steps": args.steps, "steps_trained": vals[-1]["step"] if vals else None, "train_seconds": round(train_s, 1), "eval_seconds": round(eval_s, 1),
        "load_average_before": load_before, "load_average_after": load_average(),
        "train_config": cfg.to_dict(), "protocol": r["protocol"],
    }


def save_ranks(path: Path, ranks: dict) -> None:
    """{method: (E,) ranks} as one .npz, whole or not at all (a kill leaves no half-written file)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, **ranks)


def interval(d: dict | None, missing: str = "-") -> str:
    """A paired difference {diff, lo, hi} as `+0.0123 [+0.0045, +0.0201]` (`missing` where there is none)."""
    return f"{d['diff']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}]" if d else missing


def paired_hr10(ranks: dict, first: str, groups=None) -> dict:
    """{other method: {diff, lo, hi}}: HR@10 of `first` minus each other method of `ranks` ({method: (E,)
    ranks on the same users}), with the 95% bootstrap interval of the difference (users resampled)."""
    return {name: {k: round(v, 4) for k, v in paired(ranks[first], r, groups, "hr")["hr@10"].items()}
            for name, r in ranks.items() if name != first}


def terms_only(name: str, args) -> dict:
    """The transition term alone, no network (module docstring): decay chosen on the validation
    targets, then the test targets with the baselines, paired."""
    data = sb.Dataset(prepared(name))
    model_config = {"model": {"positions": args.window}}  # the contexts a model of --window positions gets
    entry = resolve_protocol("leave-one-out", data)
    t0 = time.time()
    load_before = load_average()
    cfg = EvalConfig(protocol="leave-one-out", split="test", context_len=args.window,
                     baselines=("transition", *(b for b in args.baselines.split(",") if b and b != "transition")))
    ex = entry.examples(data, cfg, model_config)
    ranks, skipped, chosen = {}, {}, {}
    for b in cfg.baselines:  # transition: its decay chosen on the validation targets (BaselineEntry.choose)
        why = entry.baseline_skipped(b, data)
        if why:
            skipped[b] = why
        else:
            ranks[b] = target_ranks(entry.rank_baseline(b, data, ex, cfg, chosen if b == "transition" else None),
                                    ex.targets)
    best = chosen["chosen"]
    validation = [{"decay": d, "val_ndcg@10": v} for d, v in best["tried"].items()]
    keys = ("hr@1", "hr@5", "hr@10", "hr@20", "ndcg@10", "mrr", "hr@10_lo", "hr@10_hi")
    return {"dataset": name, "file": source(name), "users": int(len(ex.targets)),
            "ids": data.n_ids, "targets_unseen": int((ex.targets < 0).sum()), "context_len": ex.contexts.shape[1],
            "transition_decay": best["decay"], "validation": validation, "how": best["how"],
            "methods": {m: {k: round(v, 4) for k, v in entry.summarize(r, ex).items() if k in keys}
                        for m, r in ranks.items()},
            "skipped": skipped, "paired_hr@10": paired_hr10(ranks, "transition"),
            "published_hr@10": PUBLISHED.get(name, {}), "seconds": round(time.time() - t0, 1),
            "load_average_before": load_before, "load_average_after": load_average()}


def terms_table(entries: list[dict]) -> list[str]:
    """One row per dataset: the transition term alone (no training) beside the baselines and the
    published numbers, with paired intervals of transition - each baseline."""
    lines = ["| dataset | users | transition alone HR@10 [95% CI] (decay) | NDCG@10 | popularity | co-occurrence | "
             "EASE | transition - co-occurrence [95% CI] | transition - EASE [95% CI] | published HR@10 | "
             "load before/after |", "|" + "---|" * 11]

    def diff(e, b):
        d = e["paired_hr@10"].get(b)
        return interval(d, e["skipped"].get(b, "-"))

    for e in entries:
        m, t = e["methods"], e["methods"]["transition"]
        hr = lambda b: f"{m[b]['hr@10']:.4f}" if b in m else "-"  # noqa: E731
        pub = ", ".join(f"{k} {v}" for k, v in e["published_hr@10"].items())
        lines.append(f"| {e['dataset']} | {e['users']:,} | {t['hr@10']:.4f} [{t['hr@10_lo']:.4f}, {t['hr@10_hi']:.4f}] "
                     f"({e['transition_decay']:g}) | {t['ndcg@10']:.4f} | {hr('popularity')} | {hr('cooccurrence')} | "
                     f"{hr('ease')} | {diff(e, 'cooccurrence')} | {diff(e, 'ease')} | {pub} | "
                     f"{e['load_average_before'][0]} / {e['load_average_after'][0]} |")
    return lines


def write_terms(saved: dict, name: str, rewrite: bool = False) -> None:
    """results/NAME.json and NAME.md of --terms-only: every entry, the machine."""
    md = ["# The transition term alone on the sequence datasets (issue 33)", "",
          "No training: the hybrid head's directed transition term (log(1 + how often, gap-discounted, an id "
          "follows another within 10 ids), 200 values per id, fitted on the training prefixes) ranks every id "
          "by its sum over the user's last 49 ids, each weighted decay ** age; the decay chosen from "
          f"{', '.join(f'{d:g}' for d in DECAYS)} on the validation targets by NDCG@10, then ONE ranking of the "
          "test targets (leave-one-out, full ranking, history excluded: the sequence benchmark's protocol and "
          "users). The baselines on the same users; paired 95% bootstrap intervals (users resampled). "
          "`python -m benchmarks.sequence.run --terms-only --baselines popularity,cooccurrence,ease`.",
          "", *terms_table(saved["entries"])]
    write_results(RESULTS, name, saved, md, rewrite=rewrite)


def table(entries: list[dict]) -> list[str]:
    """One row per (dataset, setting). `session`: as recorded, else "previous" for rows of the first
    session (no steps_trained recorded), "2" for the second's. Steps = steps actually trained (a time
    budget can stop a run early). A hybrid-head row (setting `...-hybrid-...`) gives its network alone
    (mix 0) and the item-item weight and recency decay chosen on validation."""
    lines = ["| dataset | setting | session | users | steps | train s | HR@1 | HR@5 | model HR@10 [95% CI] | HR@20 | "
             "NDCG@5 | NDCG@10 | NDCG@20 | MRR | HR@10 no excl. | hybrid: network alone HR@10 (term, mix, decay) | "
             "hybrid: term alone HR@10 | hybrid - term alone [95% CI] | hybrid - EASE [95% CI] | "
             "popularity HR@10 | co-occurrence HR@10 | EASE HR@10 | published HR@10 | beats bar? | load before/after |",
             "|" + "---|" * 25]
    for e in entries:
        b = e["baselines"]
        pub = ", ".join(f"{k} {v}" for k, v in e["published_hr@10"].items())
        m = e["model"]
        ease = f"{b['ease']['hr@10']:.4f}" if "ease" in b else "-"
        steps = e.get("steps_trained") or e["steps"]
        session = e.get("session") or ("2" if "steps_trained" in e else "previous")
        alone = (f"{e['model_network_only']['hr@10']:.4f} ({e.get('item_term', '-')}, {e['item_mix']:g}, "
                 f"{e['item_decay']:g})"
                 if "model_network_only" in e else "-")
        term = f"{e['model_term_only']['hr@10']:.4f}" if "model_term_only" in e else "-"
        vs = lambda k: interval(e.get("paired_hr@10", {}).get(k))  # noqa: E731
        lines.append(
            f"| {e['dataset']} | {e['setting']} | {session} | {e['users']:,} | "
            f"{steps} | {e['train_seconds']:.0f} | {m['hr@1']:.4f} | {m['hr@5']:.4f} | "
            f"{m['hr@10']:.4f} [{m['hr@10_lo']:.4f}, {m['hr@10_hi']:.4f}] | {m['hr@20']:.4f} | {m['ndcg@5']:.4f} | "
            f"{m['ndcg@10']:.4f} | {m['ndcg@20']:.4f} | {m['mrr']:.4f} | "
            f"{e['model_no_exclusion']['hr@10']:.4f} | {alone} | {term} | {vs('term_only')} | {vs('ease')} | {b.get('popularity', {}).get('hr@10', float('nan')):.4f} | "
            f"{b.get('cooccurrence', {}).get('hr@10', float('nan')):.4f} | {ease} | {pub} | "
            f"{'-' if e['beats_bar'] is None else 'yes' if e['beats_bar'] else 'no'} ({e['bar'] or 'none published'}) | "
            f"{e['load_average_before'][0]} / "
            f"{e['load_average_after'][0]} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="beauty,toys,lastfm,bert4rec_beauty",
                   help="comma-separated: names of benchmarks/datasets.py, or a path with a / to a folder "
                        "`superbloom prepare --split leave-one-out` wrote (your own data)")
    p.add_argument("--objective", default="next-item", choices=["next-item", "masked-sequence"])
    p.add_argument("--head", default="sampled")
    p.add_argument("--samples", type=int, default=1024, help="sampled / hybrid: negatives per step (hybrid 0: full)")
    p.add_argument("--neighbours", type=int, default=200, help="hybrid: item-item values per id")
    p.add_argument("--item-term", default="auto", choices=HYBRID_TERMS,
                   help="hybrid: the item-item term (auto: transition, directed, id -> the ids after it, for "
                        "these sequence objectives; ease; cooccurrence)")
    p.add_argument("--alpha", type=int, default=1)
    p.add_argument("--m", type=int, default=1)
    p.add_argument("--d", type=int, default=64)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--window", type=int, default=50, help="ids per training window = positions")
    p.add_argument("--mask-rate", type=float, default=0.2)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--eval-every", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init", default="auto", choices=INIT_NAMES,
                   help="the token embedding's start (auto: the objective's; cooccurrence: the co-occurrence "
                        "factors of the training sequences, the set model's start)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (training and evaluation)")
    p.add_argument("--attn-dropout", type=float, default=0.0, help="dropout on attention weights")
    p.add_argument("--label-smoothing", type=float, default=0.0, help="full head only")
    p.add_argument("--post-ln", action="store_true", help="post-LN blocks (SASRec's original) instead of pre-LN")
    p.add_argument("--ema", type=float, default=0.999, help="weight-average decay of the validated weights (0: off)")
    p.add_argument("--time-budget", type=float, default=0.0, help="stop training after this many seconds too")
    p.add_argument("--baselines", default="popularity,cooccurrence")
    p.add_argument("--name", default="sequence", help="results file stem in benchmarks/results/")
    p.add_argument("--tag", default="", help="appended to the setting name (a re-run kept beside an earlier row)")
    p.add_argument("--session", default="-", help="a label recorded with each row (which study or round ran it)")
    p.add_argument("--render", action="store_true", help="only rewrite results/NAME.md from results/NAME.json")
    p.add_argument("--exclude-history", action="store_true",
                   help="a probe: each position's seen ids out of its sampled negatives (benchmarks/sequence/history.py)")
    p.add_argument("--proposal", default="", choices=("", "uniform", "mixed"),
                   help="the hybrid head's sampled negatives from this proposal (uniform: the head's setting; "
                        "mixed, half uniform and half log-uniform: a probe, history.py)")
    p.add_argument("--members", type=int, default=1,
                   help=">= 2: train this many models as one ensemble folder (superbloom train --members)")
    p.add_argument("--member-proposals", type=lambda t: tuple(t.split(",")), default=(),
                   help="with --members: member i's sampled negatives from the i-th proposal, cycled "
                        "(superbloom train --member-proposals), e.g. log_uniform,uniform")
    p.add_argument("--terms-only", action="store_true",
                   help="no training: the transition term alone beside the baselines (results/NAME.json, NAME "
                        "defaulting to sequence_decomposition)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.terms_only and args.name == "sequence":
        args.name = "sequence_decomposition"
    render = write_terms if args.terms_only else write
    if args.render:
        render(read_results(RESULTS, args.name), args.name, rewrite=True)
        return
    for name in args.datasets.split(","):
        if args.terms_only:
            e = terms_only(name, args)
            print(json.dumps({k: e[k] for k in ("dataset", "transition_decay", "methods", "paired_hr@10", "seconds")}))
            saved = read_results(RESULTS, args.name) or {"entries": []}
            saved["entries"] = [x for x in saved["entries"] if x["dataset"] != name] + [e]
            saved["machine"] = machine_info()
            write_terms(saved, args.name)
            continue
        e = run_one(name, args)
        print(json.dumps({k: e[k] for k in ("dataset", "setting", "model", "baselines", "train_seconds",
                                            "eval_seconds", "load_average_before", "load_average_after")}))
        # read just before writing: runs in the two benchmark slots finish in any order
        saved = read_results(RESULTS, args.name) or {"entries": []}
        saved["entries"] = [x for x in saved["entries"] if (x["dataset"], x["setting"]) != (name, e["setting"])] + [e]
        saved["machine"] = machine_info()
        write(saved, args.name)


def write(saved: dict, name: str, rewrite: bool = False) -> None:
    """results/NAME.json and NAME.md: the table of every entry, the machine (what the runs found: docs/)."""
    md = ["# Sequence recommendation: leave-one-out, full ranking (issue 12)", "",
          "Test targets (the last id of each user), ranked against every id; the user's whole history "
          "excluded from the ranking (S3-Rec's convention; the model without exclusion in its own column). "
          "Targets never seen in the training prefixes count as misses for every method. BEST checkpoint "
          "by validation NDCG@10 on the second-to-last ids; the test targets were scored once per run (with "
          "and without exclusion), never used to choose anything. "
          "CPU; 1 torch thread unless the setting ends in -tN (N threads); `load` = 1-minute load average of "
          "the shared 2-core machine before / after (the machine is shared with other people's jobs: "
          "wall-clock seconds depend on that load). Head `full`: softmax over every id; `sampled`: "
          "sampled softmax with the log-Q correction (the setting's sample count in the JSON), full "
          "softmax at evaluation; `hybrid` (heads/hybrid.py): that network (full softmax, or -negN sampled "
          "negatives in training) plus mix x a sparse item-item term over the history, 200 values per id: "
          "settings ending in -transition, the directed transition term (log(1 + how often, gap-discounted, "
          "an id follows another within 10 ids)); others, EASE's largest weights (up to 25,000 ids; beyond, "
          "the co-occurrence cosine); fitted on the training prefixes, each history id weighted decay ** age (age 0 = newest); mix and decay chosen on the "
          "validation targets, the network alone (mix 0) in its own column.",
          "", *table(saved["entries"])]
    write_results(RESULTS, name, saved, md, rewrite=rewrite)


if __name__ == "__main__":
    main()
