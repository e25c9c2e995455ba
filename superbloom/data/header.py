"""Drop a file's header line before reading it: the readers skip `#` comment lines only, so a table
with a column-name header (Epinions' `user item category rating helpfulness time`) is copied once
without it. The header is checked, not guessed: a file whose first line differs is an error naming
the file, the expected and the found line, so a changed download never loses a line of data.

    strip_header(Path("epinions_ratings.tsv.gz"), Path("epinions.tsv"), "user\\titem\\tcategory\\t...")
"""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path

from .readers import InputError

_COPY_BYTES = 16 << 20  # bytes copied at a time


def strip_header(src: Path, dst: Path, header: str) -> dict:
    """Stream `src` (gzip when it ends in .gz, else text) to `dst` (plain text) without its first line,
    after checking that the line is `header` (line ending aside). `dst` appears only when complete
    (written as dst.tmp, then renamed). -> {"header_lines_dropped": 1, "header": header}."""
    src, dst = Path(src), Path(dst)
    opener = gzip.open if src.suffix == ".gz" else open
    tmp = dst.with_suffix(".tmp")
    with opener(src, "rb") as f, open(tmp, "wb") as g:
        first = f.readline().decode("utf-8", "replace").rstrip("\r\n")
        if first != header:
            g.close()
            tmp.unlink()
            raise InputError(f"{src}: expected the header line {header!r}, found {first!r}")
        shutil.copyfileobj(f, g, _COPY_BYTES)
    tmp.rename(dst)
    return {"header_lines_dropped": 1, "header": header}
