"""What a reader is told and counts: the formats, ReadConfig, ReadStats, Links, InputError.

The input formats, `ReadConfig` (format, columns, delimiter, order column), `ReadStats` (lines,
comments, blank and malformed lines counted, never silently dropped), the `Links` chunks every reader
yields, and `InputError`, the error that names the file, the line (or row) and what was expected. Shared
by readers.py, textcheck.py and columns.py."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from .._bounds import bad

FORMATS = ("edges", "lines", "jsonl", "json", "parquet", "csv", "tsv")
COLUMNAR = ("parquet", "csv", "tsv")  # columns have names; a directory or glob of files is accepted
# what a file name says (`prepare --format auto`); .tsv and .txt say nothing: edges, lines or tsv alike
NAMED_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl",
                 ".json": "json"}
MAX_EXAMPLES = 5  # malformed lines quoted in the summary
MAX_MALFORMED = 0.01  # ReadConfig.max_malformed: skip_malformed skips at most 1% of the lines read ...
MALFORMED_FLOOR = 10  # ... or this many, whichever is more (a small file's one or two bad lines are skipped)
_SKIP_HINT = " (pass --skip-malformed to skip and count such lines)"


def format_from_name(path: str | Path) -> str | None:
    """The format a file name says (NAMED_FORMATS; a .gz after it allowed), of a quoted glob its pattern,
    of a directory its first file of a COLUMNAR format, looked for in its sub-folders too (a Spark or
    Ray output: hive partition folders `day=2024-01-01/`, `part-*.parquet`; hidden and `_` names, such
    as `_SUCCESS` and `.crc` files, skipped); None where the name says nothing."""
    path = Path(path)
    if path.is_dir():
        for root, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
            for name in sorted(n for n in names if not n.startswith((".", "_"))):
                if (fmt := format_from_name(Path(root) / name)) in COLUMNAR:
                    return fmt
        return None
    suffixes = [x.lower() for x in path.suffixes]
    if suffixes[-1:] == [".gz"]:
        suffixes.pop()
    return NAMED_FORMATS.get(suffixes[-1]) if suffixes else None


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
    id_separator: str | None = None  # an id field holding several ids (`a;b;c`): one link per id, in order
    back_id: str | None = None  # with id_separator: an id meaning "back" (`a;b;<;c`): the id it returns to
    # skip_malformed skips at most this fraction of the lines read (beyond MALFORMED_FLOOR lines): more is
    # the wrong format or a broken file, refused (ReadStats.check_malformed)
    max_malformed: float = MAX_MALFORMED

    def __post_init__(self):
        if self.format not in FORMATS:
            raise bad("format", f"format must be one of {FORMATS}, got {self.format!r}")
        if self.set_column == self.id_column:
            raise ValueError("set_column and id_column must differ")
        for name, v in (("set_column", self.set_column), ("id_column", self.id_column),
                        ("order_column", self.order_column)):
            if not (isinstance(v, str) and v or isinstance(v, int) and not isinstance(v, bool) and v >= 0
                    or v is None and name == "order_column"):
                raise bad(name, f"{name} must be a column position (int >= 0) or a name, got {v!r}")
        if self.order_column is not None and self.order_column in (self.set_column, self.id_column):
            raise bad("order_column", "order_column must differ from set_column and id_column")
        if len(self.delimiter) != 1 or self.delimiter in "\n\r#\x1f":
            raise bad("delimiter", f"delimiter must be one character, not a newline, '#' or 0x1f, got {self.delimiter!r}")
        if self.id_separator is not None and (len(self.id_separator) != 1 or self.id_separator in "\n\r\x1f"
                                              or self.id_separator == self.delimiter):
            raise bad("id_separator", f"id_separator must be one character, not a newline, 0x1f or the delimiter, "
                             f"got {self.id_separator!r}")
        if isinstance(self.max_malformed, bool) or not isinstance(self.max_malformed, (int, float)) \
                or not 0.0 <= self.max_malformed <= 1.0:
            raise bad("max_malformed", f"max_malformed must be a fraction between 0 and 1, got {self.max_malformed!r}")
        if self.back_id is not None:
            if self.id_separator is None:
                raise ValueError("back_id (--back-id) is resolved within a path held in one field: it needs "
                                 "id_separator (--id-separator)")
            if not self.back_id or self.id_separator in self.back_id:
                raise bad("back_id", f"back_id must be a non-empty id without the id separator, got {self.back_id!r}")

    def summary(self) -> dict:
        """The settings as recorded in meta.json; `order_column`, `id_separator` and `back_id` only when
        set (`max_malformed` when not the default), so that datasets prepared without them keep their
        meta.json byte for byte."""
        d = asdict(self)
        for name in ("order_column", "id_separator", "back_id"):
            if d[name] is None:
                del d[name]
        if d["max_malformed"] == MAX_MALFORMED:
            del d["max_malformed"]
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
    columns: int = 0  # edges: fields on the first data line (0: not an edge list)
    backs: dict = field(default_factory=dict)  # with back_id: {"back_ids_resolved": n, "back_ids_dropped": n}
    no_ids: int = 0  # lines, rows or entries with a set key and no ids (`b7` alone, "ids": [], an empty list)

    def shape(self) -> dict:
        """What the summary records of the lines' shape: an edge list's fields per line where it has
        more than the two it reads, the back ids resolved with back_id, the records with no ids (they make
        no set) where there were any (meta.json keeps its earlier bytes for other inputs)."""
        return {**({"fields_per_line": self.columns} if self.columns > 2 else {}), **self.backs,
                **({"records_without_ids": self.no_ids} if self.no_ids else {})}

    def malformed_line(self, path, line: int, why: str, skip: bool):
        self.malformed_entry(f"{path}:{line}: {why}", skip)

    def malformed_entry(self, msg: str, skip: bool):
        """A malformed line or entry (`msg` names the file and where in it): counted with `skip`, else
        an InputError."""
        if not skip:
            raise InputError(msg + _SKIP_HINT)
        self.count_malformed(msg)

    def invalid_row(self, msg: str, skip: bool, failure: list[str]) -> str:
        """The verdict for Arrow's invalid_row_handler: "skip" (counted, quoted) with `skip`, else "error",
        with the message kept in `failure` for the InputError raised once Arrow stops."""
        if not skip:
            failure.append(msg + _SKIP_HINT)
            return "error"
        self.count_malformed(msg)
        return "skip"

    def check_malformed(self, where, cfg: "ReadConfig", lines_before: int = 0, malformed_before: int = 0) -> None:
        """After reading `where`: with skip_malformed, more malformed lines than cfg.max_malformed of the lines
        read (and more than MALFORMED_FLOOR) is an InputError (the wrong --format or --delimiter, or a
        broken file: skipping would quietly drop most of it). Counts since lines_before / malformed_before."""
        bad, lines = self.malformed - malformed_before, self.lines - lines_before
        if bad > MALFORMED_FLOOR and bad > cfg.max_malformed * lines:
            first = f"; the first: {self.examples[0]}" if self.examples else ""
            raise InputError(f"{where}: {bad:,} of {lines:,} lines malformed ({bad / max(lines, 1):.1%}), more than "
                             f"--skip-malformed skips ({cfg.max_malformed:.0%} of the lines, or {MALFORMED_FLOOR}); "
                             "is --format (or --delimiter) right? (to skip more: --max-malformed, ReadConfig(max_malformed=...))"
                             + first)

    def count_malformed(self, msg: str):
        self.malformed += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(msg)


Chunk = tuple[pa.Array, pa.Array]  # (set keys, id keys), equal length, string type


class Links(NamedTuple):
    """One chunk of links: (links,) string arrays of set and id keys, and the (links,) int64 or float64
    order values when an order column was chosen (else None)."""
    sets: pa.Array
    ids: pa.Array
    order: np.ndarray | None = None
