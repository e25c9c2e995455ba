"""The datasets of the paper benchmarks (the shared registry, benchmarks/datasets.py, prepared once
under runs/paper/data/) and the evaluation examples every method is scored on.

The paper scripts call the BERT4Rec Beauty file "beauty" (their committed results do): the
registry's alias for "beauty-bert4rec" in the "paper" family.

Protocol (paper sec. 3.1, superbloom/evaluate.py): 10% of the sets held out (prepare's seeded
split); from each held-out set one random segment of <= 32 ids and up to `TARGETS_PER_SET` of its
ids held out, each its own example with the rest of the segment as context (excluded from every
ranking). Targets unseen in training count as misses for every method.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np

import superbloom as sb
from superbloom.evaluation.evaluate import Examples, make_examples

from ..datasets import DATASETS, REPO, resolve
from ..datasets import prepare as prepare_dataset

FAMILY = "paper"  # the registry's aliases for the names in results/paper/
WORK = REPO / "runs" / "paper"  # prepared data, trained models, cached rankings
TARGETS_PER_SET = 5  # held-out ids per test set, each its own example
SEGMENT = 32  # ids per held-out segment
EVAL_SEED = 0


def dataset(name: str) -> sb.Dataset:
    """Dataset `name` prepared once (seed 0, 10% of the sets held out) under runs/paper/data/."""
    return prepare_dataset(name, WORK / "data" / name, FAMILY)


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
    return {"dataset": name, "about": DATASETS[resolve(name, FAMILY)].about, "ids": m["ids"], "train_sets": m["train"]["sets"],
            "test_sets": m["test"]["sets"], "train_links": m["train"]["links"],
            "mean_set_size": m["train"]["mean_set_size"], "examples": int(len(ex.targets)),
            "test_sets_used": int(len(np.unique(ex.set_rows))), "targets_unseen": int((ex.targets < 0).sum()),
            "conversion": m.get("conversion")}


def prepared(name: str) -> tuple[sb.Dataset, Examples, dict]:
    """Dataset `name` (prepared once), its evaluation examples, and their summary for a result file."""
    data = dataset(name)
    ex = examples(data)
    return data, ex, dataset_summary(name, data, ex)
