"""Checking that an input is UTF-8 text and its compressed file whole, before it is parsed.

UTF-8 throughout (no NUL byte, no 0x1f where the line formats use it), and a compressed file neither
truncated nor corrupt. A bad byte is an `InputError` naming the file, the line and the byte of the line,
with an escaped excerpt (never the raw bytes); a damaged compressed file names how many complete lines
could be read before the damage."""
from __future__ import annotations

import zlib
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from .read_config import InputError

PIECE_BYTES = 1 << 16  # (compressed) bytes read at a time when checking text


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
            for piece in iter(lambda: f.read(PIECE_BYTES), b""):
                while piece:
                    if d.eof:  # the next member of a multi-member file
                        d = zlib.decompressobj(31)
                    yield d.decompress(piece, 1 << 20)
                    piece = d.unused_data if d.eof else d.unconsumed_tail
            if not d.eof:
                raise EOFError("the compressed data ends before its end-of-stream marker")
        return
    with pa.input_stream(str(path), compression="detect") as f:
        yield from iter(lambda: f.read(PIECE_BYTES), b"")


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


# what a binary file that is not text may be, by its first bytes -> what to do with it
_MAGIC = ((b"\x1f\x8b", "it looks gzip-compressed: give it a name ending in .gz"),
          (b"BZh", "it looks bzip2-compressed: give it a name ending in .bz2"),
          (b"\xfd7zXZ\x00", "it looks xz-compressed: decompress it (xz -d)"),
          (b"\x28\xb5\x2f\xfd", "it looks zstd-compressed: give it a name ending in .zst"),
          (b"PAR1", "it looks like a Parquet file: use --format parquet"),
          (b"PK\x03\x04", "it looks like a zip archive: unzip it and prepare a file inside"),
          (b"MATLAB", "it looks like a MATLAB .mat file: write its links out as text or Parquet first "
                      "(e.g. scipy.io.loadmat, then one set<TAB>id line per link)"))


def _kind_hint(data: bytes) -> str:
    """'; what the file looks like and what to do' for the first bytes of a file that is not text."""
    if data[257:262] == b"ustar":  # a tar header (after decompression, for .tar.gz)
        return "; it looks like a tar archive: extract it (tar xf) and prepare a file inside"
    return next((f"; {what}" for magic, what in _MAGIC if data.startswith(magic)), "")


def scan_text(path: Path, fmt: str, limit: int | None = None) -> str:
    """Read the (decompressed) text up to about `limit` bytes (None: all of it), checking that it is
    UTF-8 text -> the complete lines read. InputError naming the file and line (with an escaped
    excerpt, never the raw bytes) at the first bad byte, or naming a truncated / corrupt compressed
    file with the number of lines read before the damage."""
    lines, carry, size, parts = 0, b"", 0, []

    def fail_at(data: bytes, at: int, what: str):
        start = data.rfind(b"\n", 0, at) + 1
        line = lines + data.count(b"\n", 0, start) + 1
        excerpt = data[max(start, at - 16): at + 16]
        hint = _kind_hint(data) if lines == 0 else ""
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
        raise InputError(f"{path}: {what} ({printable(e)}); {'' if exact else 'at least '}{lines:,} complete "
                         "lines could be read before it") from None
    return b"".join(parts + [carry]).decode("utf-8") if limit is not None else ""


def printable(e: Exception, limit: int = 200) -> str:
    """An exception message safe for a terminal: control and non-ASCII characters escaped, shortened."""
    text = ascii(str(e))[1:-1]
    return text if len(text) <= limit else text[:limit] + "..."


def read_failed(path: Path, fmt: str, e: Exception) -> InputError:
    """An Arrow read failed: find out why by scanning the file (error path only) -> the InputError."""
    try:
        scan_text(path, fmt)
    except InputError as found:
        return found
    return InputError(f"{path}: cannot read as UTF-8 {fmt} text ({printable(e)})")
