"""The baselines a user would run at millions of ids (issue 29 item 1), in the project's own evaluation:
fit time, query time, peak memory and rec@1/10/20 (95% bootstrap intervals) on the same examples.

    .venv/bin/python -m benchmarks.scale.baselines data/synth --eval-sets 2000 --name synth
    .venv/bin/python -m benchmarks.scale.baselines data/synth --baselines cooc-count,als --threads 4

Baselines (superbloom/baselines.py registry): popularity (reference), cooc-count, cooc-idf, cooc-cosine
(cooccur_index.py), item2vec (item2vec.py, gensim; CBOW unless --skip-gram) and als (als.py,
implicit); the last two need `pip install 'superbloom[baselines]'` and are reported as skipped
without it. The examples are evaluate.make_protocol's for the dataset (held-out sets: one segment of
up to 32 ids per set, one target; leave-one-out: the user's history), --eval-sets of them, seeded, so
every baseline and any model evaluated with the same settings sees the very same.

Each baseline runs in its own fresh Python process (this script with --worker), so its peak RSS
(getrusage ru_maxrss) is its own: `peak_rss_gb` is the whole process (interpreter, NumPy, the
memory-mapped dataset pages it touched, the examples), `fit_rss_gb` the growth of the peak over the
RSS before fitting, up to the end of the fit, and `query_rss_gb` the further growth while ranking
(the per-batch temporaries). `query_s` is wall seconds per query, `query_cpu_s` CPU seconds per query (all
threads). Results: benchmarks/results/scale/NAME.{json,md}, with the machine and the load average.

Memory at the paper's size (5.3M ids, 462M training links, ~5M sets), estimated from each module's
data structures (see their docstrings), not run: cooc-* ~4.0 GB kept (two int32 CSRs of the links,
8 bytes per link, plus ~50 bytes per id), ~5 GB while building, +0.45 GB while ranking; item2vec
~2.9 GB kept, ~4 GB while training (gensim's two 5.3M x 64 float32 layers and its vocabulary);
als ~10 GB while fitting (the float32 confidence matrix and its transpose, 8 bytes per link each, and
the two factor tables), 1.4 GB kept. All within 24 GB.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = "popularity,cooc-count,cooc-idf,cooc-cosine,item2vec,als"
NEEDS = {"item2vec": "gensim", "als": "implicit"}  # optional dependencies ([baselines] extra)


def rss_gb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e9


def examples(data_dir: str, eval_sets: int, seed: int, targets_per_set: int = 1):
    from superbloom.data.dataset import Dataset
    from superbloom.evaluation.evaluate import EvalConfig
    from superbloom.evaluation.protocols import resolve

    data = Dataset(data_dir)
    cfg = EvalConfig(seed=seed, max_sets=eval_sets, targets_per_set=targets_per_set)
    drawer = resolve("auto", data).drawer(cfg, {})  # the evaluation's own example drawer (protocol registry)
    return data, drawer, drawer.examples(data)


def settings(text: str, cls) -> dict:
    """--als / --item2vec "field=value,field=value" -> {field: value} typed as `cls`'s (a dataclass) defaults."""
    import dataclasses

    fields = {f.name: f for f in dataclasses.fields(cls)}
    out = {}
    for part in [p for p in (text or "").split(",") if p]:
        name, _, value = part.partition("=")
        if name not in fields:
            raise SystemExit(f"{part!r}: {cls.__name__} has no field {name!r} (fields: {', '.join(fields)})")
        kind = type(fields[name].default)
        out[name] = (value.lower() in ("1", "true", "yes")) if kind is bool else kind(value)
    return out


def _item2vec(data, args):
    from superbloom.evaluation.item2vec import Item2Vec, Item2VecConfig
    return Item2Vec(data.train, data.n_ids, Item2VecConfig(**{"sg": args.skip_gram, "workers": args.threads,
                                                              **settings(args.item2vec, Item2VecConfig)}))


def _als(data, args):
    from superbloom.evaluation.als import ALS, ALSConfig
    return ALS(data.train, data.n_ids, ALSConfig(**{"threads": args.threads, "confidence": args.als_confidence,
                                                    **settings(args.als, ALSConfig)}))


class _Popularity:
    """baselines.Popularity behind rank(contexts, exclude, k) (it ranks without the context)."""

    def __init__(self, data, args):
        from superbloom.evaluation.baselines import Popularity
        self.base = Popularity(data.train, data.n_ids)

    def rank(self, contexts, exclude, k):
        return self.base.rank(contexts, contexts if exclude is None else np.concatenate([contexts, exclude], 1), k)


def _sansa(data, args):
    from superbloom.evaluation.baselines import Sansa
    given = dict(p.partition("=")[::2] for p in args.sansa.split(",") if p)
    return Sansa(data.train, data.n_ids, **{k: (v if k == "ordering" else float(v)) for k, v in given.items()})


SETTINGS = {"item2vec": _item2vec, "als": _als, "popularity": _Popularity, "sansa": _sansa}  # fits with this script's flags


def fit(name: str, data, args):
    """The fitted baseline `name`: with this script's settings where it has some, else the registry's defaults."""
    from superbloom.evaluation.baselines import BASELINES

    return SETTINGS[name](data, args) if name in SETTINGS else BASELINES[name].fit(data.train, data.n_ids)


def worker(args) -> None:
    """One baseline in this process: fit, rank, write ranks (.npy) and timings (.json) to args.out."""
    import torch

    torch.set_num_threads(args.threads)  # the fit and the ranking on --threads (BLAS too: run_one's environment)
    data, _, ex = examples(args.data, args.eval_sets, args.seed, args.targets_per_set)
    rss0 = rss_gb()
    t, c = time.perf_counter(), time.process_time()
    base = fit(args.worker, data, args)
    fit_s, fit_cpu = time.perf_counter() - t, time.process_time() - c
    fit_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KB on Linux
    t, c = time.perf_counter(), time.process_time()
    # every id never to rank: the context and the protocol's own (the dense baselines exclude only these)
    never = ex.contexts if ex.exclude is None else np.concatenate([ex.contexts, ex.exclude], 1)
    top = base.rank(ex.contexts, never, args.depth)
    query_s, query_cpu = time.perf_counter() - t, time.process_time() - c
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KB on Linux
    np.save(Path(args.out) / "ranked.npy", top)
    e = max(1, len(ex.targets))
    (Path(args.out) / "timing.json").write_text(json.dumps({
        "fit_s": round(fit_s, 3), "fit_cpu_s": round(fit_cpu, 3), "query_s": query_s / e, "query_cpu_s": query_cpu / e,
        "peak_rss_gb": round(peak, 3), "fit_rss_gb": round(fit_peak - rss0, 3),
        "query_rss_gb": round(peak - fit_peak, 3)}))


def run_one(name: str, args) -> dict:
    if name in NEEDS:
        import importlib.util
        if importlib.util.find_spec(NEEDS[name]) is None:
            return {"skipped": f"{NEEDS[name]} is not installed (pip install 'superbloom[baselines]')"}
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "benchmarks.scale.baselines", args.data, "--worker", name, "--out", tmp,
               "--eval-sets", str(args.eval_sets), "--seed", str(args.seed), "--depth", str(args.depth),
               "--targets-per-set", str(args.targets_per_set),
               "--threads", str(args.threads), "--als-confidence", args.als_confidence, "--als", args.als,
               "--item2vec", args.item2vec, "--sansa", args.sansa] + (["--skip-gram"] if args.skip_gram else [])
        env = dict(os.environ, **{v: str(args.threads) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            return {"failed": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
        timing = json.loads((Path(tmp) / "timing.json").read_text())
        return timing | {"_ranked": np.load(Path(tmp) / "ranked.npy")}


def main():
    from superbloom.cli.flags import POS_INT

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="a prepared dataset directory (superbloom prepare)")
    ap.add_argument("--eval-sets", type=int, default=2000, help="held-out sets / users evaluated (0: all)")
    ap.add_argument("--baselines", default=DEFAULT, help=f"comma-separated (default {DEFAULT})")
    ap.add_argument("--seed", type=int, default=0, help="the examples' seed")
    ap.add_argument("--targets-per-set", type=POS_INT, default=1, help="held-out ids per set, each its own example")
    ap.add_argument("--depth", type=POS_INT, default=20)
    ap.add_argument("--threads", type=POS_INT, default=1, help="item2vec's gensim workers and implicit's threads")
    ap.add_argument("--skip-gram", action="store_true", help="item2vec: skip-gram instead of CBOW")
    ap.add_argument("--als-confidence", choices=("bm25", "plain"), default="bm25",
                    help="als: BM25-weighted confidences (implicit's lastfm example) or the binary incidence")
    ap.add_argument("--als", default="", help="als: more ALSConfig settings, e.g. factors=128,alpha=10,confidence=plain "
                    "(the settings chosen on a validation split: benchmarks/results/quality_user_baselines.json)")
    ap.add_argument("--item2vec", default="", help="item2vec: more Item2VecConfig settings, e.g. epochs=30")
    ap.add_argument("--sansa", default="", help="sansa: its fit_sansa settings, e.g. l2=20,density=2e-5 (the registry's "
                    "defaults otherwise)")
    ap.add_argument("--name", default="baselines")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "results" / "scale"),
                    help="folder of NAME.json and NAME.md (default benchmarks/results/scale)")
    ap.add_argument("--ranks-dir", help="also write each baseline's per-example target ranks to DIR/NAME.npz "
                    "(targets, set_rows, ranks): time_to_quality.py pairs them with a model's on the same examples")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)

    from superbloom.evaluation.metrics import summarize_ci, target_ranks

    from ..machine import machine_info, machine_line, write_results

    load0 = os.getloadavg()
    data, protocol, ex = examples(args.data, args.eval_sets, args.seed, args.targets_per_set)
    rows, md = {}, []
    for name in [b for b in args.baselines.split(",") if b]:
        r = run_one(name, args)
        if "_ranked" in r:
            ranks = target_ranks(r.pop("_ranked"), ex.targets)
            if args.ranks_dir:
                Path(args.ranks_dir).mkdir(parents=True, exist_ok=True)
                np.savez(Path(args.ranks_dir) / f"{name}.npz", targets=ex.targets, set_rows=ex.set_rows, ranks=ranks)
            r = summarize_ci(ranks, ex.set_rows) | r
        rows[name] = r
        print(name, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}, flush=True)
    result = {"data": str(args.data), "n_ids": data.n_ids, "train_sets": len(data.train),
              "train_links": int(data.train.offsets[-1]), "examples": int(len(ex.targets)),
              "targets_unseen": int((ex.targets < 0).sum()), "protocol": protocol.describe() | {"depth": args.depth},
              "threads": args.threads, "item2vec": "skip-gram" if args.skip_gram else "cbow", "als_confidence": args.als_confidence,
              "als_settings": args.als, "item2vec_settings": args.item2vec,
              "sansa_settings": args.sansa,
              "baselines": rows, "machine": machine_info(), "loadavg_before": load0, "loadavg_after": os.getloadavg()}
    md.append(f"# Baselines at scale: {args.name}\n")
    md.append(f"{result['data']}: {data.n_ids:,} ids, {len(data.train):,} training sets, "
              f"{result['train_links']:,} training links; {result['examples']:,} examples "
              f"({result['targets_unseen']} targets unseen in training), context ids excluded; "
              f"{args.threads} thread(s).\n")
    md.append("| baseline | rec@1 | rec@10 [95%] | rec@20 | fit s | query ms | query CPU ms | peak RSS GB | fit RSS GB | query RSS GB |")
    md.append("|---|---|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        if "rec@10" not in r:
            md.append(f"| {name} | {r.get('skipped') or r.get('failed')} |||||||||")
            continue
        md.append(f"| {name} | {r['rec@1']:.4f} | {r['rec@10']:.4f} [{r['rec@10_lo']:.4f}, {r['rec@10_hi']:.4f}] | "
                  f"{r['rec@20']:.4f} | {r['fit_s']:.2f} | {1e3 * r['query_s']:.2f} | {1e3 * r['query_cpu_s']:.2f} | "
                  f"{r['peak_rss_gb']:.2f} | {r['fit_rss_gb']:.2f} | {r['query_rss_gb']:.2f} |")
    md.append("")
    md.append("Each baseline in its own process: peak RSS is that process's (interpreter and examples included), "
              "fit RSS the growth of its peak from just before the fit to the fit's end, query RSS the further growth while ranking. " + machine_line(result["machine"]) +
              f" Load average before/after: {load0[0]:.2f} / {result['loadavg_after'][0]:.2f}.")
    write_results(Path(args.results), args.name, result, md)
    print("\n".join(md))


if __name__ == "__main__":
    main()
