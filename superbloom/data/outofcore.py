"""Out-of-core prepare: the dataset of prepare.py, byte for byte, in memory bounded by a setting.

    superbloom prepare links.parquet --format parquet --out data/synth --memory-limit 4GB

The in-memory path holds about 40 bytes per link (462M links: ~18 GB). This path keeps the readers
(readers.py: every format, CRLF, comments, `--skip-malformed` counts, errors naming file and line)
and hands everything that grows with the links to DuckDB, which runs its hash aggregates, joins and
sorts out of core: within `memory_limit` (its buffer pool), spilling to a temporary directory
inside the work directory (`OUT.partial`, deleted with it). Why DuckDB rather than a hand-written
external sort or Polars' streaming engine: it honours a hard `memory_limit` with a
`temp_directory` for every operator this needs (GROUP BY, joins, ORDER BY), where Polars'
streaming engine has no memory cap to set; and the result streams back as Arrow record batches.

Steps (the same results as prepare.py, see its docstring for what they mean):
  1. stream the reader's (set key, id key) chunks into a spill Parquet file (row order = order read;
     with an order column its values too, and the row becomes the rank in (order, row) order);
  2. key ints in first-appearance order: GROUP BY key, min(row) -> row_number() over that;
  3. links as (set int, id int, row), the first occurrence of each (set, id) kept (min(row));
  4. the seeded split and the vocabulary with NumPy on per-set and per-id arrays (O(sets + ids),
     never O(links)), exactly as prepare.py does it;
  5. each split's ids streamed out in (set, row) order into a memory-mapped .npy, set keys and the
     vocabulary written a chunk of lines at a time (writer.py writes every file, as for prepare.py).

Peak memory: `memory_limit` (DuckDB) + about 60 bytes per distinct set and id (NumPy) + one reader
chunk. Only `split="sets"` is supported here (leave-one-out keeps the in-memory path).
"""
from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from .._log import progress_bar

from .._extras import require_extra
from .inputs import read_source, recorded
from .readers import InputError, ReadStats
from .writer import held_out, vocabulary_from_counts, write_split

_UNITS = {"": 1, "B": 1, "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12,
          "KIB": 2 ** 10, "MIB": 2 ** 20, "GIB": 2 ** 30, "TIB": 2 ** 40}
AUTO_FRACTION = 0.4  # --memory-limit auto: this fraction of the machine's RAM
MIN_LIMIT = 64 * 10 ** 6  # DuckDB needs some room for its hash tables and sort runs
_BATCH = 1 << 20  # rows streamed back from DuckDB at a time


def parse_memory_limit(text: str) -> int:
    """'4GB', '500MB', '2GiB', '123456789' (bytes) or 'auto' (AUTO_FRACTION of RAM) -> bytes.
    ValueError naming the value and the expected form."""
    t = str(text).strip().upper().replace(" ", "")
    if t == "AUTO":
        return max(MIN_LIMIT, int(AUTO_FRACTION * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")))
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]I?B|B)?", t)
    if not m:
        raise ValueError(f"memory limit {text!r}: expected a size like 4GB, 500MB, 2GiB or a number of bytes, or 'auto'")
    n = int(float(m.group(1)) * _UNITS[m.group(2) or ""])
    if n < MIN_LIMIT:
        raise ValueError(f"memory limit {text!r}: at least {MIN_LIMIT // 10 ** 6}MB is needed")
    return n


def check_config(cfg) -> int:
    """ValueError for a PrepareConfig this path cannot run, MissingExtra without duckdb -> the memory
    limit in bytes."""
    require_extra("outofcore", "prepare --memory-limit (out-of-core prepare)")
    if cfg.split != "sets":
        raise ValueError(f"--memory-limit (out-of-core prepare) supports --split sets only, got {cfg.split!r}; "
                         "leave-one-out datasets are prepared in memory (omit --memory-limit)")
    return parse_memory_limit(cfg.memory_limit)


def prepare_out_of_core(cfg, out: Path, t0: float, progress: bool) -> dict:
    """prepare.py's `_prepare_into` for split="sets", out of core; `cfg` a PrepareConfig with memory_limit."""
    import duckdb

    limit = check_config(cfg)
    scratch = out / ".outofcore"
    scratch.mkdir()
    try:
        times = {"start": time.time()}
        stats = _spill(cfg, scratch / "links.parquet", progress)
        times["read_and_spill"] = time.time()
        con = duckdb.connect(str(scratch / "work.duckdb"), config={
            "memory_limit": f"{limit // 2 ** 20}MiB", "temp_directory": str(scratch / "tmp"),
            "preserve_insertion_order": False, "threads": max(1, min(os.cpu_count() or 1, 4))})
        try:
            summary = _build(con, cfg, out, scratch / "links.parquet", stats, progress, times)
        finally:
            con.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    marks = list(times.items())
    summary["outofcore"] = {"engine": f"duckdb {duckdb.__version__}", "memory_limit_bytes": limit,
                            "stage_seconds": {k: round(t - marks[i][1], 2) for i, (k, t) in enumerate(marks[1:])}}
    summary["seconds"] = round(time.time() - t0, 2)
    return summary  # write_staged saves it as meta.json


def _conform(table: pa.Table, schema: pa.Schema, cfg) -> pa.Table:
    """A later chunk whose column types differ from the first chunk's (e.g. a reader's string vs
    large_string, or an order column read as int then double) cast to the first chunk's types; a cast
    that would lose values is an InputError naming the column."""
    for name in schema.names:
        have, want = table.schema.field(name).type, schema.field(name).type
        if have != want:
            try:
                table = table.set_column(table.schema.get_field_index(name), name, table[name].cast(want))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                what = f"order column {cfg.read.order_column!r}" if name == "o" else f"column {name!r}"
                raise InputError(f"{what}: {have} values after {want} ones; expected one type throughout ({e})") from None
    return table


def _spill(cfg, path: Path, progress: bool) -> ReadStats:
    """Reader chunks -> a Parquet file of (s, i) string columns (and o, the order values, with an order
    column), in the order read."""
    stats = ReadStats()
    writer = None
    try:
        with progress_bar(desc="reading", unit=" links", unit_scale=True, progress=progress) as bar:
            for links in read_source(cfg.input, cfg.read, stats):
                cols = {"s": links.sets, "i": links.ids}
                if links.order is not None:
                    cols["o"] = pa.array(links.order)
                table = pa.table(cols)
                if writer is None:
                    schema = table.schema
                    writer = pq.ParquetWriter(path, schema, compression="zstd")
                elif table.schema != schema:
                    table = _conform(table, schema, cfg)
                writer.write_table(table)
                bar.update(len(links.ids))
    finally:
        if writer is not None:
            writer.close()
    if stats.links == 0:
        raise InputError(f"{recorded(cfg.input, cfg.read)['input']}: no links found ({stats.lines} lines, "
                         f"{stats.comments} comments, {stats.malformed} malformed)")
    return stats


def _build(con, cfg, out: Path, spill: Path, stats: ReadStats, progress: bool, times: dict) -> dict:
    """Steps 2-5 of the module docstring; `times` gets the time at the end of each step."""
    scan = f"read_parquet('{spill}', file_row_number = true)"
    if cfg.read.order_column is not None:  # as if the input had been sorted by the order column (stable)
        con.execute(f"CREATE TABLE ordered AS SELECT s, i, row_number() OVER (ORDER BY o, file_row_number) - 1 "
                    f"AS file_row_number FROM {scan}")
        scan = "ordered"
    step = progress_bar(total=5, desc="out-of-core", progress=progress)
    for table, col, what in (("set_keys", "s", "set"), ("id_keys", "i", "id")):
        # key ints in order of first appearance, as KeyEncoder numbers them
        con.execute(f"CREATE TABLE {table} AS SELECT key, (row_number() OVER (ORDER BY first) - 1)::INTEGER AS k "
                    f"FROM (SELECT {col} AS key, min(file_row_number) AS first FROM {scan} GROUP BY {col})")
        bad = con.execute(f"SELECT key FROM {table} WHERE contains(key, chr(10)) OR contains(key, chr(13)) "
                          "ORDER BY k LIMIT 1").fetchall()
        if bad:
            raise InputError(f"{what} key {bad[0][0]!r} contains a line break; keys must be one line")
        step.update()
        times[f"{what}_keys"] = time.time()
    n_sets = con.execute("SELECT count(*) FROM set_keys").fetchall()[0][0]
    n_keys = con.execute("SELECT count(*) FROM id_keys").fetchall()[0][0]
    # links as ints; the first occurrence of each (set, id) kept
    con.execute(f"CREATE TABLE uniq AS SELECT sk.k AS s, ik.k AS i, min(r.file_row_number) AS pos FROM {scan} r "
                "JOIN set_keys sk ON r.s = sk.key JOIN id_keys ik ON r.i = ik.key GROUP BY sk.k, ik.k")
    step.update()
    n_links = con.execute("SELECT count(*) FROM uniq").fetchall()[0][0]
    times["links_deduplicated"] = time.time()

    is_test = held_out(n_sets, cfg.test_fraction, cfg.seed)  # the split of prepare.py, on per-set arrays
    lengths = _per_key(con, "SELECT s, count(*) FROM uniq GROUP BY s", n_sets)  # (S,)
    con.register("set_split", pa.table({"s": np.arange(n_sets, dtype=np.int32), "test": is_test}))
    counts = _per_key(con, "SELECT i, count(*) FROM uniq JOIN set_split USING (s) WHERE NOT test GROUP BY i",
                      n_keys)  # (N,) training count of each key
    remap = vocabulary_from_counts(out, _column(con, "SELECT key FROM id_keys ORDER BY k"), counts)
    con.register("remap", pa.table({"i": np.arange(n_keys, dtype=np.int32), "v": remap}))
    step.update()
    times["split_and_vocabulary"] = time.time()

    split = {}
    for name, chosen in (("train", ~is_test), ("test", is_test)):
        per_set = lengths[chosen]
        names = _column(con, f"SELECT key FROM set_keys JOIN set_split ON k = s WHERE test = {name == 'test'} "
                             "ORDER BY k")
        # streamed (the query runs now, so after the names'): never all of a split's ids in memory
        ids = (b.column(0).to_numpy() for b in _batches(con, "SELECT v FROM uniq JOIN set_split USING (s) "
                                                              f"JOIN remap USING (i) WHERE test = {name == 'test'} "
                                                              "ORDER BY s, pos"))
        offsets = write_split(out, name, per_set, ids, names)
        del names
        split[name] = {"sets": int(chosen.sum()), "links": int(offsets[-1]),
                       "mean_set_size": round(float(per_set.mean()), 2) if len(per_set) else 0.0}
        step.update()
        times[f"write_{name}"] = time.time()
    unseen_links, unseen_ids = con.execute(
        "SELECT count(*), count(DISTINCT i) FROM uniq JOIN set_split USING (s) JOIN remap USING (i) "
        "WHERE test AND v < 0").fetchall()[0]
    step.close()
    return {
        **recorded(cfg.input, cfg.read), "split": "sets",
        "seed": cfg.seed, "test_fraction": cfg.test_fraction,
        "sets": n_sets, "ids": int((remap >= 0).sum()), "links": int(n_links),
        "train": split["train"], "test": split["test"],
        "test_links_unseen_in_train": int(unseen_links), "test_ids_unseen_in_train": int(unseen_ids),
        "duplicates_removed": int(stats.links - n_links),
        "lines": stats.lines, "comment_lines": stats.comments, "blank_lines": stats.blank,
        "malformed_skipped": stats.malformed, "malformed_examples": stats.examples, **stats.shape(),
    }


def _per_key(con, sql: str, n: int) -> np.ndarray:
    """(n,) int64 from a query of (key int, value) rows; keys absent get 0."""
    out = np.zeros(n, np.int64)
    for batch in _batches(con, sql):
        out[batch.column(0).to_numpy()] = batch.column(1).to_numpy()
    return out


def _column(con, sql: str) -> pa.Array:
    """The one column of a query, as one Arrow array (per-key sized: sets or ids, never links)."""
    return pa.concat_arrays([b.column(0) for b in _batches(con, sql)] or [pa.array([], pa.string())])


def _batches(con, sql: str):
    """A query's result streamed as Arrow record batches of about _BATCH rows (DuckDB 2 renamed the 1.x
    `fetch_arrow_reader`)."""
    rel = con.sql(sql)
    return rel.to_arrow_reader(_BATCH) if hasattr(rel, "to_arrow_reader") else rel.fetch_arrow_reader(_BATCH)
