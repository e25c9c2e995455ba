"""Labels of sets: a two-column file (set key, label) aligned to a prepared dataset's sets.

    Aland       Countries
    Aland       Geography
    Zurich      Geography

One (set key, label) pair per line; several lines per set give it several labels. Columns are
separated by a tab (then a key or label may contain spaces) or, in a line without a tab, by
whitespace. Blank lines and lines starting with '#' are skipped; any other line that is not
exactly two non-empty columns is an error naming file:line.

`load_labels` aligns the labels to the sets of `Dataset.set_names(split)` for both splits as
multi-hot (sets x labels) bool matrices. The label vocabulary is every label of the file, most
frequent first (ties: first appearance). Keys are matched as written, else by their URL-decoded
form (Wikispeedia's keys are URL-encoded). Nothing is dropped silently: keys found in no split,
repeated lines, and sets without a label are counted in the table.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import numpy as np

from ..storage.loading import text_lines
from .dataset import Dataset
from .readers import InputError

SPLITS = ("train", "test")


def read_label_pairs(path: str | Path) -> list[tuple[str, str]]:
    """All (set key, label) pairs of the file, in file order (repeats kept)."""
    path = Path(path)
    pairs = []
    # a binary or non-UTF-8 file: one line naming it and the line (storage/loading.text_lines)
    for lineno, line in enumerate(text_lines(path, "a labels file (set key, label per line)"), 1):
        line = line.rstrip("\r\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cols = line.split("\t") if "\t" in line else line.split()
        cols = [c.strip() for c in cols]
        if len(cols) != 2 or not cols[0] or not cols[1]:
            raise InputError(f"{path}:{lineno}: expected two columns (set key, label) separated by a tab "
                             f"or whitespace, got {len(cols)} in {line[:200]!r}")
        pairs.append((cols[0], cols[1]))
    if not pairs:
        raise InputError(f"{path}: no (set key, label) lines found")
    return pairs


@dataclass
class LabelTable:
    names: list[str]  # label vocabulary: label int -> string, most frequent first
    matrices: dict[str, np.ndarray]  # split -> (sets, L) bool multi-hot, rows in Dataset.set_names(split) order
    unknown_keys: int = 0  # distinct set keys of the file found in no split
    unknown_examples: list[str] = field(default_factory=list)
    repeated_lines: int = 0  # (key, label) lines seen before
    unlabelled: dict[str, int] = field(default_factory=dict)  # split -> sets without any label

    def __getitem__(self, split: str) -> np.ndarray:
        return self.matrices[split]

    def summary(self) -> dict:
        return {"labels": len(self.names), "unknown_keys": self.unknown_keys,
                "unknown_examples": self.unknown_examples, "repeated_lines": self.repeated_lines,
                "unlabelled": self.unlabelled,
                "labelled": {s: int(m.any(1).sum()) for s, m in self.matrices.items()}}


def align_labels(pairs: list[tuple[str, str]], set_keys: dict[str, list[str]]) -> LabelTable:
    """Pairs -> a LabelTable over the given splits' set keys (split -> keys in row order)."""
    counts = Counter(label for _, label in dict.fromkeys(pairs))  # distinct pairs; insertion order kept
    first = {label: i for i, label in reversed(list(enumerate(label for _, label in pairs)))}
    names = sorted(counts, key=lambda s: (-counts[s], first[s]))
    label_id = {s: i for i, s in enumerate(names)}
    where: dict[str, tuple[str, int]] = {}  # key (and URL-decoded alias) -> (split, row)
    for split, keys in set_keys.items():
        for row, key in enumerate(keys):
            where.setdefault(key, (split, row))
    for split, keys in set_keys.items():
        for row, key in enumerate(keys):
            if "%" in key:
                where.setdefault(unquote(key), (split, row))
    matrices = {split: np.zeros((len(keys), len(names)), bool) for split, keys in set_keys.items()}
    unknown: dict[str, None] = {}
    distinct = dict.fromkeys(pairs)
    for key, label in distinct:
        hit = where.get(key)
        if hit is None and "%" in key:
            hit = where.get(unquote(key))
        if hit is None:
            unknown.setdefault(key)
            continue
        matrices[hit[0]][hit[1], label_id[label]] = True
    return LabelTable(names, matrices, len(unknown), list(unknown)[:5], len(pairs) - len(distinct),
                      {s: int((~m.any(1)).sum()) for s, m in matrices.items()})


def load_labels(path: str | Path, data: Dataset, splits=SPLITS) -> LabelTable:
    """Read a labels file and align it to the dataset's set keys of each split."""
    return align_labels(read_label_pairs(path), {s: data.set_names(s) for s in splits})
