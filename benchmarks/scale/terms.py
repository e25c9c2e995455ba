"""The closed-form item-item terms side by side: EASE on each id's neighbourhood (heads/local_ease.py),
dense EASE where it fits (its full weights and the hybrid's 200-largest term), the co-occurrence cosine
term and SANSA (the [sansa] extra), each setting chosen on validation sets carved from the training
sets, all on the same held-out test examples, with paired 95% intervals, fit seconds and peak memory.

    .venv/bin/python -m benchmarks.scale.terms runs/term/data/beauty-s3rec --name terms_beauty
    .venv/bin/python -m benchmarks.scale.terms DATA --methods local-ease,cooc-term --local-grid 64:50:count

Validation: train.split_validation's carve of the training sets (10%, at most 2,000 sets, seed 0),
one segment of up to 32 ids and one target per set (the test protocol's); every method is fitted on
the training sets less those, once per setting, and the setting of best validation rec@10 (ties:
the first) is the one reported on the test examples (--eval-sets held-out sets, seed 0): the model
fitted for validation is the one tested (no refit). Each fit runs in its own child process
(--worker): fit_s is its wall time for the fit alone, peak_rss_gb the child's peak RSS (the dataset
and examples included), measured by os.wait4. One thread (torch, BLAS). Each dataset's result goes to
--results (runs/terms/NAME.{json,md}); `--report NAME` writes them as one table,
benchmarks/results/scale/NAME.{json,md}, with the machine and the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DEPTH = 20


def _split(data):
    from superbloom.evaluation.protocols import make_examples
    from superbloom.training.train import split_validation

    fit_rows, val_rows = split_validation(data.train, 0.1, 0)
    val = make_examples(data.train.subset(val_rows), 32, 1, 0)
    return data.train.subset(fit_rows), val


def _csr_ranker(indptr, cols, values, n):
    import torch
    from superbloom.heads.term_sums import term_topk

    ip, c, v = (torch.from_numpy(np.ascontiguousarray(a)) for a in (np.asarray(indptr, np.int64),
                                                                  np.asarray(cols, np.int64), np.asarray(values, np.float32)))

    def rank(contexts, exclude, k):
        ctx = torch.from_numpy(np.asarray(contexts, np.int64))
        ctx = ctx.masked_fill((ctx < 0) | (ctx >= n), -1)
        return term_topk(ip, c, v, n, ctx, 1.0, k, torch.from_numpy(np.asarray(exclude, np.int64))).ids.numpy()
    return rank


def fit(method: str, setting: dict, train, n: int) -> dict:
    """-> {label: rank(contexts, exclude, k)}: the rankers one fit gives (dense EASE: its full weights and its term)."""
    if method == "local-ease":
        from superbloom.heads.local_ease import local_ease
        return {method: _csr_ranker(*local_ease(train, n, progress=False, **setting), n)}
    if method == "cooc-term":
        from superbloom.heads.neighbours import cooccurrence_neighbours
        return {method: _csr_ranker(*cooccurrence_neighbours(train, n, setting.get("neighbours", 200)), n)}
    if method == "ease":
        from superbloom.evaluation.baselines import Ease
        from superbloom.heads.itemitem import largest_pattern
        base = Ease(train, n, setting.get("lam", 100.0))
        indptr, cols = largest_pattern(base.b, 200)
        values = base.b[np.repeat(np.arange(n), np.diff(indptr)), cols]
        return {"ease": base.rank, "ease-term": _csr_ranker(indptr, cols, values, n)}
    if method == "sansa":
        from superbloom.evaluation.baselines import Sansa
        return {method: Sansa(train, n, **setting).rank}
    raise SystemExit(f"unknown method {method!r}")


def worker(args) -> None:
    import torch
    from threadpoolctl import threadpool_limits
    import superbloom as sb
    from superbloom.evaluation.metrics import target_ranks
    from superbloom.evaluation.protocols import make_examples

    torch.set_num_threads(1)
    data = sb.Dataset(args.data)
    train, val = _split(data)
    test = make_examples(data.test, 32, 1, 0, args.eval_sets)
    with threadpool_limits(limits=1):
        t0, c0 = time.perf_counter(), time.process_time()
        rankers = fit(args.worker, json.loads(args.setting), train, data.n_ids)
        fit_s, fit_cpu = time.perf_counter() - t0, time.process_time() - c0
        out, q = {}, {}
        for label, rank in rankers.items():
            t1 = time.perf_counter()
            out[label + "/test"] = target_ranks(rank(test.contexts, test.excluded, DEPTH), test.targets)
            q[label] = (time.perf_counter() - t1) / max(1, len(test.targets))
            out[label + "/val"] = target_ranks(rank(val.contexts, val.excluded, DEPTH), val.targets)
    np.savez(Path(args.out) / "ranks.npz", **out, test_targets=test.targets, test_rows=test.set_rows)
    (Path(args.out) / "info.json").write_text(json.dumps({"fit_s": round(fit_s, 2), "fit_cpu_s": round(fit_cpu, 2),
                                                          "query_s": {k: round(v, 5) for k, v in q.items()}}))


def run_one(method: str, setting: dict, args) -> dict:
    with tempfile.TemporaryDirectory(prefix="terms_") as tmp:
        cmd = [sys.executable, "-m", "benchmarks.scale.terms", args.data, "--worker", method, "--setting",
               json.dumps(setting), "--out", tmp, "--eval-sets", str(args.eval_sets)]
        load0 = os.getloadavg()[0]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1"))
        _, status, ru = os.wait4(proc.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        row = {"method": method, "setting": setting, "exit": code, "peak_rss_gb": round(ru.ru_maxrss / 1e6, 2),
               "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2)}
        if code != 0:
            return row
        row.update(json.loads((Path(tmp) / "info.json").read_text()))
        with np.load(Path(tmp) / "ranks.npz") as z:
            row["_ranks"] = {k: z[k] for k in z.files}
        return row


def rec(ranks: np.ndarray, k: int = 10) -> float:
    return float(((ranks > 0) & (ranks <= k)).mean()) if len(ranks) else 0.0


def grids(args, n_ids: int) -> dict[str, list[dict]]:
    from superbloom.heads.itemitem import EASE_MAX_IDS

    local = [dict(zip(("k", "lam", "by", "lists"), (int(p[0]), float(p[1]), p[2], int(p[3]) if len(p) > 3 else None)))
             for p in (s.split(":") for s in args.local_grid.split(","))]
    out = {"local-ease": local, "cooc-term": [{"neighbours": 200}],
           "ease": [{"lam": float(x)} for x in args.ease_lams.split(",")] if n_ids <= EASE_MAX_IDS else [],
           "sansa": [dict(zip(("l2", "density"), (float(a), float(b)))) for a, b in
                     (s.split(":") for s in args.sansa_grid.split(","))]}
    return {m: out[m] for m in args.methods.split(",")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", help="a prepared dataset folder (held-out sets)")
    ap.add_argument("--name", default=None, help="results name: RESULTS/NAME.{json,md}")
    ap.add_argument("--results", default=str(ROOT / "runs" / "terms"),
                    help="where each dataset's result goes (default runs/terms)")
    ap.add_argument("--report", default=None, metavar="NAME",
                    help="write benchmarks/results/scale/NAME.{json,md}: every dataset's result in --results, one table")
    ap.add_argument("--methods", default="local-ease,ease,cooc-term,sansa")
    ap.add_argument("--local-grid", default="32:50:count,64:50:cosine:128,64:200:cosine:128,128:50:cosine:128",
                    help="local EASE settings k:lam:by[:lists], comma separated")
    ap.add_argument("--ease-lams", default="30,100,300", help="dense EASE's lambdas tried")
    ap.add_argument("--sansa-grid", default="10:0.005,100:0.005,100:0.02", help="SANSA l2:target density")
    ap.add_argument("--eval-sets", type=int, default=2000, help="held-out test sets (one example each)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--setting", default="{}", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if args.report:
        return report(Path(args.results), args.report)
    if not args.data:
        ap.error("give a prepared dataset folder (or --report NAME)")
    import superbloom as sb
    from superbloom.evaluation.compare import paired
    from superbloom.evaluation.metrics import bootstrap_ci
    from ..machine import machine_info, write_results

    data = sb.Dataset(args.data)
    name = args.name or "terms_" + Path(args.data).name
    load0 = os.getloadavg()
    tried, best = [], {}
    for method, settings in grids(args, data.n_ids).items():
        for setting in settings:
            row = run_one(method, setting, args)
            tried.append(row)
            if row["exit"] != 0:
                print(f"{method} {setting}: exit {row['exit']} (peak {row['peak_rss_gb']} GB)", flush=True)
                continue
            for label in [k[:-4] for k in row["_ranks"] if k.endswith("/val")]:
                v = rec(row["_ranks"][label + "/val"])
                print(f"{label} {setting}: val rec@10 {v:.4f}, test {rec(row['_ranks'][label + '/test']):.4f}, "
                      f"fit {row['fit_s']} s, peak {row['peak_rss_gb']} GB", flush=True)
                if label not in best or v > best[label][0]:
                    best[label] = (v, row)
    if not best:
        raise SystemExit("no method ran")
    first = next(iter(best.values()))[1]["_ranks"]
    rows_groups = first["test_rows"]
    table = []
    for label, (v, row) in best.items():
        r = row["_ranks"][label + "/test"]
        lo, hi = bootstrap_ci(((r > 0) & (r <= 10)).astype(float), groups=rows_groups)
        table.append({"method": label, "setting": row["setting"], "val_rec@10": round(v, 4), "rec@10": round(rec(r), 4),
                      "lo": round(lo, 4), "hi": round(hi, 4), "rec@20": round(rec(r, 20), 4), "fit_s": row["fit_s"],
                      "fit_cpu_s": row["fit_cpu_s"], "query_ms": round(1000 * row["query_s"][label], 2),
                      "peak_rss_gb": row["peak_rss_gb"], "load_before": row["load_before"], "load_after": row["load_after"]})
    ref = "local-ease" if "local-ease" in best else table[0]["method"]
    ref_ranks = best[ref][1]["_ranks"][ref + "/test"]
    for t in table:
        if t["method"] != ref:
            d = paired(ref_ranks, best[t["method"]][1]["_ranks"][t["method"] + "/test"], rows_groups)["rec@10"]
            t[f"{ref}_minus"] = {k: round(x, 4) for k, x in d.items()}
    result = {"data": args.data, "n_ids": data.n_ids, "train_sets": len(data.train), "test_examples": int(len(ref_ranks)),
              "depth": DEPTH, "table": table,
              "tried": [{k: v for k, v in r.items() if k != "_ranks"} |
                        ({"val_rec@10": {lab[:-4]: round(rec(x), 4) for lab, x in r["_ranks"].items() if lab.endswith("/val")}}
                         if "_ranks" in r else {}) for r in tried],
              "machine": machine_info(), "loadavg_before": load0, "loadavg_after": os.getloadavg()}
    md = [f"# Closed-form item-item terms: {Path(args.data).name} ({data.n_ids:,} ids)", "",
          f"{len(ref_ranks):,} held-out test examples (one per set, seed 0); every setting chosen by rec@10 on "
          f"validation sets carved from the training sets; one thread. `python -m benchmarks.scale.terms {args.data}`.", "",
          f"| method | setting | val rec@10 | test rec@10 [95%] | {ref} − it [95%] | fit s (CPU s) | query ms | peak GB |",
          "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for t in table:
        d = t.get(f"{ref}_minus")
        dtxt = f"{d['diff']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}]" if d else "—"
        md.append(f"| {t['method']} | {json.dumps(t['setting'])} | {t['val_rec@10']:.4f} | {t['rec@10']:.4f} "
                  f"[{t['lo']:.4f}, {t['hi']:.4f}] | {dtxt} | {t['fit_s']} ({t['fit_cpu_s']}) | {t['query_ms']} | "
                  f"{t['peak_rss_gb']} |")
    failed = [r for r in tried if r["exit"] != 0]
    md += ["", "Every setting tried (validation rec@10): " + "; ".join(
        f"{r['method']} {json.dumps(r['setting'])} " + (", ".join(f"{lab[:-4]} {rec(x):.4f}" for lab, x in r["_ranks"].items()
                                                          if lab.endswith("/val")) if "_ranks" in r else f"exit {r['exit']}")
        for r in tried) + "."]
    if failed:
        md += ["", "Failed: " + "; ".join(f"{r['method']} {json.dumps(r['setting'])}: exit {r['exit']}, peak "
                                         f"{r['peak_rss_gb']} GB" for r in failed)]
    md += ["", f"Load average before/after: {load0[0]:.2f} / {os.getloadavg()[0]:.2f} (each fit's own in the JSON)."]
    write_results(Path(args.results), name, result, md)
    print("\n".join(md))


def report(results: Path, name: str) -> None:
    """One table of every dataset's result in `results` (smallest vocabulary first), each row with its
    own machine load; -> benchmarks/results/scale/NAME.{json,md}."""
    from ..machine import write_results

    runs = sorted((json.loads(p.read_text()) for p in results.glob("*.json")), key=lambda r: r["n_ids"])
    if not runs:
        raise SystemExit(f"no results in {results}")
    md = ["# Closed-form item-item terms, side by side", "",
          "Each dataset: test rec@10 on its held-out sets (one example each, seed 0) of every term with the setting "
          "chosen by rec@10 on validation sets carved from the training sets (10%, at most 2,000), fitted on the "
          "training sets less those; paired differences local-ease − method (95% bootstrap over held-out sets); "
          "fit seconds and peak RSS of the fit's own process, one thread, with the load average around it "
          "(the machine is shared: wall seconds under load). ease: dense EASE's full weights; ease-term: its 200 "
          "largest per row (the hybrid's term); cooc-term: the cosine on each id's 200 most frequent co-occurring "
          "ids; sansa: SANSA (ICF, one UMR scan and finetune step). `python -m benchmarks.scale.terms DATA`, "
          "then `--report`.", "",
          "| dataset | ids | method | setting (validation) | test rec@10 [95%] | local-ease − it [95%] | fit s (CPU s) | peak GB | load |",
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        for t in r["table"]:
            d = t.get("local-ease_minus")
            dtxt = f"{d['diff']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}]" if d else "—"
            md.append(f"| {Path(r['data']).name} | {r['n_ids']:,} | {t['method']} | {json.dumps(t['setting'])} "
                      f"(val {t['val_rec@10']:.4f}) | {t['rec@10']:.4f} [{t['lo']:.4f}, {t['hi']:.4f}] | {dtxt} | "
                      f"{t['fit_s']} ({t['fit_cpu_s']}) | {t['peak_rss_gb']} | {t['load_before']}–{t['load_after']} |")
        failed = [x for x in r["tried"] if x["exit"] != 0]
        if failed:
            md.append(f"| {Path(r['data']).name} | | failed | " + "; ".join(
                f"{x['method']} {json.dumps(x['setting'])}: exit {x['exit']}, peak {x['peak_rss_gb']} GB" for x in failed)
                + " | | | | | |")
    for r in runs:  # the interval under the names the results page reads (rec@10_lo / rec@10_hi)
        r["dataset"] = Path(r["data"]).name
        for t in r["table"]:
            t["rec@10_lo"], t["rec@10_hi"] = t["lo"], t["hi"]
    write_results(ROOT / "benchmarks" / "results" / "scale", name, {"datasets": runs}, md)
    print("\n".join(md))


if __name__ == "__main__":
    main()
