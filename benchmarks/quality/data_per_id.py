"""The network alone against EASE with fewer training sets, on the same held-out examples.

    python -m benchmarks.quality.data_per_id --datasets beauty-attributes,toys-attributes --fractions 1,0.3,0.1

Where the network alone beats EASE (S3-Rec's item-attribute sets: 8-17 training sets per id) and
where it trails it (the interaction sets: 0.3-1.7) differ in the kind of data and in how often
each id is seen. This holds the kind fixed: for each dataset of the harness (benchmarks/quality/
harness.py, its `--split`: val by default) a fraction of the training sets is kept (a permutation
of default_rng(SUBSAMPLE_SEED)), the held-out sets are the same, so every fraction ranks the same
examples. At each fraction the harness's recipe is trained (`--recipe`, default hybrid: its network
alone and term alone beside it) and EASE is fitted on the kept sets; the rows are the harness's,
with the paired intervals (network alone - EASE among them). Results: benchmarks/results/NAME.json
and NAME_table.md (`--name`, default quality_data_per_id).
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np

import superbloom as sb
from benchmarks.quality import harness

SUBSAMPLE_SEED = 2


def thinned(data: sb.Dataset, out: Path, fraction: float) -> sb.Dataset:
    """`data` with round(fraction x S) of its training sets kept (SUBSAMPLE_SEED) and its test sets
    as they are, written once at `out` (the same vocabulary; counts from the kept sets)."""
    if (out / "meta.json").exists():
        return sb.Dataset(out)
    out.mkdir(parents=True, exist_ok=True)
    n = len(data.train)
    keep = np.sort(np.random.default_rng(SUBSAMPLE_SEED).permutation(n)[: int(round(fraction * n))])
    sets = data.train.subset(keep)
    np.save(out / "train.ids.npy", np.asarray(sets.ids, np.int32))
    np.save(out / "train.offsets.npy", sets.offsets)
    np.save(out / "counts.npy", np.bincount(np.asarray(sets.ids), minlength=data.n_ids).astype(np.int64))
    for part in ("test.ids.npy", "test.offsets.npy", "vocab.txt"):
        shutil.copy(data.path / part, out / part)
    meta = dict(data.meta, thinned_from=data.path.name, thin_fraction=fraction, thin_seed=SUBSAMPLE_SEED,
                train={"sets": int(len(keep))}, test=data.meta.get("test", {}))
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")  # last: marks the directory complete
    return sb.Dataset(out)


def run(datasets: list[str], fractions: list[float], recipe: str, steps: int, split: str) -> list[dict]:
    rows = []
    for name in datasets:
        base = harness.split_dataset(name, split)
        ex = harness.examples(base)
        for f in fractions:
            label = name if f == 1 else f"{name}@{f:g}"
            data = base if f == 1 else thinned(base, harness.WORK / "data" / f"{name}-{split}-thin{f:g}", f)
            got = harness.run_on(label, split, data, ex, [recipe], steps, ("ease",))
            for r in got:
                r.update(fraction=f, train_sets=len(data.train), sets_per_id=round(len(data.train) / data.n_ids, 2))
            rows += got
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.quality.data_per_id", description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default="beauty-attributes,toys-attributes",
                   help="harness dataset names (default %(default)s)")
    p.add_argument("--fractions", default="1,0.3,0.1", help="fractions of the training sets kept (default %(default)s)")
    p.add_argument("--recipe", default="hybrid", choices=sorted(harness.RECIPES), metavar="RECIPE",
                   help="the harness recipe trained at each fraction (default %(default)s)")
    p.add_argument("--steps", type=int, default=2000, help="training steps (default %(default)s)")
    p.add_argument("--split", default="val", choices=("val", "test"), help="the harness split (default %(default)s)")
    p.add_argument("--name", default="quality_data_per_id", help="results file name (default %(default)s)")
    a = p.parse_args(argv)
    try:
        fractions = [float(x) for x in a.fractions.split(",") if x]
    except ValueError:
        fractions = []
    if not fractions or any(not 0 < f <= 1 for f in fractions):
        p.error(f"--fractions: comma-separated numbers in (0, 1], got {a.fractions!r}")
    harness.save(run([d for d in a.datasets.split(",") if d], fractions, a.recipe, a.steps, a.split), a.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
