"""ALS and item2vec as `eval` now runs them (settings chosen on held-out training sets) beside their defaults.

    flock /tmp/superbloom-cpu.lock .venv/bin/python -m benchmarks.quality.tuned_baselines \\
        --datasets wikispeedia,fb15k237,lastfm,wn18rr --name quality_tuned_baselines

For each dataset the harness's test examples (5 held-out ids per set, seed 0: the quality tables'
examples); the library's registry entries `als` and `item2vec` (tuned: evaluation/tuning.py, on 10% of
the training sets, never the test sets) and `als-untuned`, `item2vec-untuned` (the defaults) fitted on
the training sets; each row's rec@10 with its 95% interval (held-out sets resampled) and the paired
difference tuned - untuned. Beside them, as committed in quality_user_baselines.json (the same test
examples; not re-run here: its six-network models are not kept), the hybrid of six networks, its
networks alone and the grid-searched ALS and item2vec of that benchmark: unpaired, since their ranks
are not kept. Rows accumulate in NAME.json after each dataset (a killed run keeps what it finished).
"""
from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads OpenBLAS: implicit runs its own threads

import numpy as np  # noqa: E402

from benchmarks.machine import read_results, write_results  # noqa: E402
from benchmarks.quality.harness import RESULTS, examples, split_dataset  # noqa: E402
from superbloom.evaluation.baselines import fit_baseline  # noqa: E402
from superbloom.evaluation.compare import paired  # noqa: E402
from superbloom.evaluation.metrics import hits_at, mean_ci, target_ranks  # noqa: E402

FAMILIES = (("als", "als-untuned"), ("item2vec", "item2vec-untuned"))
COMMITTED = ("hybrid_x6", "hybrid_x6 network only", "als", "item2vec")  # quality_user_baselines.json's rows


def committed(name: str) -> dict:
    """The committed rows of quality_user_baselines.json for dataset `name`: method -> row."""
    path = RESULTS / "quality_user_baselines.json"
    rows = json.loads(path.read_text())["rows"] if path.exists() else []
    return {r["method"]: r for r in rows if r["dataset"] == name and r["method"] in COMMITTED}


def dataset_rows(name: str) -> list[dict]:
    test = split_dataset(name, "test")
    ex = examples(test)
    out, hits = [], {}
    for family in FAMILIES:
        for method in family:
            t0 = time.time()
            base = fit_baseline(method, test.train, test.n_ids)
            ranks = target_ranks(base.rank(ex.contexts, ex.contexts, 20), ex.targets)
            seconds = time.time() - t0
            hits[method] = ranks
            value, lo, hi = mean_ci(hits_at(ranks, 10), ex.set_rows)
            row = {"dataset": name, "ids": test.n_ids, "examples": int(len(ex.targets)), "method": method,
                   "rec@10": round(value, 4), "rec@10_lo": round(lo, 4), "rec@10_hi": round(hi, 4),
                   "seconds": round(seconds, 1)}
            if getattr(base, "chosen", None) is not None:
                row["chosen"] = base.chosen
            out.append(row)
            print(f"{name} {method}: rec@10 {value:.4f} [{lo:.4f}, {hi:.4f}] ({seconds:.0f} s) "
                  f"{row.get('chosen', {}).get('how', '')}", flush=True)
        tuned, untuned = family
        out[-2]["tuned - untuned"] = paired(hits[tuned], hits[untuned], ex.set_rows)["rec@10"]
    for method, r in committed(name).items():
        out.append({"dataset": name, "method": f"{method} (committed)", "rec@10": r["rec@10"],
                    "rec@10_lo": r.get("rec@10_lo"), "rec@10_hi": r.get("rec@10_hi"),
                    "setting": r.get("setting"), "examples": r.get("examples")})
    return out


def table(rows: list[dict]) -> list[str]:
    out = ["| dataset | method | settings | rec@10 [95% interval] | tuned - untuned (paired) | fit + tuning s |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        chosen = r.get("chosen") or {}
        settings = ", ".join(f"{k} {v}" for k, v in chosen.items() if k not in ("how", "tried", "tuning_seconds"))
        if "chosen" in r and not settings:
            settings = "the defaults chosen"
        if r.get("setting") is not None:
            settings = ", ".join(f"{k} {v}" for k, v in r["setting"].items()) or "default"
        ci = f" [{r['rec@10_lo']:.4f}, {r['rec@10_hi']:.4f}]" if r.get("rec@10_lo") is not None else ""
        d = r.get("tuned - untuned")
        diff = f"{d['diff']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}]" if d else ""
        out.append(f"| {r['dataset']} | {r['method']} | {settings} | {r['rec@10']:.4f}{ci} | {diff} | "
                   f"{r.get('seconds', '')} |")
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", default="wikispeedia,fb15k237,lastfm,wn18rr")
    p.add_argument("--name", default="quality_tuned_baselines")
    a = p.parse_args(argv)
    done = read_results(RESULTS, a.name) or {"rows": []}
    rows = [r for r in done["rows"] if r["dataset"] not in a.datasets.split(",")]
    for name in a.datasets.split(","):
        rows += dataset_rows(name)
        md = [f"# {__doc__.splitlines()[0]}", "", *table(rows)]
        write_results(RESULTS, a.name, {"rows": rows}, md)  # after each dataset
    print("\n".join(md))


if __name__ == "__main__":
    main()
