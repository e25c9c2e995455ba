"""A validation dataset carved from a prepared dataset's training sets: a fraction of them held out
(seeded), written as a dataset directory of its own, so that every choice (recipe, head setting,
baseline) is made on held-out *training* sets and the real test sets are scored once.

    val = hold_out(sb.Dataset("runs/data/beauty"), "runs/data/beauty-val", fraction=0.1, seed=1)

The new directory keeps the vocabulary (vocab.txt, the same id numbering), takes its counts from its
own training part only (the held-out sets must not leak into a popularity prior), and records
`validation_of` / `val_seed` in meta.json. Sets are whole-set held out (the "sets" split); set names
are not written (nothing ranks by them).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from .dataset import Dataset


def hold_out(data: Dataset, out: str | Path, fraction: float = 0.1, seed: int = 1,
             name: str | None = None) -> Dataset:
    """`data`'s training sets split in two: round(fraction x S) of them, drawn by a permutation of
    default_rng(seed), become the test sets of a new dataset at `out`; the rest its training sets.
    Written once: an existing `out` with a meta.json is returned as it is. `name` (default: data's
    directory name) is recorded as `validation_of`."""
    out = Path(out)
    if (out / "meta.json").exists():
        return Dataset(out)
    out.mkdir(parents=True, exist_ok=True)
    n = len(data.train)
    is_val = np.zeros(n, bool)  # (S,)
    is_val[np.random.default_rng(seed).permutation(n)[: int(round(fraction * n))]] = True
    for part, rows in (("train", np.flatnonzero(~is_val)), ("test", np.flatnonzero(is_val))):
        sets = data.train.subset(rows)
        np.save(out / f"{part}.ids.npy", np.asarray(sets.ids, np.int32))
        np.save(out / f"{part}.offsets.npy", sets.offsets)
        if part == "train":
            np.save(out / "counts.npy", np.bincount(np.asarray(sets.ids), minlength=data.n_ids).astype(np.int64))
    shutil.copy(data.path / "vocab.txt", out / "vocab.txt")
    meta = dict(data.meta, validation_of=name or data.path.name, val_seed=seed,
                train={"sets": int((~is_val).sum())}, test={"sets": int(is_val.sum())})
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")  # last: marks the directory complete
    return Dataset(out)
