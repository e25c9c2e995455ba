"""Streaming readers: turn an input file into chunks of (set key, id key) string arrays.

Formats (DESIGN.md, "raw ids"):
  edges    one link per line, tab separated (`set<TAB>id`, more columns allowed; pick them with
           `set_column` / `id_column`), `#` comment lines, CRLF tolerated (Wikispeedia, KG triples);
           another one-character `delimiter` (e.g. " " for BERT4Rec's `user item` lines, "," for CSV
           without quoting) splits the same way, every occurrence a field boundary
  lines    one set per line, whitespace separated: `set id id ...` (the S3-Rec files)
  jsonl    one JSON object per line: {"set": ..., "ids": [...]}
  json     one JSON document, parsed whole (in memory; jsonl streams): an object {set: [ids], ...} (the
           S3-Rec item2attributes files), an array of {"set": ..., "ids": [...]} objects, or an array of
           id lists (set key: the position)
  parquet  one row per link; columns by position (default: the first two) or by NAME; an id column of
           lists is exploded; a directory or a glob of Parquet files is read file by file, in sorted order
  csv/tsv  comma / tab separated with a header row and quoted fields (RFC 4180: "a, b" is one field,
           "" a quote), columns by NAME or position

The columnar formats (parquet, csv, tsv) are read in columns.py, whose `table_links` the in-memory
tables of inputs.py share: columns chosen by name or position, lists exploded, nulls reported with file
and row, and an optional `order_column` (numbers, dates or timestamps) carried along so that
prepare.py can read the links as if the input were sorted by it. The settings, counts and the error
type are in read_config.py; the text check in textcheck.py.

Every reader yields Arrow string arrays, never one Python object per link, so a file with hundreds
of millions of links streams in bounded memory. Edge lists are split by Arrow's tab-separated
parser in C++ (comment, blank and malformed lines reach a callback that counts or reports them);
other text formats are read as whole lines (Arrow's CSV engine with a delimiter that never occurs)
and split with vectorised Arrow compute kernels.

A malformed line is an `InputError` naming file, line and what was expected; with
`skip_malformed=True` it is skipped and counted in `ReadStats` instead (never silently).
`check_input` fails early (textcheck.py), before anything is written, on a directory, a file that is not UTF-8
text (binary: never echoed, only an escaped excerpt) and a truncated or corrupt compressed file
(with the number of lines that could be read before the damage).
"""
from __future__ import annotations

import glob
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from ..storage.files import json_loads
from .columns import BLOCK_BYTES, HEADER_DELIMITER, chosen_columns, read_csv, read_parquet, table_links
from .lines import raw_lines
from .read_config import COLUMNAR, FORMATS, Chunk, InputError, Links, ReadConfig, ReadStats, format_from_name
from .textcheck import read_failed, scan_text

__all__ = ["COLUMNAR", "FORMATS", "Chunk", "InputError", "Links", "ReadConfig", "ReadStats", "check_input",
           "as_links", "chosen_columns", "format_from_name", "header_line", "input_files", "read_chunks",
           "read_links", "split_ids", "table_links"]

HEAD_BYTES = 1 << 20  # checked by `check_input`, and where edges look for their column count


def read_links(path: str | Path, cfg: ReadConfig, stats: ReadStats | None = None) -> Iterator[Chunk]:
    """Yield (set keys, id keys) string arrays in file order; `stats` is filled as we go."""
    for links in read_chunks(path, cfg, stats):
        yield links.sets, links.ids


def read_chunks(path: str | Path, cfg: ReadConfig, stats: ReadStats | None = None) -> Iterator[Links]:
    """Yield `Links` in file order (files of a directory or glob in sorted order); `stats` filled as we go."""
    files = input_files(path, cfg)
    stats = stats if stats is not None else ReadStats()
    if cfg.format not in COLUMNAR:
        named = [c for c in (cfg.set_column, cfg.id_column) if isinstance(c, str)]
        if named or cfg.order_column is not None:
            raise InputError(f"{path}: the {cfg.format} format has no column names and no order column; "
                             f"pick columns by position, or use --format csv, tsv or parquet")
    partitions = hive_partitions(path, cfg)
    lines_before, malformed_before = stats.lines, stats.malformed
    for one in files:
        head = check_input(one, cfg)
        if cfg.format == "edges":
            chunks = _read_edges(one, cfg, stats, _first_data_columns(head, cfg.delimiter), head)
        elif cfg.format in HEADER_DELIMITER:
            chunks = read_csv(one, cfg, stats, head)
        else:
            reader = {"lines": _read_lines, "jsonl": _read_jsonl, "json": _read_json, "parquet": read_parquet}[cfg.format]
            chunks = reader(one, cfg, stats, partitions[one]) if one in partitions else reader(one, cfg, stats)
        yield from as_links(chunks, cfg, stats, where=str(one))
    if cfg.skip_malformed:
        stats.check_malformed(path, cfg, lines_before, malformed_before)


def as_links(chunks, cfg: ReadConfig, stats: ReadStats, where: str = "input") -> Iterator[Links]:
    """A reader's chunks as the `Links` every input ends as (files and in-memory inputs alike): id fields
    split at cfg.id_separator (`split_ids`), the reverse links added with cfg.undirected, counted in
    stats.links; empty chunks dropped. `where` names the input in an error."""
    for chunk in chunks:
        sets, ids, order = chunk if len(chunk) == 3 else (*chunk, None)
        if cfg.id_separator is not None:
            sets, ids, order = split_ids(sets, ids, order, cfg, stats, where)
        if cfg.undirected:
            sets, ids = pa.concat_arrays([sets, ids]), pa.concat_arrays([ids, sets])
            order = None if order is None else np.concatenate([order, order])
        stats.links += len(ids)
        if len(ids):
            yield Links(sets, ids, order)


def split_ids(sets: pa.Array, ids: pa.Array, order, cfg: ReadConfig, stats: ReadStats, where: str):
    """Id fields holding several ids separated by cfg.id_separator (a path `A;B;C`) -> one link per id,
    in the field's order, the set key (and order value) repeated. An empty id (`A;;B`, a trailing `;`)
    is an InputError naming `where` and the set, or with skip_malformed dropped and counted."""
    parts = pc.split_pattern(ids, cfg.id_separator)
    parents = pc.list_parent_indices(parts).to_numpy()
    flat = pc.list_flatten(parts)
    empty = pc.equal(pc.binary_length(flat), 0).to_numpy(zero_copy_only=False)
    if empty.any():
        for row in np.flatnonzero(empty)[: None if cfg.skip_malformed else 1]:
            field = ids[int(parents[row])].as_py()
            stats.malformed_entry(f"{where}: set {sets[int(parents[row])].as_py()!r}: an empty id in {field[:60]!r} "
                                  f"(ids separated by {cfg.id_separator!r})", cfg.skip_malformed)
        parents, flat = parents[~empty], flat.filter(pa.array(~empty))
    if cfg.back_id is not None:
        parents, flat = resolve_backs(parents, flat, cfg.back_id, stats)
    return sets.take(pa.array(parents)), flat, None if order is None else np.asarray(order)[parents]


def resolve_backs(parents: np.ndarray, flat: pa.Array, back: str, stats: ReadStats) -> tuple[np.ndarray, pa.Array]:
    """The ids of split fields (flat, each field's ids contiguous, `parents` its field) with every `back`
    id replaced by the id it returns to, as a browser's back button does: the path is a stack, a back
    pops the current id and the id below is visited again (`A;B;C;<;<;D` -> A B C B A D). A back with
    nothing below (at a path's first id) is dropped. Both counted in stats.backs; only the fields that
    hold a back are read into Python."""
    is_back = pc.equal(flat, back).to_numpy(zero_copy_only=False)
    for count in ("back_ids_resolved", "back_ids_dropped"):  # recorded even when no back id was read
        stats.backs.setdefault(count, 0)
    if not is_back.any():
        return parents, flat
    values = flat.to_numpy(zero_copy_only=False).astype(object)
    keep = np.ones(len(values), bool)
    for field_ in np.unique(parents[is_back]):
        lo, hi = np.searchsorted(parents, field_, "left"), np.searchsorted(parents, field_, "right")
        stack = []
        for at in range(lo, hi):
            if values[at] != back:
                stack.append(values[at])
            elif len(stack) >= 2:
                stack.pop()
                values[at] = stack[-1]
                stats.backs["back_ids_resolved"] += 1
            else:
                keep[at] = False
                stats.backs["back_ids_dropped"] += 1
    return parents[keep], pa.array(values[keep], type=flat.type)


def input_files(path: str | Path, cfg: ReadConfig) -> list[Path]:
    """The files of an input: the file itself, or for the columnar formats the Parquet/CSV files of a
    directory and its sub-folders (found by pyarrow.dataset: hidden and `_` files such as Spark's
    `_SUCCESS` and `.crc` checksums skipped) or of a glob, sorted.
    InputError naming the path when there are none."""
    path = Path(path)
    if cfg.format in COLUMNAR and not path.exists() and glob.has_magic(str(path)):
        files = sorted(Path(p) for p in glob.glob(str(path), recursive=True) if Path(p).is_file())
        if not files:
            raise InputError(f"{path}: no file matches this pattern")
        return files
    if cfg.format in COLUMNAR and path.is_dir():
        import pyarrow.dataset as ds

        found = ds.dataset(str(path), format="parquet" if cfg.format == "parquet" else "csv").files
        files = sorted(Path(p) for p in found if not p.endswith(".crc"))  # Hadoop's checksums, if not hidden
        if not files:
            raise InputError(f"{path}: an empty directory; expected {cfg.format} files in it")
        return files
    return [path]


def hive_partitions(path: str | Path, cfg: ReadConfig) -> dict[Path, dict]:
    """For a Parquet directory (a Spark or Ray output), each file's hive partition values, typed as
    pyarrow's discovery types them (`day=2024-01-01/`, `shard=3/`): columns the files themselves lack.
    {} for anything else."""
    path = Path(path)
    if cfg.format != "parquet" or not path.is_dir():
        return {}
    import pyarrow.dataset as ds

    found = ds.dataset(str(path), format="parquet", partitioning="hive", exclude_invalid_files=False)
    return {Path(f.path): ds.get_partition_keys(f.partition_expression) for f in found.get_fragments()
            if ds.get_partition_keys(f.partition_expression)}


def check_input(path: str | Path, cfg: ReadConfig) -> str:
    """Fail now, with an `InputError` naming the file, on an input that cannot be read as `cfg.format`:
    a missing path, a directory (except for the columnar formats), a device (/dev/zero: endless), and for text formats a first MB that
    is not UTF-8 text or a damaged compressed file. -> the first MB of text ("" for parquet, a directory
    or a glob, whose files are checked as they are read)."""
    path = Path(path)
    if cfg.format in COLUMNAR and (path.is_dir() or not path.exists() and glob.has_magic(str(path))):
        input_files(path, cfg)
        return ""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory; expected a file in the {cfg.format} format")
    if path.is_char_device() or path.is_block_device() or path.is_socket():  # /dev/zero would never end
        raise InputError(f"{path}: a device or socket, not a file in the {cfg.format} format (it may never end)")
    return "" if cfg.format == "parquet" else scan_text(path, cfg.format, limit=HEAD_BYTES)


# ---------------------------------------------------------------- text lines as Arrow arrays


def _content_lines(path: Path, stats: ReadStats, fmt: str):
    """Like `raw_lines` but drop blank and `#` comment lines (counted); keep their line numbers."""
    for first, col in raw_lines(path, fmt):
        stats.lines += len(col)
        blank = pc.equal(pc.binary_length(col), 0)  # whitespace-only lines are left to the format
        comment = pc.starts_with(col, "#")
        drop = pc.or_(blank, comment)
        n_blank, n_comment = pc.sum(blank).as_py() or 0, pc.sum(comment).as_py() or 0
        stats.blank += n_blank
        stats.comments += n_comment
        lineno = np.arange(first, first + len(col), dtype=np.int64)
        if n_blank or n_comment:
            keep = pc.invert(drop)
            col = col.filter(keep)
            lineno = lineno[keep.to_numpy(zero_copy_only=False)]
        yield lineno, col


def _first_data_columns(head: str, delimiter: str = "\t") -> int | None:
    """Fields on the first line of `head` that is neither blank nor a comment."""
    for line in head.splitlines():
        if line.strip() and not line.startswith("#"):
            return line.rstrip("\r").count(delimiter) + 1
    return None


def _number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def header_line(head: str, cfg: ReadConfig) -> tuple[int, str] | None:
    """(line number, text) of an edge list's first data line where it looks like a header row: its set
    and id fields are not numbers while those of every following data line in `head` (at least one)
    are (`User<TAB>item` above `1<TAB>6393`). None otherwise, and for string ids, where a header
    cannot be told from data."""
    cols = (cfg.set_column, cfg.id_column)
    if cfg.format != "edges" or not all(isinstance(c, int) for c in cols):
        return None
    lines = [(n, line.rstrip("\r")) for n, line in enumerate(head.splitlines()[:1001], 1)
             if line.strip() and not line.startswith("#")]
    if len(lines) < 2 or not head.endswith("\n") and len(lines) < 3:
        return None
    rows = [line.split(cfg.delimiter) for _, line in lines[: None if head.endswith("\n") else -1]]
    if any(len(r) <= max(cols) for r in rows):
        return None
    first = [rows[0][c] for c in cols]
    if any(_number(f) for f in first) or not all(_number(r[c]) for r in rows[1:] for c in cols):
        return None
    return lines[0]


def space_layout(head: str) -> str | None:
    """How a text file with no tab on its first lines is laid out, from those lines (`head`, the first
    MB): "lines" where they hold two or more whitespace-separated fields in varying numbers, or two on
    every line (a set and one id, which the lines format reads as it reads a set and its ids: `1 6393`,
    `1 1 2 3 4`); "table" where every line holds the same number, three or more (`user item rating`);
    None otherwise (a tab, a line of one field, or no data line)."""
    rows = [line for line in head.splitlines()[:1001] if line.strip() and not line.startswith("#")]
    if not head.endswith("\n"):
        rows = rows[:-1]  # the first MB may end inside a line
    if not rows or any("\t" in r for r in rows):
        return None
    counts = {len(r.split()) for r in rows}
    if min(counts) < 2:
        return None
    return "table" if len(counts) == 1 and min(counts) >= 3 else "lines"


def _space_hint(head: str) -> str:
    """The flags for a space-separated file read as tab-separated edges, or ''."""
    layout = space_layout(head)
    if layout == "lines":
        return "; the lines are space-separated: pass --format lines (a set, then its ids, on each line)"
    if layout == "table":
        return "; the lines are space-separated columns: pass --delimiter space"
    return ""


def _read_edges(path: Path, cfg: ReadConfig, stats: ReadStats, ncols: int | None, head: str = ""):
    """Arrow's tab-separated parser splits the columns in C++; comment lines, blank lines and
    malformed rows reach `invalid_row` (rare), which counts them or reports file and line.
    ncols: fields on the first data line (None: no data line in the first MB)."""
    need = max(cfg.set_column, cfg.id_column) + 1
    ncols = ncols or need
    if ncols < need:
        named = format_from_name(path)
        if named not in (None, cfg.format):
            hint = f"; the file name says {named}: pass --format {named} (ReadConfig(format={named!r}))"
        elif cfg.format == "edges":
            hint = ((_space_hint(head) if cfg.delimiter == "\t" else "")
                    or "; --delimiter sets the character between fields")
        else:
            hint = ""
        raise InputError(f"{path}: expected at least {need} {cfg.fields} fields per line, the first data "
                         f"line has {ncols}{hint}")
    header = header_line(head, cfg)
    if header:
        csv_like = {"\t": "tsv", ",": "csv"}.get(cfg.delimiter) if header[0] == 1 else None  # no comments above
        fix = (f"pass --format {csv_like} (ReadConfig(format={csv_like!r})) to read it as column names, or "
               if csv_like else "")
        names = ", ".join(header[1].split(cfg.delimiter))[:80]
        raise InputError(f"{path}:{header[0]}: ({names}) looks like a header row above numeric ids; the edges "
                         f"format has none: {fix}delete the line")
    stats.columns = max(stats.columns, ncols)
    skipped: list[int] = []  # physical numbers of lines the parser skipped (for exact line numbers)
    failure: list[str] = []

    def invalid_row(row) -> str:
        text = row.text or ""
        if text.startswith("#") or not text.strip():
            stats.comments += text.startswith("#")
            stats.blank += not text.startswith("#")
        else:
            msg = f"{path}:{row.number}: expected {ncols} {cfg.fields} fields, got {row.actual_columns}"
            if stats.invalid_row(msg, cfg.skip_malformed, failure) == "error":
                return "error"
        skipped.append(int(row.number))
        return "skip"

    names = [f"c{i}" for i in range(ncols)]
    keep = list(dict.fromkeys([names[0], names[cfg.set_column], names[cfg.id_column]]))  # c0: comments
    read = pcsv.ReadOptions(column_names=names, block_size=BLOCK_BYTES, use_threads=False)
    parse = pcsv.ParseOptions(delimiter=cfg.delimiter, quote_char=False, escape_char=False, ignore_empty_lines=False,
                              newlines_in_values=False, invalid_row_handler=invalid_row)
    convert = pcsv.ConvertOptions(column_types={n: pa.string() for n in keep}, include_columns=keep,
                                  strings_can_be_null=False, quoted_strings_can_be_null=False)
    rows_before = 0
    try:
        with pcsv.open_csv(pa.input_stream(str(path), compression="detect"), read_options=read,
                           parse_options=parse, convert_options=convert) as reader:
            for batch in reader:
                sets, ids = batch.column(names[cfg.set_column]), batch.column(names[cfg.id_column])
                stats.lines += len(sets)
                comment = pc.starts_with(batch.column("c0"), "#")  # comment lines that contain a tab
                e_set, e_id = pc.equal(pc.binary_length(sets), 0), pc.equal(pc.binary_length(ids), 0)
                drop = pc.or_(comment, pc.or_(e_set, e_id))
                if pc.any(drop).as_py():
                    stats.comments += pc.sum(comment).as_py() or 0
                    stats.blank += pc.sum(pc.and_(pc.invert(comment), pc.and_(e_set, e_id))).as_py() or 0
                    one = pc.and_(pc.invert(comment), pc.xor(e_set, e_id)).to_numpy(zero_copy_only=False)
                    for i in np.flatnonzero(one)[: (None if cfg.skip_malformed else 1)]:
                        line = _physical_line(rows_before + int(i), skipped)
                        stats.malformed_line(path, line, "empty set or id field", cfg.skip_malformed)
                    sets, ids = sets.filter(pc.invert(drop)), ids.filter(pc.invert(drop))
                rows_before += batch.num_rows
                yield sets, ids
    except (pa.ArrowInvalid, OSError, EOFError) as e:
        if failure:
            raise InputError(failure[0]) from None
        raise read_failed(path, "edges", e) from None
    stats.lines += len(skipped)


def _physical_line(row: int, skipped: list[int]) -> int:
    """1-based file line of the `row`-th (0-based) parsed row, given the lines the parser skipped."""
    s = np.asarray(sorted(skipped), np.int64)
    line = row + 1
    while True:
        nxt = row + 1 + int(np.searchsorted(s, line, side="right"))
        if nxt == line:
            return line
        line = nxt


def _read_lines(path: Path, cfg: ReadConfig, stats: ReadStats):
    for _, col in _content_lines(path, stats, "lines"):
        col = pc.utf8_trim_whitespace(col)
        blank = pc.equal(pc.binary_length(col), 0)  # whitespace-only lines
        if pc.any(blank).as_py():
            stats.blank += pc.sum(blank).as_py()
            col = col.filter(pc.invert(blank))
        parts = pc.utf8_split_whitespace(col)  # [set, id, id, ...]
        counts = pc.list_value_length(parts).to_numpy()
        stats.no_ids += int((counts == 1).sum())  # a set key alone: no set is made of it
        sets_per_line = pc.list_element(parts, 0)
        ids = pc.list_flatten(pc.list_slice(parts, 1))
        owner = np.repeat(np.arange(len(counts)), np.maximum(counts - 1, 0))
        yield sets_per_line.take(pa.array(owner)), ids


def _read_jsonl(path: Path, cfg: ReadConfig, stats: ReadStats):
    """JSON objects are parsed one line at a time (one Python object per set, not per link)."""
    for lineno, col in _content_lines(path, stats, "jsonl"):
        sets, ids, owners = [], [], []
        for ln, text in zip(lineno.tolist(), col.to_pylist()):
            why = None
            try:
                obj = json_loads(text)
            except json.JSONDecodeError as e:
                obj, why = None, f"invalid JSON ({e.msg} at column {e.colno})"
            if why is None and not isinstance(obj, dict):
                why = f"expected a JSON object, got {type(obj).__name__}"
            elif why is None and (cfg.set_field not in obj or cfg.ids_field not in obj):
                why = f"expected keys {cfg.set_field!r} and {cfg.ids_field!r}, got {sorted(obj)}"
            elif why is None and not isinstance(obj[cfg.ids_field], list):
                why = f"field {cfg.ids_field!r} must be a list, got {type(obj[cfg.ids_field]).__name__}"
            elif why is None and any(isinstance(x, (list, dict)) or x is None for x in obj[cfg.ids_field]):
                why = f"field {cfg.ids_field!r} must hold strings or numbers"
            if why is not None:
                stats.malformed_line(path, ln, why, cfg.skip_malformed)
                continue
            stats.no_ids += not obj[cfg.ids_field]
            sets.append(str(obj[cfg.set_field]))
            ids.extend(obj[cfg.ids_field])
            owners.append(len(obj[cfg.ids_field]))
        if ids:
            owner = np.repeat(np.arange(len(sets)), owners)
            yield pa.array(sets, pa.string()).take(pa.array(owner)), pa.array([str(x) for x in ids], pa.string())


CHUNK_LINKS = 1 << 20  # links per chunk from sets_chunks and the in-memory adapters (inputs.py)


def _read_json(path: Path, cfg: ReadConfig, stats: ReadStats):
    """One JSON document (parsed whole): an object {set: [ids]}, an array of {set_field: .., ids_field:
    [..]} objects, or an array of id lists (the position is the set key). InputError naming the file,
    and the line and column of a syntax error."""
    text = scan_text(path, "json", limit=1 << 62)  # the whole (decompressed, UTF-8 checked) text
    try:
        doc = json_loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}: invalid JSON ({e.msg} at column {e.colno}); the json format is one "
                         "document (an object {set: [ids]} or an array of sets); jsonl is one object per line") from None
    if isinstance(doc, Mapping):
        items = doc.items()
    elif isinstance(doc, list):
        items = _json_array_sets(path, doc, cfg, stats)
    else:
        raise InputError(f"{path}: expected a JSON object {{set: [ids], ...}} or an array of sets, got a JSON "
                         f"{type(doc).__name__}")
    yield from sets_chunks(items, stats, where=f"{path}: ", skip=cfg.skip_malformed)


def _json_array_sets(path: Path, doc: list, cfg: ReadConfig, stats: ReadStats):
    """(set key, ids) of each element of a JSON array: an object with the set and ids fields, or a list
    of ids (its position the key); another element is malformed (counted with skip_malformed)."""
    for i, x in enumerate(doc):
        if isinstance(x, list):
            yield str(i), x
        elif isinstance(x, dict) and cfg.set_field in x and cfg.ids_field in x:
            yield x[cfg.set_field], x[cfg.ids_field]
        else:
            stats.lines += 1
            got = f"keys {sorted(x)}" if isinstance(x, dict) else f"a JSON {type(x).__name__}"
            stats.malformed_entry(f"{path}: element {i}: expected a list of ids or an object with keys "
                                  f"{cfg.set_field!r} and {cfg.ids_field!r}, got {got}", cfg.skip_malformed)


def sets_chunks(items: Iterable, stats: ReadStats, where: str = "", skip: bool = False) -> Iterator[Chunk]:
    """(set key, ids) pairs -> (set keys, id keys) string chunks of about CHUNK_LINKS links; one
    Python `str` per id (the ids are Python objects already: a mapping read from JSON, or the sets of
    inputs.py). A Python set or frozenset has no order: its ids are sorted (as strings), so the dataset
    does not depend on hash seeds. A set whose ids are not a collection of scalars is an InputError
    (`where` + the key), or with `skip` counted as malformed."""
    sets, ids, sizes = [], [], []
    for key, members in items:
        stats.lines += 1
        if isinstance(members, (str, bytes, Mapping)) or not isinstance(members, Iterable):
            stats.malformed_entry(f"{where}set {key!r}: expected a collection of ids (a list, tuple, set, ...), "
                                  f"got {type(members).__name__}", skip)
            continue
        values = list(members)
        if any(x is None or isinstance(x, (list, tuple, dict, set, frozenset)) for x in values):
            stats.malformed_entry(f"{where}set {key!r}: ids must be strings, numbers or other scalar values", skip)
            continue
        strings = [str(x) for x in values]
        stats.no_ids += not strings
        if isinstance(members, (set, frozenset)):
            strings.sort()
        sets.append(str(key))
        sizes.append(len(strings))
        ids.extend(strings)
        if len(ids) >= CHUNK_LINKS:
            yield _owned(sets, sizes), pa.array(ids, pa.string())
            sets, ids, sizes = [], [], []
    if ids:
        yield _owned(sets, sizes), pa.array(ids, pa.string())


def _owned(sets: list[str], sizes: list[int]) -> pa.Array:
    """Each set key repeated once per id: (links,) strings."""
    return pa.array(sets, pa.string()).take(pa.array(np.repeat(np.arange(len(sets)), sizes)))
