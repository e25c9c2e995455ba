"""prepare: raw links -> a compact, memory-mappable dataset directory.

    superbloom prepare links.tsv --format edges --out data/wiki

The input is a path (readers.py: edges, lines, jsonl, parquet, csv, tsv; a directory or glob of
Parquet / CSV files) or a Python object (inputs.py: a pandas or Polars DataFrame, a pyarrow Table, a
SciPy sparse matrix, an iterable of id collections), all read as the same chunks of (set key, id key)
strings, so everything below is shared and gives the same files for the same links.

With `read.order_column` (histories with a time column) the links are taken as if the input had been
sorted by that column, stably (ties keep the order read): within each set the ids follow it (for
leave-one-out: the sequence order), and sets and ids are numbered by first appearance in that order, so
a file in shuffled row order gives the same dataset, byte for byte, as the sorted file.

Steps (DESIGN.md, "prepare"): stream the input in Arrow chunks, dictionary-encode the set and id
keys of each chunk (never one Python object per link or per key), spill the provisional codes to
disk, unify the chunk dictionaries into global key ints in one Arrow pass, then with NumPy: drop repeated ids within a set (first occurrence
kept, counted), split the sets train/test with a seeded permutation, build the vocabulary from the
training sets only (ids numbered by decreasing training count), and write (all through writer.py)

    DATA_DIR/meta.json              summary + how it was made (written last: marks completion)
    DATA_DIR/vocab.txt, counts.npy  the vocabulary (see vocab.py)
    DATA_DIR/{train,test}.offsets.npy   int64 (sets + 1,) CSR offsets
    DATA_DIR/{train,test}.ids.npy       int32 ids; in test, ids unseen in training are -1
    DATA_DIR/{train,test}.sets.txt      set keys, one per line

`split="leave-one-out"` (sequence recommendation, the S3-Rec / SASRec protocol): each set
is a sequence in the order read (S3-Rec `lines` files are chronological per user; edge lists keep
file order, a sequence's links need not be contiguous), and repeated ids are KEPT (a user may
interact with an item twice; S3-Rec does the same; `repeats_kept` counts them). Of each sequence of
>= 3 ids the last id is its test target, the one before it its validation target, and the rest its
training prefix. Sequences of fewer than 3 ids cannot give both targets: they are kept whole for
training only and counted (`too_short_kept_for_training`). Files:

    DATA_DIR/train.{offsets,ids}.npy, train.sets.txt   training prefixes (+ the short sequences), in order
    DATA_DIR/valid.{offsets,ids}.npy   CSR (users + 1,), (links,): each evaluated user's history before the
                                       validation target (= the training prefix), in order
    DATA_DIR/valid.targets.npy         int32 (users,): the validation target
    DATA_DIR/test.{offsets,ids}.npy    the history before the test target (prefix + validation target)
    DATA_DIR/test.targets.npy          int32 (users,): the test target
    DATA_DIR/{valid,test}.sets.txt     user keys, one per line (the same users, same order, in both)

All memory-map like the set layout (Dataset.valid / Dataset.test are SetArrays of histories,
Dataset.targets(split) the targets). The vocabulary is built from the training prefixes only, as
for sets; a history id or target never seen in training is -1: such a target is a miss for every
method (counted in the summary and by the evaluator), an unseen history id is dropped from the context.

Peak memory is about 40 bytes per link (100M links: ~4 GB).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from .._bounds import bad
from .._log import progress_bar

from .inputs import check_source, read_source, recorded
from .readers import InputError, ReadConfig, ReadStats
from .writer import held_out, offsets_of, vocabulary_from_counts, write_split, write_staged, write_targets


SPLITS = ("sets", "leave-one-out")
MIN_SEQUENCE = 3  # a training prefix may be short, but a validation and a test target are needed
MOSTLY_UNSEEN = 0.5  # above this share of held-out ids never in training, the summary warns (input_warnings)


@dataclass(frozen=True)
class PrepareConfig:
    input: object  # a path (str or Path; a directory or glob for parquet/csv/tsv) or an in-memory input (inputs.py)
    out: str
    read: ReadConfig = field(default_factory=ReadConfig)
    test_fraction: float = 0.1
    seed: int = 0
    split: str = "sets"  # "sets": random hold-out of whole sets; "leave-one-out": last ids of sequences
    memory_limit: str | None = None  # e.g. "4GB" or "auto": out of core with DuckDB (outofcore.py); None: in memory

    def __post_init__(self):
        if self.split not in SPLITS:
            raise bad("split", f"split must be one of {SPLITS}, got {self.split!r}")
        if not 0.0 <= self.test_fraction < 1.0:
            raise bad("test_fraction", f"test_fraction must be in [0, 1), got {self.test_fraction}")


class KeyEncoder:
    """String keys -> ints in order of first appearance, vectorised with Arrow.

    Each chunk is dictionary-encoded (C++ hashing); the chunk's local codes, shifted by the
    number of dictionary entries seen so far, are what `encode` returns. `finish` unifies all
    chunk dictionaries with one `unique` + one `index_in` and returns the map from those
    provisional codes to global key ints. No Python object per key or per link.
    """

    def __init__(self, what: str):
        self.what = what
        self.dictionaries: list[pa.Array] = []
        self.n_codes = 0

    def encode(self, keys: pa.Array) -> np.ndarray:
        enc = pc.dictionary_encode(keys)
        codes = enc.indices.to_numpy().astype(np.int64) + self.n_codes
        self.dictionaries.append(enc.dictionary)
        self.n_codes += len(enc.dictionary)
        if self.n_codes >= 2 ** 32:
            raise ValueError("more than 2^32 distinct keys per chunk in total; not supported")
        return codes.astype(np.uint32)

    def finish(self) -> tuple[np.ndarray, pa.Array]:
        """-> (provisional code -> key int (uint32 -> int32), keys in int order)."""
        every = pa.concat_arrays(self.dictionaries) if self.dictionaries else pa.array([], pa.string())
        self.dictionaries = []
        keys = pc.unique(every)  # first appearance order
        if pc.any(pc.or_(pc.match_substring(keys, "\n"), pc.match_substring(keys, "\r"))).as_py():
            bad = keys.filter(pc.or_(pc.match_substring(keys, "\n"), pc.match_substring(keys, "\r")))[0]
            raise InputError(f"{self.what} key {bad.as_py()!r} contains a line break; keys must be one line")
        return pc.index_in(every, value_set=keys).to_numpy().astype(np.int32), keys


def prepare(cfg: PrepareConfig, progress: bool = True, overwrite: bool = False) -> dict:
    """Run the whole preparation; returns the summary also written to meta.json.

    The dataset is written into `OUT.partial` and moved into place only when complete, so a failure
    or a kill part-way leaves OUT as it was (an earlier dataset there, replaced only with overwrite=True,
    stays loadable until then)."""
    from .._bounds import instance

    instance("cfg", cfg, PrepareConfig, "a superbloom.PrepareConfig")
    t0 = time.time()
    check_source(cfg.input, cfg.read)  # a missing, binary or damaged input fails before `out` is touched
    if cfg.memory_limit is not None:  # out of core, the same files (outofcore.py)
        from .outofcore import check_config, prepare_out_of_core

        check_config(cfg)  # a bad limit or split fails before `out` is touched
        return write_staged(cfg.out, lambda work: _warned(prepare_out_of_core(cfg, work, t0, progress)), overwrite)
    return write_staged(cfg.out, lambda work: _warned(_prepare_into(cfg, work, t0, progress)), overwrite)


def _warned(summary: dict) -> dict:
    """The summary, with "warnings" where input_warnings finds any (the key is absent otherwise)."""
    found = input_warnings(summary)
    return {**summary, "warnings": found} if found else summary


def input_warnings(s: dict) -> list[str]:
    """What in a finished summary says the input may have been read from the wrong column, as when
    the id column holds timestamps or a triple's relation (an edge list of more than two fields is
    read from its columns 0 and 1 unless told otherwise): most held-out ids never occur in training,
    or most links repeat an id already in their set; or as when the columns are swapped (an item's
    groups read as its set: Wikispeedia's `article<TAB>category`): most sets hold one id."""
    read = s.get("read", {})
    fields = f" (the lines have {s['fields_per_line']} fields)" if s.get("fields_per_line", 0) > 2 else ""
    ask = (f": is column {read.get('id_column', '?')!r} the id column{fields}? --id-column and --set-column choose "
           "others" if s.get("format") in ("edges", "csv", "tsv", "parquet") else "")  # the formats with columns
    if s.get("split") == "leave-one-out":
        held, unseen, what = s["test"]["sets"], s["test"]["targets_unseen_in_train"], "test targets"
    else:
        held, unseen, what = s["test"]["links"], s["test_links_unseen_in_train"], "test links"
    found = []
    if held and unseen / held > MOSTLY_UNSEEN:
        found.append(f"{unseen / held:.0%} of the {what} ({unseen:,} of {held:,}) have an id that no training set "
                     f"holds, so no method can predict them{ask}")
    read_links = s["links"] + s["duplicates_removed"]
    if read_links and s["duplicates_removed"] / read_links > MOSTLY_UNSEEN:
        found.append(f"{s['duplicates_removed'] / read_links:.0%} of the links ({s['duplicates_removed']:,}) repeat "
                     f"an id already in their set and were removed (a set holds each id once){ask}")
    mean = s.get("train", {}).get("mean_set_size", 2.0)
    if not found and s.get("split") == "sets" and mean < 1.5:  # below 1.5, more than half the sets hold one id
        swap = (f": is column {read.get('set_column', '?')!r} the set column? --set-column "
                f"{read.get('id_column', '?')} --id-column {read.get('set_column', '?')} reads the sets the other way"
                if ask else "")
        found.append(f"the training sets hold {mean:g} ids on average (more than half hold one): a set needs two or "
                     f"more ids to learn or evaluate from{swap}")
    return found


def _prepare_into(cfg: PrepareConfig, out: Path, t0: float, progress: bool) -> dict:
    stats = ReadStats()
    sets_enc, ids_enc = KeyEncoder("set"), KeyEncoder("id")
    spill = out / ".links.tmp"
    order = OrderSpill(spill.with_suffix(".order"), cfg.read.order_column)
    try:
        with open(spill.with_suffix(".sets"), "wb") as fs, open(spill.with_suffix(".ids"), "wb") as fi, \
                progress_bar(desc="reading", unit=" links", unit_scale=True, progress=progress) as bar:
            for links in read_source(cfg.input, cfg.read, stats):
                fs.write(sets_enc.encode(links.sets).tobytes())
                fi.write(ids_enc.encode(links.ids).tobytes())
                order.write(links.order)
                bar.update(len(links.ids))
        if stats.links == 0:
            raise InputError(f"{recorded(cfg.input, cfg.read)['input']}: no links found ({stats.lines} lines, "
                             f"{stats.comments} comments, {stats.malformed} malformed)")
        set_map, set_strings = sets_enc.finish()
        set_of = set_map[np.fromfile(spill.with_suffix(".sets"), dtype=np.uint32)]
        del set_map
        id_map, id_strings = ids_enc.finish()
        id_of = id_map[np.fromfile(spill.with_suffix(".ids"), dtype=np.uint32)]
        del id_map
        if cfg.read.order_column is not None:  # as if the input had been sorted by the order column
            by_order = np.argsort(order.values(), kind="stable")  # (links,)
            set_of, set_strings = first_appearance(set_of[by_order], set_strings)
            id_of, id_strings = first_appearance(id_of[by_order], id_strings)
            del by_order
    finally:
        for suffix in (".sets", ".ids", ".order"):
            spill.with_suffix(suffix).unlink(missing_ok=True)

    n_sets, n_keys = len(set_strings), len(id_strings)
    if cfg.split == "leave-one-out":
        return _leave_one_out_into(cfg, out, t0, stats, set_of, id_of, set_strings, id_strings)
    set_of, id_of, duplicates = _dedupe_and_group(set_of, id_of, n_keys)

    is_test = held_out(n_sets, cfg.test_fraction, cfg.seed)
    link_test = is_test[set_of]

    # the vocabulary from the training sets only
    remap = vocabulary_from_counts(out, id_strings, np.bincount(id_of[~link_test], minlength=n_keys))
    del id_strings

    split = {}
    for name, chosen in (("train", ~is_test), ("test", is_test)):
        links = chosen[set_of]
        per_set = np.bincount(set_of[links], minlength=n_sets)[chosen]
        write_split(out, name, per_set, remap[id_of[links]], set_strings.take(pa.array(np.flatnonzero(chosen))))
        split[name] = {"sets": int(chosen.sum()), "links": int(links.sum()),
                       "mean_set_size": round(float(per_set.mean()), 2) if len(per_set) else 0.0}
    test_ids = remap[id_of[link_test]]
    unseen = test_ids < 0
    summary = {
        **recorded(cfg.input, cfg.read), "split": "sets",
        "seed": cfg.seed, "test_fraction": cfg.test_fraction,
        "sets": n_sets, "ids": int((remap >= 0).sum()), "links": int(len(id_of)),
        "train": split["train"], "test": split["test"],
        "test_links_unseen_in_train": int(unseen.sum()),
        "test_ids_unseen_in_train": int(len(np.unique(id_of[link_test][unseen]))),
        "duplicates_removed": int(duplicates),
        "lines": stats.lines, "comment_lines": stats.comments, "blank_lines": stats.blank,
        "malformed_skipped": stats.malformed, "malformed_examples": stats.examples, **stats.shape(),
        "seconds": round(time.time() - t0, 2),
    }
    return summary  # write_staged saves it as meta.json


def _leave_one_out_into(cfg: PrepareConfig, out: Path, t0: float, stats: ReadStats, set_of: np.ndarray,
                        id_of: np.ndarray, set_strings: pa.Array, id_strings: pa.Array) -> dict:
    """The leave-one-out split (module docstring): file order within a sequence, repeats kept."""
    n_sets, n_keys = len(set_strings), len(id_strings)
    set_of, id_of, repeats = _dedupe_and_group(set_of, id_of, n_keys, dedupe=False)
    lengths = np.bincount(set_of, minlength=n_sets)  # (S,)
    starts = offsets_of(lengths)  # (S + 1,)
    pos = np.arange(len(id_of)) - starts[set_of]  # (links,) position within its sequence
    evaluated = lengths >= MIN_SEQUENCE  # (S,)
    last = lengths[set_of]  # (links,) length of the link's sequence
    ev_link = evaluated[set_of]
    is_test = ev_link & (pos == last - 1)
    is_valid = ev_link & (pos == last - 2)
    in_train = ~(is_test | is_valid)

    # the vocabulary from the training prefixes (repeats count)
    remap = vocabulary_from_counts(out, id_strings, np.bincount(id_of[in_train], minlength=n_keys))
    del id_strings

    ev_rows = np.flatnonzero(evaluated)
    ev_names = set_strings.take(pa.array(ev_rows))
    write_split(out, "train", np.bincount(set_of[in_train], minlength=n_sets), remap[id_of[in_train]], set_strings)
    split = {"train": {"sets": n_sets, "links": int(in_train.sum()),
                       "mean_set_size": round(float(in_train.sum() / max(n_sets, 1)), 2)}}
    for name, history, target in (("valid", ev_link & (pos < last - 2), is_valid),
                                  ("test", ev_link & (pos < last - 1), is_test)):
        write_split(out, name, np.bincount(set_of[history], minlength=n_sets)[evaluated], remap[id_of[history]],
                    ev_names)
        targets = remap[id_of[target]]  # (users,): one target per evaluated sequence, in sequence order
        write_targets(out, name, targets)
        split[name] = {"sets": int(len(ev_rows)), "history_links": int(history.sum()),
                       "targets_unseen_in_train": int((targets < 0).sum()),
                       "history_links_unseen_in_train": int((remap[id_of[history]] < 0).sum())}
    summary = {
        **recorded(cfg.input, cfg.read), "split": "leave-one-out",
        "seed": cfg.seed, "sets": n_sets, "ids": int((remap >= 0).sum()), "links": int(len(id_of)),
        "train": split["train"], "valid": split["valid"], "test": split["test"],
        "too_short_kept_for_training": int((~evaluated).sum()), "min_sequence": MIN_SEQUENCE,
        "repeats_kept": int(repeats), "duplicates_removed": 0,
        "lines": stats.lines, "comment_lines": stats.comments, "blank_lines": stats.blank,
        "malformed_skipped": stats.malformed, "malformed_examples": stats.examples, **stats.shape(),
        "seconds": round(time.time() - t0, 2),
    }
    return summary  # write_staged saves it as meta.json


class OrderSpill:
    """The order values of the links, spilled to disk as they are read (8 bytes per link; nothing
    without an order column). Every chunk must give the same kind: int64 or float64."""

    def __init__(self, path: Path, column):
        self.path, self.column, self.dtype = path, column, None

    def write(self, values: np.ndarray | None):
        if self.column is None:
            return
        if self.dtype is None:
            self.dtype = values.dtype
        elif values.dtype != self.dtype:
            raise InputError(f"order column {self.column!r}: {values.dtype} values after {self.dtype} ones; "
                             "expected one type throughout")
        with open(self.path, "ab") as f:
            f.write(np.ascontiguousarray(values).tobytes())

    def values(self) -> np.ndarray:
        """(links,) int64 or float64, in the order read."""
        return np.fromfile(self.path, dtype=self.dtype or np.int64) if self.path.exists() else np.zeros(0, np.int64)


def first_appearance(codes: np.ndarray, strings: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Renumber keys by first appearance in `codes` (links,) int32 -> (codes renumbered, strings in the new
    key order): what KeyEncoder would have given had the links been read in this order."""
    keys, first = np.unique(codes, return_index=True)  # (K,) every key occurs
    in_order = keys[np.argsort(first, kind="stable")]  # (K,) old key of each new key
    new = np.empty(len(strings), np.int32)
    new[in_order] = np.arange(len(in_order), dtype=np.int32)
    return new[codes], strings.take(pa.array(in_order))


def _dedupe_and_group(set_of: np.ndarray, id_of: np.ndarray, n_keys: int, dedupe: bool = True):
    """Keep the first occurrence of each (set, id); group links by set, file order within a set.
    -> (set_of, id_of, repeated links: removed, or with dedupe=False kept and only counted)."""
    key = set_of.astype(np.int64) * n_keys + id_of
    order = np.argsort(key, kind="stable")
    first = np.ones(len(key), bool)
    first[1:] = key[order[1:]] != key[order[:-1]]
    del key
    duplicates = len(first) - int(first.sum())
    if duplicates and dedupe:
        keep = np.sort(order[first])
        set_of, id_of = set_of[keep], id_of[keep]
    del order, first
    if len(set_of) > 1 and not (set_of[1:] >= set_of[:-1]).all():  # sets not contiguous in the file
        order = np.argsort(set_of, kind="stable")
        set_of, id_of = set_of[order], id_of[order]
    return set_of, id_of, duplicates


def _aligned(rows: list[tuple[str, str]], examples: list[str]) -> str:
    """A summary's (label, value) rows aligned in two columns, then the malformed-line examples."""
    width = max(len(k) for k, _ in rows)
    return "\n".join([f"  {k:<{width}}  {v}" for k, v in rows] + [f"    e.g. {e}" for e in examples])


def _columns_row(s: dict) -> list[tuple[str, str]]:
    """The summary row naming the columns read, for an edge list with fields left unread."""
    read, fields = s.get("read", {}), s.get("fields_per_line", 0)
    used = {read.get("set_column"), read.get("id_column")}
    if fields <= len(used) or not all(isinstance(c, int) for c in used):
        return []
    return [("columns read", f"set {read['set_column']}, id {read['id_column']} of the {fields} per line "
                             "(--set-column, --id-column)")]


def _backs_row(s: dict) -> list[tuple[str, str]]:
    """The summary row of the back ids resolved (--back-id), when they were."""
    if "back_ids_resolved" not in s:
        return []
    return [(f"back ids {s['read'].get('back_id')!r}", f"{s['back_ids_resolved']:,} replaced by the id they return to, "
                                                       f"{s['back_ids_dropped']:,} dropped (nothing to return to)")]


def _no_ids_row(s: dict) -> list[tuple[str, str]]:
    """The summary row of the records (lines, rows, entries) that named a set and no ids, when there were any."""
    n = s.get("records_without_ids", 0)
    return [("records with a set key, no ids", f"{n:,}")] if n else []


def _warning_lines(s: dict) -> list[str]:
    return [f"  warning: {w}" for w in s.get("warnings", [])]


def format_summary(s: dict) -> str:
    if s.get("split") == "leave-one-out":
        return _format_loo_summary(s)
    rows = _columns_row(s) + _backs_row(s) + [
        ("sets", f"{s['sets']:,} ({s['train']['sets']:,} train / {s['test']['sets']:,} test)"),
        ("ids (vocabulary, from train)", f"{s['ids']:,}"),
        ("links", f"{s['links']:,} ({s['train']['links']:,} train / {s['test']['links']:,} test)"),
        ("mean set size (train)", f"{s['train']['mean_set_size']}"),
        ("test links with ids unseen in train", f"{s['test_links_unseen_in_train']:,} "
                                                f"({s['test_ids_unseen_in_train']:,} distinct ids)"),
        ("repeated ids within a set removed", f"{s['duplicates_removed']:,}"),
        ("lines read", f"{s['lines']:,} ({s['comment_lines']:,} comments, {s['blank_lines']:,} blank)"),
        ("malformed lines skipped", f"{s['malformed_skipped']:,}"),
        *_no_ids_row(s),
        ("time", f"{s['seconds']} s"),
    ]
    return "\n".join([_aligned(rows, s.get("malformed_examples", []))] + _warning_lines(s))


def _format_loo_summary(s: dict) -> str:
    v, t = s["valid"], s["test"]
    rows = _columns_row(s) + _backs_row(s) + [
        ("sequences", f"{s['sets']:,} ({t['sets']:,} with a validation and a test target)"),
        (f"sequences of < {s['min_sequence']} ids", f"{s['too_short_kept_for_training']:,} (kept whole for training "
                                                    "only, no target)"),
        ("ids (vocabulary, from train)", f"{s['ids']:,}"),
        ("links", f"{s['links']:,} ({s['train']['links']:,} in training prefixes)"),
        ("repeated ids within a sequence", f"{s['repeats_kept']:,} (kept: order and repeats as read)"),
        ("targets unseen in train", f"{v['targets_unseen_in_train']:,} validation / {t['targets_unseen_in_train']:,} "
                                    "test (misses for every method)"),
        ("lines read", f"{s['lines']:,} ({s['comment_lines']:,} comments, {s['blank_lines']:,} blank)"),
        ("malformed lines skipped", f"{s['malformed_skipped']:,}"),
        *_no_ids_row(s),
        ("time", f"{s['seconds']} s"),
    ]
    return "\n".join([_aligned(rows, s.get("malformed_examples", []))] + _warning_lines(s))
