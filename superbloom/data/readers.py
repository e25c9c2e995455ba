"""Streaming readers: turn an input file into chunks of (set key, id key) string arrays.

Formats (DESIGN.md, "raw ids"):
  edges    one link per line, tab separated (`set<TAB>id`, more columns allowed; pick them with
           `set_column` / `id_column`), `#` comment lines, CRLF tolerated (Wikispeedia, KG triples);
           another one-character `delimiter` (e.g. " " for BERT4Rec's `user item` lines, "," for CSV
           without quoting) splits the same way, every occurrence a field boundary
  lines    one set per line, whitespace separated: `set id id ...` (the S3-Rec files)
  jsonl    one JSON object per line: {"set": ..., "ids": [...]}
  parquet  one row per link; columns by position (default: the first two) or by NAME; an id column of
           lists is exploded; a directory or a glob of Parquet files is read file by file, in sorted order
  csv/tsv  comma / tab separated with a header row and quoted fields (RFC 4180: "a, b" is one field,
           "" a quote), columns by NAME or position

The columnar formats (parquet, csv, tsv) and the in-memory tables of inputs.py share `table_links`:
columns chosen by name or position, lists exploded, nulls reported with file and row, and an optional
`order_column` (numbers, dates or timestamps) carried along so that prepare.py can read the links as if
the input were sorted by it.

Every reader yields Arrow string arrays, never one Python object per link, so a file with hundreds
of millions of links streams in bounded memory. Edge lists are split by Arrow's tab-separated
parser in C++ (comment, blank and malformed lines reach a callback that counts or reports them);
other text formats are read as whole lines (Arrow's CSV engine with a delimiter that never occurs)
and split with vectorised Arrow compute kernels.

A malformed line is an `InputError` naming file, line and what was expected; with
`skip_malformed=True` it is skipped and counted in `ReadStats` instead (never silently).
`check_input` fails early, before anything is written, on a directory, a file that is not UTF-8
text (binary: never echoed, only an escaped excerpt) and a truncated or corrupt compressed file
(with the number of lines that could be read before the damage).
"""
from __future__ import annotations

import csv
import glob
import json
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

FORMATS = ("edges", "lines", "jsonl", "parquet", "csv", "tsv")
COLUMNAR = ("parquet", "csv", "tsv")  # columns have names; a directory or glob of files is accepted
_HEADER_DELIMITER = {"csv": ",", "tsv": "\t"}
_BLOCK_BYTES = 16 << 20  # text parsed per Arrow block
_MAX_EXAMPLES = 5  # malformed lines quoted in the summary
_HEAD_BYTES = 1 << 20  # checked by `check_input`, and where edges look for their column count
_PIECE_BYTES = 1 << 16  # (compressed) bytes read at a time when checking text


class InputError(ValueError):
    """Bad input: the message names the file, the line (or row) and what was expected."""


@dataclass(frozen=True)
class ReadConfig:
    format: str = "edges"
    set_column: int | str = 0  # which column holds the set key: a position, or a name (columnar formats, tables)
    id_column: int | str = 1  # which column holds the id (position or name)
    undirected: bool = False  # edges: also add the reverse link (id's set gets the set key as id)
    skip_malformed: bool = False  # count and skip malformed lines instead of failing
    set_field: str = "set"  # jsonl keys
    ids_field: str = "ids"
    delimiter: str = "\t"  # edges: the one character between fields
    order_column: int | str | None = None  # columnar formats, tables: links are read sorted by it (stable)

    def __post_init__(self):
        if self.format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {self.format!r}")
        if self.set_column == self.id_column:
            raise ValueError("set_column and id_column must differ")
        for name, v in (("set_column", self.set_column), ("id_column", self.id_column),
                        ("order_column", self.order_column)):
            if not (isinstance(v, str) and v or isinstance(v, int) and not isinstance(v, bool) and v >= 0
                    or v is None and name == "order_column"):
                raise ValueError(f"{name} must be a column position (int >= 0) or a name, got {v!r}")
        if self.order_column is not None and self.order_column in (self.set_column, self.id_column):
            raise ValueError("order_column must differ from set_column and id_column")
        if len(self.delimiter) != 1 or self.delimiter in "\n\r#\x1f":
            raise ValueError(f"delimiter must be one character, not a newline, '#' or 0x1f, got {self.delimiter!r}")

    def summary(self) -> dict:
        """The settings as recorded in meta.json; `order_column` only when set, so that datasets prepared
        without it keep their meta.json byte for byte."""
        d = asdict(self)
        if d["order_column"] is None:
            del d["order_column"]
        return d

    @property
    def fields(self) -> str:
        """How the edge fields are separated, for messages."""
        return {"\t": "tab", " ": "space", ",": "comma", ";": "semicolon", "|": "bar"}.get(
            self.delimiter, repr(self.delimiter)) + "-separated"


@dataclass
class ReadStats:
    lines: int = 0  # physical lines (or parquet rows) read
    comments: int = 0
    blank: int = 0
    malformed: int = 0
    links: int = 0  # (set, id) pairs yielded
    examples: list = field(default_factory=list)  # first malformed lines, "file:line: why"

    def malformed_line(self, path, line: int, why: str, skip: bool):
        msg = f"{path}:{line}: {why}"
        if not skip:
            raise InputError(msg + " (pass --skip-malformed to skip and count such lines)")
        self.malformed += 1
        if len(self.examples) < _MAX_EXAMPLES:
            self.examples.append(msg)


Chunk = tuple[pa.Array, pa.Array]  # (set keys, id keys), equal length, string type


class Links(NamedTuple):
    """One chunk of links: (links,) string arrays of set and id keys, and the (links,) int64 or float64
    order values when an order column was chosen (else None)."""
    sets: pa.Array
    ids: pa.Array
    order: np.ndarray | None = None


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
    for one in files:
        head = check_input(one, cfg)
        if cfg.format == "edges":
            chunks = _read_edges(one, cfg, stats, _first_data_columns(head, cfg.delimiter))
        elif cfg.format in _HEADER_DELIMITER:
            chunks = _read_csv(one, cfg, stats, head)
        else:
            reader = {"lines": _read_lines, "jsonl": _read_jsonl, "parquet": _read_parquet}[cfg.format]
            chunks = reader(one, cfg, stats)
        yield from undirected_links(chunks, cfg, stats)


def undirected_links(chunks, cfg: ReadConfig, stats: ReadStats) -> Iterator[Links]:
    """Chunks as `Links` (the reverse links added with cfg.undirected), counted in stats.links; empty
    chunks dropped."""
    for chunk in chunks:
        sets, ids, order = chunk if len(chunk) == 3 else (*chunk, None)
        if cfg.undirected:
            sets, ids = pa.concat_arrays([sets, ids]), pa.concat_arrays([ids, sets])
            order = None if order is None else np.concatenate([order, order])
        stats.links += len(ids)
        if len(ids):
            yield Links(sets, ids, order)


def input_files(path: str | Path, cfg: ReadConfig) -> list[Path]:
    """The files of an input: the file itself, or for the columnar formats the Parquet/CSV files of a
    directory (found by pyarrow.dataset: hidden and `_` files skipped) or of a glob, sorted.
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
        files = sorted(Path(p) for p in found)
        if not files:
            raise InputError(f"{path}: an empty directory; expected {cfg.format} files in it")
        return files
    return [path]


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
    return "" if cfg.format == "parquet" else _scan_text(path, cfg.format, limit=_HEAD_BYTES)


# ---------------------------------------------------------------- checking text and compressed files


def _byte_pieces(path: Path) -> Iterator[bytes]:
    """The file's (decompressed, by extension as Arrow does) bytes in pieces. gzip is inflated here
    with zlib so that the bytes before a truncation or corruption still come out; other codecs are
    read through Arrow."""
    codec = _codec(path)
    if codec == "gzip":
        with open(path, "rb") as f:
            magic = f.read(2)
            if magic and magic != b"\x1f\x8b":
                raise _NotCompressed(f"not a gzip file although its name ends in {path.suffix} (it starts with "
                                     f"{magic + f.read(6)!r})")
            f.seek(0)
            d = zlib.decompressobj(31)
            for piece in iter(lambda: f.read(_PIECE_BYTES), b""):
                while piece:
                    if d.eof:  # the next member of a multi-member file
                        d = zlib.decompressobj(31)
                    yield d.decompress(piece, 1 << 20)
                    piece = d.unused_data if d.eof else d.unconsumed_tail
            if not d.eof:
                raise EOFError("the compressed data ends before its end-of-stream marker")
        return
    with pa.input_stream(str(path), compression="detect") as f:
        yield from iter(lambda: f.read(_PIECE_BYTES), b"")


class _NotCompressed(Exception):
    pass


def _codec(path: Path) -> str | None:
    try:
        return pa.Codec.detect(str(path)).name
    except (TypeError, ValueError, pa.ArrowInvalid):
        return None


def _bad_text(data: bytes, fmt: str, partial: bool, start: int = 0) -> tuple[int, str] | None:
    """(offset, what) of the first byte at or after `start` that makes `data` not UTF-8 text in format
    `fmt`, or None. partial: `data` may end inside a multi-byte character. `start` is backed up to the
    character that holds it, so a long line is checked once, not again with every piece read."""
    while 0 < start < len(data) and data[start] & 0xC0 == 0x80:  # a continuation byte: back to its lead
        start -= 1
    bad = None
    try:
        data[start:].decode("utf-8")
    except UnicodeDecodeError as e:
        if not (partial and start + e.end == len(data) and e.reason == "unexpected end of data"):
            bad = (start + e.start, f"invalid UTF-8 byte 0x{data[start + e.start]:02x}")
    for byte, what in ((b"\0", "a NUL byte"), (b"\x1f", "a unit-separator byte 0x1f")):
        if byte == b"\x1f" and fmt == "edges":
            continue  # only the line formats use 0x1f internally
        at = data.find(byte, start, len(data) if bad is None else bad[0])
        if at >= 0:
            bad = (at, what)
    return bad


def _scan_text(path: Path, fmt: str, limit: int | None = None) -> str:
    """Read the (decompressed) text up to about `limit` bytes (None: all of it), checking that it is
    UTF-8 text -> the complete lines read. InputError naming the file and line (with an escaped
    excerpt, never the raw bytes) at the first bad byte, or naming a truncated / corrupt compressed
    file with the number of lines read before the damage."""
    lines, carry, size, parts = 0, b"", 0, []

    def fail_at(data: bytes, at: int, what: str):
        start = data.rfind(b"\n", 0, at) + 1
        line = lines + data.count(b"\n", 0, start) + 1
        excerpt = data[max(start, at - 16): at + 16]
        hint = ""
        if data.startswith(b"\x1f\x8b") and lines == 0:
            hint = "; it looks gzip-compressed: give it a name ending in .gz"
        elif data.startswith(b"PAR1") and lines == 0:
            hint = "; it looks like a Parquet file: use --format parquet"
        raise InputError(f"{path}:{line}: not a UTF-8 text file in the {fmt} format ({what} at byte {at - start + 1} "
                         f"of the line, near {excerpt!r}){hint}")

    try:
        for piece in _byte_pieces(path):
            data = carry + piece
            cut = data.rfind(b"\n") + 1
            if bad := _bad_text(data, fmt, partial=True, start=max(0, len(carry) - 3)):
                fail_at(data, *bad)
            lines += data.count(b"\n", 0, cut)
            carry = data[cut:]
            size += len(piece)
            if limit is not None:
                parts.append(data[:cut])
                if size >= limit:
                    return b"".join(parts).decode("utf-8")
        if bad := _bad_text(carry, fmt, partial=False):
            fail_at(carry, *bad)
    except _NotCompressed as e:
        raise InputError(f"{path}: {e}") from None
    except (OSError, EOFError, zlib.error, pa.ArrowInvalid) as e:
        codec = _codec(path)
        what = f"truncated or corrupt {codec} file" if codec else "read failed"
        exact = codec in (None, "gzip")  # other codecs are read through Arrow, which drops the piece that failed
        raise InputError(f"{path}: {what} ({_printable(e)}); {'' if exact else 'at least '}{lines:,} complete "
                         "lines could be read before it") from None
    return b"".join(parts + [carry]).decode("utf-8") if limit is not None else ""


def _printable(e: Exception, limit: int = 200) -> str:
    """An exception message safe for a terminal: control and non-ASCII characters escaped, shortened."""
    text = ascii(str(e))[1:-1]
    return text if len(text) <= limit else text[:limit] + "..."


def _read_failed(path: Path, fmt: str, e: Exception) -> InputError:
    """An Arrow read failed: find out why by scanning the file (error path only) -> the InputError."""
    try:
        _scan_text(path, fmt)
    except InputError as found:
        return found
    return InputError(f"{path}: cannot read as UTF-8 {fmt} text ({_printable(e)})")


# ---------------------------------------------------------------- text lines as Arrow arrays


def _raw_lines(path: Path, fmt: str) -> Iterator[tuple[int, pa.StringArray]]:
    """Yield (number of the first line, lines) for every block of the (optionally gzipped) file."""
    read = pcsv.ReadOptions(column_names=["line"], block_size=_BLOCK_BYTES, use_threads=False)
    parse = pcsv.ParseOptions(delimiter="\x1f", quote_char=False, escape_char=False,
                              ignore_empty_lines=False, newlines_in_values=False)
    convert = pcsv.ConvertOptions(column_types={"line": pa.string()}, strings_can_be_null=False,
                                  quoted_strings_can_be_null=False)
    first = 1
    try:
        stream = pa.input_stream(str(path), compression="detect")
        with pcsv.open_csv(stream, read_options=read, parse_options=parse, convert_options=convert) as rd:
            for batch in rd:
                col = batch.column(0)
                yield first, col
                first += len(col)
    except (pa.ArrowInvalid, OSError, EOFError) as e:  # invalid UTF-8, a 0x1f byte, truncated gzip, ...
        raise _read_failed(path, fmt, e) from None


def _content_lines(path: Path, stats: ReadStats, fmt: str):
    """Like `_raw_lines` but drop blank and `#` comment lines (counted); keep their line numbers."""
    for first, col in _raw_lines(path, fmt):
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


def _read_edges(path: Path, cfg: ReadConfig, stats: ReadStats, ncols: int | None):
    """Arrow's tab-separated parser splits the columns in C++; comment lines, blank lines and
    malformed rows reach `invalid_row` (rare), which counts them or reports file and line.
    ncols: fields on the first data line (None: no data line in the first MB)."""
    need = max(cfg.set_column, cfg.id_column) + 1
    ncols = ncols or need
    if ncols < need:
        raise InputError(f"{path}: expected at least {need} {cfg.fields} fields per line, the first data "
                         f"line has {ncols}")
    skipped: list[int] = []  # physical numbers of lines the parser skipped (for exact line numbers)
    failure: list[str] = []

    def invalid_row(row) -> str:
        text = row.text or ""
        if text.startswith("#") or not text.strip():
            stats.comments += text.startswith("#")
            stats.blank += not text.startswith("#")
        else:
            msg = f"{path}:{row.number}: expected {ncols} {cfg.fields} fields, got {row.actual_columns}"
            if not cfg.skip_malformed:
                failure.append(msg + " (pass --skip-malformed to skip and count such lines)")
                return "error"
            stats.malformed += 1
            if len(stats.examples) < _MAX_EXAMPLES:
                stats.examples.append(msg)
        skipped.append(int(row.number))
        return "skip"

    names = [f"c{i}" for i in range(ncols)]
    keep = list(dict.fromkeys([names[0], names[cfg.set_column], names[cfg.id_column]]))  # c0: comments
    read = pcsv.ReadOptions(column_names=names, block_size=_BLOCK_BYTES, use_threads=False)
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
        raise _read_failed(path, "edges", e) from None
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
                obj = json.loads(text)
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
            sets.append(str(obj[cfg.set_field]))
            ids.extend(obj[cfg.ids_field])
            owners.append(len(obj[cfg.ids_field]))
        if ids:
            owner = np.repeat(np.arange(len(sets)), owners)
            yield pa.array(sets, pa.string()).take(pa.array(owner)), pa.array([str(x) for x in ids], pa.string())


def _read_parquet(path: Path, cfg: ReadConfig, stats: ReadStats):
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError(f"{path}: not a readable Parquet file ({e})") from None
    cols = chosen_columns(pf.schema_arrow.names, cfg, path)
    yield from table_links(pf.iter_batches(columns=list(dict.fromkeys(cols)), batch_size=1 << 20), cols, cfg, stats,
                           path)


def _read_csv(path: Path, cfg: ReadConfig, stats: ReadStats, head: str):
    """CSV / TSV with a header row and quoted fields, parsed by Arrow in C++; the chosen columns read as
    strings (the order column's type inferred); a row with the wrong number of fields is an InputError
    naming the line (or skipped and counted with skip_malformed)."""
    delimiter = _HEADER_DELIMITER[cfg.format]
    first = next((line for line in head.splitlines() if line.strip()), None)
    if first is None:
        raise InputError(f"{path}: empty; expected a header row of column names")
    header = next(csv.reader([first.removeprefix("\ufeff")], delimiter=delimiter))  # a BOM, as Arrow skips it
    cols = chosen_columns(header, cfg, path)
    failure: list[str] = []

    def invalid_row(row) -> str:
        msg = f"{path}:{row.number}: expected {len(header)} {cfg.format} fields (as in the header), got " \
              f"{row.actual_columns}"
        if not cfg.skip_malformed:
            failure.append(msg + " (pass --skip-malformed to skip and count such lines)")
            return "error"
        stats.malformed += 1
        if len(stats.examples) < _MAX_EXAMPLES:
            stats.examples.append(msg)
        return "skip"

    read = pcsv.ReadOptions(block_size=_BLOCK_BYTES, use_threads=False)
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
        raise InputError(f"{path}: cannot read as {cfg.format} with a header ({_printable(e)})") from None


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
