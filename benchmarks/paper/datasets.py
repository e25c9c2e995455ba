"""The datasets of the paper benchmarks: where each raw file lives, how it is read, its one-time
preparation, and the evaluation examples every method is scored on.

Raw files come from the shared data folder (../shared/data beside the repository, or
$SUPERBLOOM_SHARED_DATA); prepared datasets go to runs/paper/data/ (git-ignored).

Protocol (paper sec. 3.1, superbloom/evaluate.py): 10% of the sets held out (prepare's seeded
split); from each held-out set one random segment of <= 32 ids and up to `TARGETS_PER_SET` of its
ids held out, each its own example with the rest of the segment as context (excluded from every
ranking). Targets unseen in training count as misses for every method.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import superbloom as sb
from superbloom.evaluate import Examples, make_examples

REPO = Path(__file__).resolve().parents[2]
DATA_ROOT = Path(os.environ.get("SUPERBLOOM_SHARED_DATA", REPO.parent / "shared" / "data"))
WORK = REPO / "runs" / "paper"  # prepared data, trained models, cached rankings
TARGETS_PER_SET = 5  # held-out ids per test set, each its own example
SEGMENT = 32  # ids per held-out segment
EVAL_SEED = 0


@dataclass(frozen=True)
class Source:
    path: str  # under DATA_ROOT
    read: sb.ReadConfig
    about: str
    header: str | None = None  # a first line to drop (checked, counted), for files with a header


SOURCES = {
    "wikispeedia": Source("wikispeedia/links.tsv", sb.ReadConfig("edges"),
                          "Wikispeedia: 4,604 Wikipedia pages, the links of a page form a set"),
    "fb15k237": Source("fb15k-237/train.txt.gz", sb.ReadConfig("edges", set_column=0, id_column=2, undirected=True),
                       "FB15k-237 train triples as neighbour sets (relation ignored, both directions)"),
    "beauty": Source("bert4rec_beauty/beauty.txt", sb.ReadConfig("lines"),
                     "BERT4Rec Amazon Beauty: the items of a user form a set (order ignored)"),
    "epinions": Source("epinions/epinions_ratings.tsv.gz", sb.ReadConfig("edges"),
                       "Epinions ratings: the items a user rated form a set (296K items, long tail)",
                       header="user\titem\tcategory\trating\thelpfulness\ttime"),
}


def source_file(name: str) -> Path:
    """The raw file of dataset `name` under DATA_ROOT, or exit with what is missing and where."""
    if name not in SOURCES:
        raise SystemExit(f"unknown dataset {name!r}; choose from {sorted(SOURCES)}")
    path = DATA_ROOT / SOURCES[name].path
    if not path.exists():
        raise SystemExit(f"dataset {name!r} needs {path}, which does not exist. The paper benchmarks read the "
                         f"shared datasets from ../shared/data beside the repository (see its README.md); "
                         f"set SUPERBLOOM_SHARED_DATA to use another folder.")
    return path


def strip_header(src: Path, dst: Path, header: str) -> dict:
    """Stream `src` (gzip or text) to `dst` without its header line, after checking the header."""
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rb") as f, open(dst.with_suffix(".tmp"), "wb") as g:
        first = f.readline().decode("utf-8", "replace").rstrip("\r\n")
        if first != header:
            raise SystemExit(f"{src}: expected the header line {header!r}, found {first!r}")
        shutil.copyfileobj(f, g, 16 << 20)
    dst.with_suffix(".tmp").rename(dst)
    return {"header_lines_dropped": 1, "header": header}


def dataset(name: str) -> sb.Dataset:
    """Dataset `name` prepared once (seed 0, 10% of the sets held out) under runs/paper/data/."""
    src, spec = source_file(name), SOURCES[name]
    out = WORK / "data" / name
    if (out / "meta.json").exists():
        return sb.Dataset(out)
    out.mkdir(parents=True, exist_ok=True)
    conversion = None
    if spec.header is not None:  # the reader takes '#' comments only: drop the header line first
        converted = WORK / "sources" / (name + ".tsv")
        converted.parent.mkdir(parents=True, exist_ok=True)
        conversion = strip_header(src, converted, spec.header)
        src = converted
    t0 = time.time()
    summary = sb.prepare(sb.PrepareConfig(str(src), str(out), spec.read, 0.1, 0), progress=False)
    if conversion:
        summary["conversion"] = conversion
        (out / "meta.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"prepared {name}: {summary['ids']:,} ids, {summary['train']['sets']:,} train / "
          f"{summary['test']['sets']:,} test sets ({time.time() - t0:.0f} s)")
    return sb.Dataset(out)


def examples(data: sb.Dataset) -> Examples:
    """The evaluation examples of a dataset: the same for the model and every baseline."""
    return make_examples(data.test, SEGMENT, TARGETS_PER_SET, EVAL_SEED)


def examples_tag(ex: Examples, *more) -> str:
    """A short key of the examples (and of `more`), naming the cached rankings made on them."""
    return hashlib.sha1(json.dumps([EVAL_SEED, len(ex.targets), int(ex.targets.sum()), *more])
                        .encode()).hexdigest()[:10]


def dataset_summary(name: str, data: sb.Dataset, ex: Examples) -> dict:
    """What a result file says about a dataset and its examples."""
    m = data.meta
    return {"dataset": name, "about": SOURCES[name].about, "ids": m["ids"], "train_sets": m["train"]["sets"],
            "test_sets": m["test"]["sets"], "train_links": m["train"]["links"],
            "mean_set_size": m["train"]["mean_set_size"], "examples": int(len(ex.targets)),
            "test_sets_used": int(len(np.unique(ex.set_rows))), "targets_unseen": int((ex.targets < 0).sum()),
            "conversion": m.get("conversion")}


def prepared(name: str) -> tuple[sb.Dataset, Examples, dict]:
    """Dataset `name` (prepared once), its evaluation examples, and their summary for a result file."""
    data = dataset(name)
    ex = examples(data)
    return data, ex, dataset_summary(name, data, ex)
