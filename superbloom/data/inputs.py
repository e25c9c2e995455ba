"""What `prepare` reads: a file, or a DataFrame, Arrow table, sparse matrix or iterable of sets, as link chunks.

    sb.prepare(sb.PrepareConfig(df, "data/x", read=sb.ReadConfig(set_column="user", id_column="item")))

A path (a file, or for the columnar formats a directory or glob) goes to readers.py. A Python object
goes to the first adapter in `ADAPTERS` that accepts it, which turns it into the same `Links` chunks
(set keys, id keys as Arrow strings; order values) that the readers yield, so everything after the
reader (key encoding, the order column, dedupe, splits, the files) is shared and a DataFrame gives the
same dataset, byte for byte, as the same links read from a file:

  pandas    a pandas DataFrame (its index is ignored)         \\  columns by name or position
  polars    a Polars DataFrame (polars is never imported here) |  (`set_column`, `id_column`,
  arrow     a pyarrow Table or RecordBatch                    /   `order_column`), lists exploded
  sparse    a SciPy sparse matrix, or `SparseSets(matrix, set_keys, id_keys)`: row r is the set
            `set_keys[r]` (default "r"), a stored non-zero in column c the id `id_keys[c]` (default "c");
            values are not weights, a row's ids come in stored column order
  sets      a mapping {set key: ids} or any other iterable of id collections (set key: its position
            "0", "1", ...); ids are any hashable, turned into `str(id)`; a Python set or frozenset has no
            order, so its ids are sorted (as strings) to make the dataset independent of hash seeds

The pandas and Polars adapters only recognise objects of modules already imported by the caller: neither
library is a dependency.
"""
from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .columns import chosen_columns, table_links
from .read_config import InputError, Links, ReadConfig, ReadStats
from .readers import CHUNK_LINKS, as_links, check_input, read_chunks, sets_chunks

_CHUNK_LINKS = CHUNK_LINKS  # links per chunk from the table and sparse adapters (the sets adapter: sets_chunks)


@dataclass(frozen=True)
class SparseSets:
    """A SciPy sparse matrix of sets (rows) x ids (columns) with optional key strings for both axes."""
    matrix: Any
    set_keys: Any = None  # (rows,) strings, or None: "0", "1", ...
    id_keys: Any = None  # (columns,) strings, or None: "0", "1", ...


@dataclass(frozen=True)
class Adapter:
    """One kind of in-memory input: `accepts(obj)`, `describe(obj)` for meta.json's "input", and
    `chunks(obj, cfg, stats)` -> `Links` (or (sets, ids) pairs)."""
    accepts: Callable[[Any], bool]
    describe: Callable[[Any], str]
    chunks: Callable[[Any, ReadConfig, ReadStats], Iterator]
    ordered: bool = False  # accepts an order column (tables); the others are in their own order


def _module_type(module: str, name: str) -> type | None:
    """`module.name` if the caller has imported `module`, else None (never imports it)."""
    mod = sys.modules.get(module)
    return getattr(mod, name, None) if mod is not None else None


def _instance_of(module: str, name: str) -> Callable[[Any], bool]:
    return lambda obj: (t := _module_type(module, name)) is not None and isinstance(obj, t)


# ------------------------------------------------------------------------------ tables


def _table_chunks(table: pa.Table | pa.RecordBatch, cfg: ReadConfig, stats: ReadStats, where: str):
    cols = chosen_columns(table.schema.names, cfg, where)
    batches = table.to_batches(max_chunksize=_CHUNK_LINKS) if isinstance(table, pa.Table) else [table]
    return table_links(batches, cols, cfg, stats, where)


def _pandas_chunks(df, cfg: ReadConfig, stats: ReadStats):
    cols = chosen_columns([str(c) for c in df.columns], cfg, "DataFrame")
    by_name = dict(zip((str(c) for c in df.columns), df.columns))
    table = pa.Table.from_pandas(df[[by_name[c] for c in dict.fromkeys(cols)]], preserve_index=False)
    return _table_chunks(table, cfg, stats, "DataFrame")


def _polars_chunks(df, cfg: ReadConfig, stats: ReadStats):
    cols = chosen_columns(list(df.columns), cfg, "DataFrame")
    return _table_chunks(df.select(list(dict.fromkeys(cols))).to_arrow(), cfg, stats, "DataFrame")


def _rows(obj) -> str:
    return f"{obj.num_rows if isinstance(obj, (pa.Table, pa.RecordBatch)) else len(obj):,} rows"


# ------------------------------------------------------------------------------ sparse matrices


def _is_sparse(obj) -> bool:
    issparse = _module_type("scipy.sparse", "issparse")
    return isinstance(obj, SparseSets) or issparse is not None and issparse(obj)


def _sparse_keys(keys, n: int, what: str) -> pa.Array | None:
    if keys is None:
        return None
    arr = pa.array([str(k) for k in keys], pa.string())
    if len(arr) != n:
        raise InputError(f"SparseSets.{what}: expected {n} keys (one per {'row' if what == 'set_keys' else 'column'} "
                         f"of the matrix), got {len(arr)}")
    return arr


def _sparse_chunks(obj, cfg: ReadConfig, stats: ReadStats):
    """Rows in blocks of about _CHUNK_LINKS stored entries; explicit zeros are not links."""
    sparse = obj if isinstance(obj, SparseSets) else SparseSets(obj)
    m = sparse.matrix.tocsr()  # (sets, ids)
    n_rows, n_cols = m.shape
    set_keys = _sparse_keys(sparse.set_keys, n_rows, "set_keys")
    id_keys = _sparse_keys(sparse.id_keys, n_cols, "id_keys")
    indptr = np.asarray(m.indptr, np.int64)  # (rows + 1,)
    stats.lines += n_rows
    a = 0
    while a < n_rows:
        b = max(a + 1, int(np.searchsorted(indptr, indptr[a] + _CHUNK_LINKS, side="right")) - 1)
        b = min(b, n_rows)
        lo, hi = indptr[a], indptr[b]
        cols = np.asarray(m.indices[lo:hi], np.int64)  # (links,)
        rows = np.repeat(np.arange(a, b, dtype=np.int64), np.diff(indptr[a:b + 1]))  # (links,)
        keep = np.asarray(m.data[lo:hi]) != 0
        rows, cols = rows[keep], cols[keep]
        stats.no_ids += (b - a) - len(np.unique(rows))  # rows with no stored non-zero: no set is made of them
        sets = pc.cast(pa.array(rows), pa.string()) if set_keys is None else set_keys.take(pa.array(rows))
        ids = pc.cast(pa.array(cols), pa.string()) if id_keys is None else id_keys.take(pa.array(cols))
        yield sets, ids
        a = b


def _describe_sparse(obj) -> str:
    m = obj.matrix if isinstance(obj, SparseSets) else obj
    return f"<sparse matrix {m.shape[0]:,} sets x {m.shape[1]:,} ids, {m.nnz:,} stored>"


# ------------------------------------------------------------------------------ iterables of id collections


def _is_sets(obj) -> bool:
    return isinstance(obj, Iterable) and not isinstance(obj, (str, bytes, Path))


def _sets_chunks(obj, cfg: ReadConfig, stats: ReadStats):
    """One Python `str` per id (the ids are Python objects already); readers.sets_chunks."""
    return sets_chunks(obj.items() if isinstance(obj, Mapping) else enumerate(obj), stats, skip=cfg.skip_malformed)


# ------------------------------------------------------------------------------ the registry

ADAPTERS: dict[str, Adapter] = {  # tried in this order; the first that accepts an object reads it
    "pandas": Adapter(_instance_of("pandas", "DataFrame"), lambda df: f"<pandas DataFrame, {_rows(df)}>",
                      _pandas_chunks, ordered=True),
    "polars": Adapter(_instance_of("polars", "DataFrame"), lambda df: f"<polars DataFrame, {_rows(df)}>",
                      _polars_chunks, ordered=True),
    "arrow": Adapter(lambda t: isinstance(t, (pa.Table, pa.RecordBatch)),
                     lambda t: f"<pyarrow {type(t).__name__}, {_rows(t)}>",
                     lambda t, cfg, stats: _table_chunks(t, cfg, stats, type(t).__name__), ordered=True),
    "sparse": Adapter(_is_sparse, _describe_sparse, _sparse_chunks),
    "sets": Adapter(_is_sets, lambda obj: f"<{type(obj).__name__} of id collections>", _sets_chunks),
}


def is_path(source) -> bool:
    return isinstance(source, (str, Path))


def adapter_of(source) -> tuple[str, Adapter]:
    """(name, adapter) for an in-memory input; TypeError naming the type and what is accepted."""
    for name, adapter in ADAPTERS.items():
        if adapter.accepts(source):
            return name, adapter
    raise TypeError(f"prepare input: expected a path or one of {list(ADAPTERS)} (a pandas / Polars DataFrame, "
                    f"a pyarrow Table, a SciPy sparse matrix, an iterable of id collections), "
                    f"got {type(source).__name__}")


def check_source(source, cfg: ReadConfig) -> None:
    """Fail now (before anything is written) on an input that cannot be read: a missing or damaged file,
    an object of no known kind, an order column for an input that has none."""
    if is_path(source):
        check_input(source, cfg)
        return
    name, adapter = adapter_of(source)
    if cfg.order_column is not None and not adapter.ordered:
        raise InputError(f"order_column {cfg.order_column!r}: a {name} input has no columns; its ids are "
                         "read in their own order")


def read_source(source, cfg: ReadConfig, stats: ReadStats) -> Iterator[Links]:
    """`Links` chunks of a path or an in-memory input; `stats` filled as we go."""
    if is_path(source):
        return read_chunks(source, cfg, stats)
    check_source(source, cfg)
    name, adapter = adapter_of(source)
    return as_links(adapter.chunks(source, cfg, stats), cfg, stats, where=f"the {name} input")


def recorded(source, cfg: ReadConfig) -> dict:
    """How the input is recorded in meta.json: {"input", "format", "read"}; an in-memory input is
    described (kind and size), its adapter's name is the format."""
    if is_path(source):
        return {"input": str(source), "format": cfg.format, "read": cfg.summary()}
    name, adapter = adapter_of(source)
    return {"input": adapter.describe(source), "format": name, "read": {**cfg.summary(), "format": name}}
