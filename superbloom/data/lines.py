"""A text file's physical lines as Arrow string arrays, numbered: every line one row, nothing parsed.

Arrow's CSV engine in C++ with no quote character, no escape and a delimiter that never occurs in text
(0x1f, refused by textcheck.py), so a line is a row whatever it holds; blank lines are kept (as "") so
that the numbers are the file's. The line formats split these rows themselves, and the CSV reader
checks each line's quoting before Arrow parses its fields (columns.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.csv as pcsv

from .textcheck import read_failed

BLOCK_BYTES = 16 << 20  # text parsed per Arrow block


def raw_lines(path: Path, fmt: str) -> Iterator[tuple[int, pa.StringArray]]:
    """Yield (number of the first line, lines) for every block of the (optionally gzipped) file; an
    InputError naming the file for invalid UTF-8, a 0x1f byte or a truncated or corrupt compressed file."""
    read = pcsv.ReadOptions(column_names=["line"], block_size=BLOCK_BYTES, use_threads=False)
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
        raise read_failed(path, fmt, e) from None
