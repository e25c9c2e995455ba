"""The columnar readers: Parquet and CSV / TSV with a header row, columns by name or position.

CSV / TSV have quoted fields (RFC 4180); both are parsed by Arrow in C++. Columns are chosen by name or
position (`chosen_columns`); `table_links` (shared with the in-memory tables of inputs.py) explodes an
id column of lists, casts keys to strings, reports a null with its file and row (or counts and skips it
with skip_malformed) and carries an optional order column (numbers, dates or timestamps) along."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from .read_config import InputError, Links, ReadConfig, ReadStats
from .textcheck import printable

HEADER_DELIMITER = {"csv": ",", "tsv": "\t"}
BLOCK_BYTES = 16 << 20  # text parsed per Arrow block


def read_parquet(path: Path, cfg: ReadConfig, stats: ReadStats, partition: dict | None = None):
    """One Parquet file's links; `partition`: the values of its hive partition folders (readers.py:
    `day=2024-01-01/part-0.parquet` -> {"day": "2024-01-01"}), columns of every row where the file
    has no column of that name."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError(f"{path}: not a readable Parquet file ({e})") from None
    names = pf.schema_arrow.names
    extra = {k: v for k, v in (partition or {}).items() if k not in names}
    cols = chosen_columns(names + list(extra), cfg, path)
    batches = pf.iter_batches(columns=[c for c in dict.fromkeys(cols) if c not in extra], batch_size=1 << 20)
    if extra:
        batches = (pa.RecordBatch.from_arrays(
            [*b.columns, *(pa.array([v] * b.num_rows) for v in extra.values())], names=[*b.schema.names, *extra])
            for b in batches)
    yield from table_links(batches, cols, cfg, stats, path)


def read_csv(path: Path, cfg: ReadConfig, stats: ReadStats, head: str):
    """CSV / TSV with a header row and quoted fields, parsed by Arrow in C++; the chosen columns read as
    strings (the order column's type inferred); a row with the wrong number of fields is an InputError
    naming the line (or skipped and counted with skip_malformed)."""
    delimiter = HEADER_DELIMITER[cfg.format]
    first = next((line for line in head.splitlines() if line.strip()), None)
    if first is None:
        raise InputError(f"{path}: empty; expected a header row of column names")
    header = next(csv.reader([first.removeprefix("\ufeff")], delimiter=delimiter))  # a BOM, as Arrow skips it
    cols = chosen_columns(header, cfg, path)
    failure: list[str] = []

    def invalid_row(row) -> str:
        return stats.invalid_row(f"{path}:{row.number}: expected {len(header)} {cfg.format} fields (as in the "
                                 f"header), got {row.actual_columns}", cfg.skip_malformed, failure)

    read = pcsv.ReadOptions(block_size=BLOCK_BYTES, use_threads=False)
    parse = pcsv.ParseOptions(delimiter=delimiter, quote_char='"', double_quote=True, newlines_in_values=False,
                              invalid_row_handler=invalid_row)
    convert = pcsv.ConvertOptions(include_columns=list(dict.fromkeys(cols)), strings_can_be_null=True,
                                  column_types={cols[0]: pa.string(), cols[1]: pa.string()})
    try:
        with pcsv.open_csv(pa.input_stream(str(path), compression="detect"), read_options=read,
                           parse_options=parse, convert_options=convert) as reader:
            yield from table_links(reader, cols, cfg, stats, path)
    except (pa.ArrowInvalid, OSError, EOFError) as e:
        if failure:
            raise InputError(failure[0]) from None
        raise InputError(f"{path}: cannot read as {cfg.format} with a header ({printable(e)})") from None


def chosen_columns(names: list[str], cfg: ReadConfig, where) -> tuple[str, ...]:
    """The names of the set, id (and order) columns among `names`, chosen by name or position ->
    (set, id) or (set, id, order). InputError naming `where`, the column and the columns there are."""
    wanted = [cfg.set_column, cfg.id_column] + ([cfg.order_column] if cfg.order_column is not None else [])
    positions = [c for c in wanted if isinstance(c, int)]
    if positions and len(names) <= max(positions):
        raise InputError(f"{where}: expected at least {max(positions) + 1} columns, got {len(names)} ({names})")
    out = []
    for what, c in zip(("set", "id", "order"), wanted):
        if isinstance(c, str):
            if c not in names:
                raise InputError(f"{where}: no {what} column {c!r}; the columns are {names}")
            if names.count(c) > 1:
                raise InputError(f"{where}: {names.count(c)} columns are named {c!r}; choose one by position")
        out.append(c if isinstance(c, str) else names[c])
    if len(set(out)) < len(out):
        raise InputError(f"{where}: the set, id and order columns must be different columns, got {out}")
    return tuple(out)


_ORDER_TYPES = "integers, floats, dates or timestamps"


def _order_values(col: pa.Array, name: str, where) -> np.ndarray:
    """An order column -> (rows,) int64 (integers, dates, timestamps, durations) or float64 (floats)."""
    t = col.type
    if pa.types.is_integer(t) or pa.types.is_temporal(t):
        if pa.types.is_date32(t):
            col = col.cast(pa.int32())
        return col.cast(pa.int64()).to_numpy(zero_copy_only=False)
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return col.cast(pa.float64()).to_numpy(zero_copy_only=False)
    raise InputError(f"{where}: the order column {name!r} has type {t}; expected {_ORDER_TYPES}")


def _as_strings(col: pa.Array, name: str, where) -> pa.Array:
    try:
        return col.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise InputError(f"{where}: column {name!r} has type {col.type}; expected strings or integers "
                         "(or, for ids, lists of them)") from None


def table_links(batches, cols: tuple[str, ...], cfg: ReadConfig, stats: ReadStats, where) -> Iterator[Links]:
    """Arrow record batches holding the columns `cols` ((set, id) or (set, id, order) names, from
    `chosen_columns`) -> `Links`: an id column of lists exploded (the set and order repeated), keys cast
    to strings, a row with a null counted and skipped (skip_malformed) or an InputError naming `where`
    and the row. Shared by Parquet, CSV/TSV and the in-memory tables of inputs.py."""
    row = 1
    for batch in batches:
        sets, ids = batch.column(cols[0]), batch.column(cols[1])
        order = batch.column(cols[2]) if len(cols) > 2 else None
        stats.lines += len(sets)
        if pa.types.is_list(ids.type) or pa.types.is_large_list(ids.type):
            stats.no_ids += len(ids) - (pc.sum(pc.greater(pc.list_value_length(ids), 0)).as_py() or 0)  # [] or null
            parents = pc.list_parent_indices(ids)
            sets = sets.take(parents)
            order = None if order is None else order.take(parents)
            ids = pc.list_flatten(ids)
        nulls = pc.or_(pc.is_null(sets), pc.is_null(ids))
        if order is not None:
            nulls = pc.or_(nulls, pc.is_null(order))
        nulls = nulls.to_numpy(zero_copy_only=False)
        if nulls.any():
            rows = np.arange(row, row + batch.num_rows)
            first = int(rows[np.flatnonzero(nulls)[0]]) if len(rows) == len(nulls) else row
            named = " or ".join(repr(c) for c in cols) if len(cols) == 2 else \
                f"{cols[0]!r}, {cols[1]!r} or {cols[2]!r}"
            if not cfg.skip_malformed:
                raise InputError(f"{where}: row {first}: null in column {named} "
                                 "(pass --skip-malformed to skip and count such rows)")
            stats.malformed += int(nulls.sum())
            stats.examples.append(f"{where}: row {first}: null value")
            keep = pa.array(~nulls)
            sets, ids = sets.filter(keep), ids.filter(keep)
            order = None if order is None else order.filter(keep)
        row += batch.num_rows
        yield Links(_as_strings(sets, cols[0], where), _as_strings(ids, cols[1], where),
                    None if order is None else _order_values(order, cols[2], where))
