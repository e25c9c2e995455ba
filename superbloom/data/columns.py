"""The columnar readers: Parquet and CSV / TSV with a header row, columns by name or position.

CSV / TSV have quoted fields (RFC 4180), one record per line: each line's quoting is checked (read_csv),
then Arrow parses the fields in C++. Columns are chosen by name or
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

from .lines import BLOCK_BYTES, raw_lines  # noqa: F401 (BLOCK_BYTES re-exported: readers.py reads it here)
from .read_config import InputError, Links, ReadConfig, ReadStats
from .textcheck import printable

HEADER_DELIMITER = {"csv": ",", "tsv": "\t"}


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


def _complete_line(delimiter: str) -> str:
    """An RE2 pattern of one whole CSV / TSV record on one line (RFC 4180): fields separated by `delimiter`,
    each quoted ("a, b", "" a quote inside) and closed before the next delimiter or the line's end, or
    unquoted (not starting with a quote; a quote later in it is a character)."""
    d = {"\t": "\\t"}.get(delimiter, delimiter)
    field = f'(?:"(?:[^"]|"")*"|[^{d}"][^{d}]*|)'
    return f"^{field}(?:{d}{field})*$"


def _excerpt(line: str, limit: int = 60) -> str:
    """A line as a message shows it: escaped, at most `limit` characters."""
    text = ascii(line)[1:-1]
    return text if len(text) <= limit else text[:limit] + "..."


def _joined(lines: pa.StringArray) -> pa.Buffer:
    """The lines as one text, each ending in a newline: the values buffer of "line" + "\\n" per element."""
    ended = pc.binary_join_element_wise(lines, "", "\n")
    offsets = np.frombuffer(ended.buffers()[1], np.int32, len(ended) + 1, ended.offset * 4)
    return ended.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


def read_csv(path: Path, cfg: ReadConfig, stats: ReadStats, head: str):
    """CSV / TSV with a header row and quoted fields (RFC 4180), the fields parsed by Arrow in C++; the
    chosen columns read as strings (the order column's type inferred from the first block, then kept).

    A record is one line (an id or set key holds no line break): each line's quoting is checked before
    Arrow sees it (a quote that does not close on its line, or text after a closing quote), so that one
    bad quote never swallows the lines after it. Such a line, or one with the wrong number of fields, is
    an InputError naming the line (its text escaped and shortened), or with skip_malformed skipped and
    counted, each line on its own. stats.lines counts every line but the header row."""
    delimiter = HEADER_DELIMITER[cfg.format]
    first = next((line for line in head.splitlines() if line.strip()), None)
    if first is None:
        raise InputError(f"{path}: empty; expected a header row of column names")
    header = next(csv.reader([first.removeprefix("\ufeff")], delimiter=delimiter))  # a BOM, as Arrow skips it
    cols = chosen_columns(header, cfg, path)
    complete = _complete_line(delimiter)
    failure: list[str] = []
    numbers = np.zeros(0, np.int64)  # the file's line number of each line Arrow parses (this block)
    skipped: list[int] = []  # the rows (1-based, of this block) Arrow skipped as malformed

    def invalid_row(row) -> str:
        line = int(numbers[row.number - 1]) if 0 < row.number <= len(numbers) else row.number
        verdict = stats.invalid_row(f"{path}:{line}: expected {len(header)} {cfg.format} fields (as in the "
                                    f"header), got {row.actual_columns}", cfg.skip_malformed, failure)
        skipped.append(row.number)
        return verdict

    parse = pcsv.ParseOptions(delimiter=delimiter, quote_char='"', double_quote=True, newlines_in_values=False,
                              ignore_empty_lines=False, invalid_row_handler=invalid_row)
    types = {cols[0]: pa.string(), cols[1]: pa.string()}
    seen_header = False
    try:
        for start, lines in raw_lines(path, cfg.format):
            lineno = np.arange(start, start + len(lines), dtype=np.int64)
            blank = pc.equal(pc.binary_length(lines), 0).to_numpy(zero_copy_only=False)  # as Arrow skips them
            if not seen_header:  # the header row: the file's first line that is not blank
                content = np.flatnonzero(~blank)
                if not len(content):
                    continue
                lines, lineno, blank = (lines[int(content[0]) + 1:], lineno[int(content[0]) + 1:],
                                        blank[int(content[0]) + 1:])
                stats.lines += int(content[0])  # blank lines above it
                seen_header = True
            stats.lines += len(lines)
            stats.blank += int(blank.sum())
            keep = ~blank
            quoted = pc.match_substring(lines, '"').to_numpy(zero_copy_only=False)
            if quoted.any():  # only the lines with a quote can be incomplete: the pattern runs on those
                bad = np.zeros(len(lines), bool)
                where = np.flatnonzero(quoted)
                bad[where] = ~pc.match_substring_regex(lines.take(pa.array(where)), complete).to_numpy(
                    zero_copy_only=False)
                for i in np.flatnonzero(bad)[: None if cfg.skip_malformed else 1]:
                    stats.malformed_line(path, int(lineno[i]), "a quote that does not close on its line, or text "
                                         f"after a closing quote ({_excerpt(lines[int(i)].as_py())}); a quoted field "
                                         'ends with " before the next delimiter or the line\'s end',
                                         cfg.skip_malformed)
                keep &= ~bad
            if not keep.any():
                continue
            lines, numbers = lines.filter(pa.array(keep)), lineno[keep]
            text = _joined(lines)
            read = pcsv.ReadOptions(column_names=header, use_threads=False, block_size=text.size + 1)
            convert = pcsv.ConvertOptions(include_columns=list(dict.fromkeys(cols)), strings_can_be_null=True,
                                          column_types=types)
            skipped.clear()
            table = pcsv.read_csv(pa.BufferReader(text), read_options=read, parse_options=parse,
                                  convert_options=convert)
            if len(cols) > 2 and cols[2] not in types:  # the order column's type: the first block's for all
                types[cols[2]] = table.schema.field(cols[2]).type
            yield from table_links(table.to_batches(), cols, cfg, stats, path, count_lines=False,
                                  line_numbers=np.delete(numbers, np.asarray(skipped, np.int64) - 1))
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


def table_links(batches, cols: tuple[str, ...], cfg: ReadConfig, stats: ReadStats, where,
                count_lines: bool = True, line_numbers: np.ndarray | None = None) -> Iterator[Links]:
    """Arrow record batches holding the columns `cols` ((set, id) or (set, id, order) names, from
    `chosen_columns`) -> `Links`: an id column of lists exploded (the set and order repeated), keys cast
    to strings, a row with a null counted and skipped (skip_malformed) or an InputError naming `where`
    and the row. Shared by Parquet, CSV/TSV and the in-memory tables of inputs.py; count_lines=False where
    the reader counted the lines itself (CSV / TSV: blank and malformed lines too); `line_numbers`: the
    file's line of each row, named instead of the row's number."""
    row = 1
    for batch in batches:
        sets, ids = batch.column(cols[0]), batch.column(cols[1])
        order = batch.column(cols[2]) if len(cols) > 2 else None
        stats.lines += len(sets) if count_lines else 0
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
            rows = np.arange(row, row + batch.num_rows) if line_numbers is None else \
                line_numbers[row - 1:row - 1 + batch.num_rows]
            first = int(rows[np.flatnonzero(nulls)[0]]) if len(rows) == len(nulls) else row
            named = " or ".join(repr(c) for c in cols) if len(cols) == 2 else \
                f"{cols[0]!r}, {cols[1]!r} or {cols[2]!r}"
            at = f"{where}: row {first}" if line_numbers is None else f"{where}:{first}"
            if not cfg.skip_malformed:
                raise InputError(f"{at}: null in column {named} (pass --skip-malformed to skip and count such rows)")
            stats.malformed += int(nulls.sum())
            stats.examples.append(f"{at}: null value")
            keep = pa.array(~nulls)
            sets, ids = sets.filter(keep), ids.filter(keep)
            order = None if order is None else order.filter(keep)
        row += batch.num_rows
        yield Links(_as_strings(sets, cols[0], where), _as_strings(ids, cols[1], where),
                    None if order is None else _order_values(order, cols[2], where))
