"""writer: the one place that writes a prepared dataset directory (the format dataset.py memory-maps).

    write_staged(out, build)   # build(work) -> summary: fills OUT.partial; meta.json last; then OUT

prepare.py (in memory, sets and leave-one-out), outofcore.py and text/prepare.py all write through
it, so the format has one definition. Files (prepare.py's docstring says what each one means):

    vocab.txt, counts.npy                    write_vocabulary (vocabulary_from_counts): one id string per
                                             line, int64 counts (V,)
    NAME.offsets.npy, NAME.ids.npy           write_split: CSR, int64 (S + 1,) offsets, int32 (links,) ids
    NAME.sets.txt                            write_split: one set key per line
    NAME.targets.npy                         write_targets: int32 (users,) (leave-one-out)
    meta.json                                write_staged: the build's summary, written last (marks completion)

and the two choices every preparer shares: `held_out`, the seeded train/test split of rows (one
permutation of a `default_rng(seed)`), and `vocabulary_order`, ids numbered by decreasing training
count (ties: key order, i.e. first appearance).

Staging (storage/guarded.py, the guarded writer every output shares): the directory is built in
`OUT.partial` (marked ours) and swapped in as OUT only when complete, so a failure or a kill part-way
leaves OUT as it was (an earlier dataset there stays loadable until replaced; a kill between the swap's
renames is finished by the next run and read right by Dataset); an OUT that holds files we did not
write, or is a file, and a user's OUT.partial / OUT.old, are refused before anything is written; an
earlier dataset is replaced only when asked (`overwrite`, prepare's --overwrite), as a trained model is.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pyarrow as pa

from ..storage.files import atomic_path, save_json
from ..storage.guarded import KINDS, OutputError, claim, one_writer
from .readers import InputError

_LINES = 1 << 18  # strings joined into one write


# ------------------------------------------------------------------------------ shared choices


def held_out(n: int, fraction: float, seed: int) -> np.ndarray:
    """The seeded split of rows 0..n-1: (n,) bool, True for the round(fraction * n) held-out rows,
    the first ones of `default_rng(seed).permutation(n)`."""
    is_test = np.zeros(n, bool)
    is_test[np.random.default_rng(seed).permutation(n)[: int(round(fraction * n))]] = True
    return is_test


def vocabulary_order(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Training counts per key (N,) -> (keys (V,) of the vocabulary in id order: the keys that occur,
    most frequent first, ties in key order; remap (N,) int32: key -> id, -1 for a key never counted)."""
    keys = np.flatnonzero(counts)
    keys = keys[np.argsort(-counts[keys], kind="stable")]
    remap = np.full(len(counts), -1, np.int32)
    remap[keys] = np.arange(len(keys), dtype=np.int32)
    return keys, remap


def offsets_of(lengths: np.ndarray) -> np.ndarray:
    """CSR offsets (S + 1,) int64 from per-set lengths (S,)."""
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


# ------------------------------------------------------------------------------ the files


def write_strings(path: Path, strings) -> None:
    """One string per line, a final newline unless empty; `strings` a list or an Arrow string array
    (turned into Python strings a chunk of _LINES at a time)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for a in range(0, len(strings), _LINES):
            chunk = strings[a:a + _LINES]
            f.write("".join(s + "\n" for s in (chunk.to_pylist() if isinstance(chunk, pa.Array) else chunk)))


def write_vocabulary(out: Path, strings, counts: np.ndarray) -> None:
    """vocab.txt (line i: the string of id i; a list or an Arrow string array) and counts.npy (V,) int64."""
    write_strings(out / "vocab.txt", strings)
    np.save(out / "counts.npy", np.asarray(counts, np.int64))


def vocabulary_from_counts(out: Path, strings: pa.Array, counts: np.ndarray) -> np.ndarray:
    """The vocabulary of the keys counted in training, saved in `out` (vocabulary_order, write_vocabulary).
    strings (N,) every key's string (Arrow), counts (N,) its training count -> remap (N,) int32: key -> id,
    -1 for a key that never occurs in training."""
    keys, remap = vocabulary_order(counts)
    write_vocabulary(out, strings.take(pa.array(keys)), counts[keys])
    return remap


def write_split(out: Path, name: str, lengths: np.ndarray, ids: np.ndarray | Iterable[np.ndarray],
                names) -> np.ndarray:
    """One CSR split NAME.{offsets,ids}.npy + NAME.sets.txt -> its offsets (S + 1,) int64.

    lengths (S,) ids per set; ids (links,) grouped by set, or an iterable of such chunks in order
    (streamed into a memory-mapped file, never all in memory: out-of-core prepare); names (S,) one key
    per set, a list or an Arrow string array."""
    offsets = offsets_of(lengths)
    if isinstance(ids, np.ndarray):
        np.save(out / f"{name}.ids.npy", ids.astype(np.int32))
    else:
        dest = np.lib.format.open_memmap(out / f"{name}.ids.npy", mode="w+", dtype=np.int32,
                                         shape=(int(offsets[-1]),))
        at = 0
        for chunk in ids:
            dest[at:at + len(chunk)] = chunk
            at += len(chunk)
        if at != len(dest):
            raise AssertionError(f"{name}: {at} ids streamed for {len(dest)} links")
        dest.flush()
        del dest
    np.save(out / f"{name}.offsets.npy", offsets)
    write_strings(out / f"{name}.sets.txt", names)
    return offsets


def write_targets(out: Path, name: str, targets: np.ndarray) -> None:
    """NAME.targets.npy: (users,) int32, one target per history of split NAME (leave-one-out)."""
    np.save(out / f"{name}.targets.npy", targets.astype(np.int32))


# ------------------------------------------------------------------------------ staging


@one_writer  # OUT locked from its check to the swap: a second writer of it is refused at once
def write_staged(out: str, build: Callable[[Path], dict], overwrite: bool = False) -> dict:
    """Run build(work_dir) -> summary in `OUT.partial`, write the summary as meta.json (last: it marks
    completion), and swap the result in as OUT only then (storage/guarded.py: OUT is checked before any
    work and must be new, empty or, with overwrite, a dataset of ours; an earlier dataset there stays
    loadable until the swap; nothing without our marker is touched). -> the summary."""
    target = claim(out, "dataset")
    if target.holds_output():
        if target.legacy() or overwrite:
            target.check_replace()  # written before markers, or holding files not ours: refused, naming them
        if not overwrite:  # as the trainers: replacing a dataset is asked for
            raise OutputError(f"--out {out} already holds {KINDS['dataset'].what}; pass --overwrite to replace it, "
                              "or give another folder (nothing was changed)")
    try:
        target.path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"{out}: cannot create the output directory ({e.strerror})") from None
    work = target.stage()
    try:
        summary = build(work)
        save_json(work / "meta.json", summary)
    except BaseException:
        target.discard()
        raise
    target.commit()
    return summary
