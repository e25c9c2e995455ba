"""Checks of the files we load before they are trusted: one LoadError line naming file and expectation.

A missing file, one we may not read, a truncated or foreign safetensors file, a hand-edited config.json
with missing or wrong-typed fields, a pointer outside its model folder, a folder of another kind, a
dataset's broken meta.json or truncated .npy file, a labels or text file that is not UTF-8 (a binary file).
Each is a LoadError (a ValueError: the CLI exits 2 with its one line) that names the file and what was
expected. Every loader reads through these helpers, so every command benefits.

A loader reads one version of an output, never half of one and half of the next: `read_whole` runs it
again when another run swapped the folder in while it read (guarded.py: the swap is two renames and the
old folder's removal, which a reader between them would straddle).

    path = expect_kind(model_dir, "model")                    # MODEL_DIR, or the complete one a kill left
    config = read_config(path, {"model": dict, "head": dict}) # config.json, its sections present and typed
    check_safetensors(path / "hashing.safetensors")           # header, tensors inside the file, size exact
    cfg = typed_section(path / "config.json", config, "model", ModelConfig)  # fields as the dataclass has them
    meta = read_json(data / "meta.json", "the dataset's summary")            # JSON, its line named if broken
    ids = load_array(data / "train.ids.npy", "the training ids", mmap=True) # a complete .npy file
    model = read_whole(model_dir, lambda: load(model_dir))                   # one version, if another run swaps it
    for line in text_lines(labels, "a labels file"): ...                     # UTF-8, else the line named
"""
from __future__ import annotations

import dataclasses
import json
import os
import struct
import time
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from .files import json_loads
from .guarded import KINDS, kind_of, read_marker, resolve

T = TypeVar("T")

_MAX_HEADER = 100 << 20  # a safetensors header larger than this is not one we wrote


class LoadError(ValueError):
    """A file we load is not what was expected (the message names the file and what was expected)."""


def _open_error(path: Path, e: OSError, what: str) -> LoadError:
    """The LoadError for an OSError raised opening or reading `path`."""
    if isinstance(e, FileNotFoundError):
        return LoadError(f"{path}: missing; expected {what}")
    if isinstance(e, PermissionError):
        return LoadError(f"{path}: cannot be read (permission denied); expected {what}")
    if isinstance(e, IsADirectoryError):
        return LoadError(f"{path}: is a directory; expected {what}")
    return LoadError(f"{path}: cannot be read ({e.strerror}); expected {what}")


def readable(path: str | Path, what: str) -> Path:
    """`path` if it is a file we may read, else LoadError: missing, not a file, or permission denied."""
    path = Path(path)
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        raise _open_error(path, e, what) from None
    if not path.is_file():
        raise LoadError(f"{path}: not a regular file; expected {what}")
    return path


def check_safetensors(path: str | Path, what: str = "a safetensors file") -> None:
    """A complete safetensors file: an 8-byte header length, a JSON header whose tensors' data offsets
    lie inside the file, and the data ending exactly at the file's end (a truncated copy does not).
    Reads the header only. LoadError naming the file otherwise."""
    path = readable(path, what)
    size = path.stat().st_size
    bad = f"{path}: truncated or not a safetensors file ({size:,} bytes); expected {what}"
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise LoadError(bad)
        (n,) = struct.unpack("<Q", head)
        if n > min(size - 8, _MAX_HEADER):
            raise LoadError(bad)
        try:
            header = json.loads(f.read(n))
        except ValueError:
            raise LoadError(bad) from None
    if not isinstance(header, dict):
        raise LoadError(bad)
    ends = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)
                and 0 <= offsets[0] <= offsets[1]):
            raise LoadError(bad)
        ends.append(offsets[1])
    if 8 + n + max(ends, default=0) != size:
        raise LoadError(f"{path}: truncated or padded: its tensors end at byte {8 + n + max(ends, default=0):,}, "
                        f"the file has {size:,}; expected {what}")


def _not_utf8(path: Path, data: bytes, start: int, what: str) -> LoadError:
    line = data.count(b"\n", 0, start) + 1
    return LoadError(f"{path}:{line}: not UTF-8 text (byte 0x{data[start]:02x}; a binary file?); expected {what}")


def read_text(path: str | Path, what: str) -> str:
    """The whole UTF-8 text of `path` (a file or a pipe); LoadError naming the file otherwise: missing,
    unreadable, or not UTF-8 (a binary file), with the line where the first bad byte is."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise _open_error(path, e, what) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _not_utf8(path, data, e.start, what) from None


def text_lines(path: str | Path, what: str) -> Iterator[str]:
    """The lines of the UTF-8 text file `path`, streamed (as `open(path, encoding="utf-8")` gives them);
    LoadError naming the file when it is missing or unreadable, and the line when a byte is not UTF-8."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as f:
            yield from f
    except OSError as e:
        raise _open_error(path, e, what) from None
    except UnicodeDecodeError:
        raise _first_bad_line(path, what) from None


def _first_bad_line(path: Path, what: str) -> LoadError:
    """The LoadError for a file that is not UTF-8, naming its first line that is not (read again, a line
    at a time; a pipe cannot be, nor opened again without blocking: then no line is named)."""
    try:
        if not path.is_file():
            raise OSError("not a regular file")
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    return LoadError(f"{path}:{lineno}: not UTF-8 text (byte 0x{raw[e.start]:02x}; a binary file?); "
                                     f"expected {what}")
    except OSError:
        pass
    return LoadError(f"{path}: not UTF-8 text (a binary file?); expected {what}")


def read_json(path: str | Path, what: str):
    """The JSON value of `path`; LoadError naming the file (and the line) when it is missing, unreadable,
    not UTF-8 or not valid JSON (a truncated or hand-edited file)."""
    path = Path(path)
    try:
        return json_loads(read_text(path, what))
    except json.JSONDecodeError as e:
        raise LoadError(f"{path}, line {e.lineno}: not valid JSON ({e.msg}); expected {what}") from None


def read_json_object(path: str | Path, what: str) -> dict:
    """read_json, which must be a JSON object (LoadError naming the file otherwise)."""
    value = read_json(path, what)
    if not isinstance(value, dict):
        raise LoadError(f"{path}: holds a JSON {type(value).__name__}; expected {what} (a JSON object)")
    return value


def load_array(path: str | Path, what: str, mmap: bool = False):
    """The NumPy array of the .npy file `path` (memory-mapped read-only with mmap; never pickled objects);
    LoadError naming the file when it is missing, unreadable, truncated or not a .npy file."""
    import numpy as np

    path = readable(path, what)
    try:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, EOFError) as e:  # a short file: "mmap length is greater than file size", a bad header
        raise LoadError(f"{path}: truncated or not a NumPy .npy file ({e}); expected {what}") from None
    except OSError as e:
        raise _open_error(path, e, what) from None


ARRAY_CHUNK = 1 << 24  # elements of a (memory-mapped) array read at once by check_array


def check_array(a, path: str | Path, what: str, ndim: int = 1, length: int | None = None, low: int | None = None,
                high: int | None = None, increasing: bool = False):
    """`a` (a .npy array load_array read) as a loader will use it, else LoadError naming the file: `ndim`
    dimensions, integer values (counts, ids, offsets), `length` of them, none below `low` or at or above
    `high`, and with increasing=True never decreasing (offsets). One pass, ARRAY_CHUNK elements at a time
    (a memory-mapped array is never read whole). -> a."""
    import numpy as np

    if a.ndim != ndim:
        raise LoadError(f"{path}: a {a.ndim}-D array of shape {list(a.shape)}; expected {what}, {ndim}-D")
    if a.dtype.kind not in "iu":
        raise LoadError(f"{path}: holds {a.dtype} values; expected {what}, integers")
    if length is not None and len(a) != length:
        raise LoadError(f"{path}: {len(a):,} values; expected {what}, {length:,} of them")
    flat = a.reshape(-1)
    previous = None
    for start in range(0, flat.size, ARRAY_CHUNK):
        piece = np.asarray(flat[start:start + ARRAY_CHUNK])
        if low is not None and int(piece.min()) < low:
            where = start + int(np.argmax(piece < low))
            raise LoadError(f"{path}: value {int(flat[where]):,} at position {where:,}; expected {what}, none below "
                            f"{low:,} (edited by hand?)")
        if high is not None and int(piece.max()) >= high:
            where = start + int(np.argmax(piece >= high))
            raise LoadError(f"{path}: value {int(flat[where]):,} at position {where:,}; expected {what}, each below "
                            f"{high:,} (edited by hand, or of another dataset?)")
        if increasing:
            steps = np.diff(piece) if previous is None else np.diff(np.concatenate([[previous], piece]))
            if (steps < 0).any():
                where = start + int(np.argmax(steps < 0)) - (previous is not None) + 1
                raise LoadError(f"{path}: decreases at position {where:,} ({int(flat[where - 1]):,} then "
                                f"{int(flat[where]):,}); expected {what}, never decreasing (edited by hand?)")
            previous = piece[-1] if len(piece) else previous
    return a


def read_config(model_dir: str | Path, sections: dict[str, type]) -> dict:
    """MODEL_DIR/config.json, a JSON object holding each of `sections` with the type given; LoadError
    naming the file (and line, or the field) otherwise."""
    path = readable(Path(model_dir) / "config.json", "the model's config.json")
    config = read_json_object(path, "the model's settings")
    for name, kind in sections.items():
        if name not in config:
            raise LoadError(f"{path}: no {name!r} field; expected one (was the file edited by hand?)")
        if not isinstance(config[name], kind):
            raise LoadError(f"{path}: field {name!r} is a {type(config[name]).__name__}; expected a "
                            f"{'JSON object' if kind is dict else kind.__name__}")
    return config


def typed_section(path: Path, config: dict, name: str, cls):
    """config[name] as the dataclass `cls` (a `from_dict` if it has one): every field given must have
    the type of its default (an int is a float, None is allowed where the default is None); a
    LoadError naming the file and field otherwise, or if the dataclass refuses the values."""
    section = config[name]
    for f in dataclasses.fields(cls):
        if f.name not in section or f.default is dataclasses.MISSING or f.default is None:
            continue
        value, want = section[f.name], type(f.default)
        ok = isinstance(value, want) and not (want is int and isinstance(value, bool)) or (
            want is float and isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            raise LoadError(f"{path}: field {name}.{f.name} is {json.dumps(value)}; expected a "
                            f"{want.__name__} (was the file edited by hand?)")
    build = getattr(cls, "from_dict", None) or (lambda d: cls(**d))
    try:
        return build(section)
    except (TypeError, ValueError, KeyError) as e:
        raise LoadError(f"{path}: field {name!r}: {e}") from None


def expect_kind(model_dir: str | Path, kind: str, flag: str = "MODEL_DIR") -> Path:
    """The folder a command loads as `kind` (guarded.resolve: the complete one a kill left, when MODEL_DIR
    itself is missing), refused with one line when it is not a folder, or a folder of another kind (a
    set embedding given to predict, a dataset given as a model)."""
    path = resolve(model_dir, kind)
    if not path.exists():
        return path  # the loader's own message says what is missing
    if not path.is_dir():
        raise LoadError(f"{flag} {model_dir}: not a directory; expected {KINDS[kind].what}")
    found = kind_of(path, kind)
    if found is not None and found != kind:
        raise LoadError(f"{flag} {model_dir}: holds {KINDS[found].what}; expected {KINDS[kind].what}")
    return path


def version_of(path: str | Path) -> tuple:
    """Which version of the output `path` a loader would read now: the folder resolve() finds, its inode and
    its marker's run id (a swap makes a new folder; an in-place run keeps its folder and run id)."""
    where = resolve(path)
    try:
        st = os.stat(where)
    except OSError:
        return (str(where),)
    marker = read_marker(where, "model") if where.is_dir() else None  # a folder's marker, whatever its kind
    return str(where), st.st_dev, st.st_ino, (marker or {}).get("run"), None if where.is_dir() else st.st_mtime_ns


def _mid_swap(path: Path) -> bool:
    """`path` is gone and a complete version of it lies beside it (OUT.old or OUT.new): between a swap's
    two renames."""
    return not os.path.lexists(path) and resolve(path) != path


def read_whole(path: str | Path, load: Callable[[], T], tries: int = 10) -> T:
    """load() -> its value, read from one version of the output `path`: when another run swapped a new
    version in while load() ran (version_of differs after), whatever it read or raised is dropped and it
    runs again; so it does when `path` itself is gone while a complete version lies beside it (a read
    between the swap's two renames). An error of a version that stayed in place is raised as it is."""
    for _ in range(tries):
        before = version_of(path)
        try:
            value = load()
        except Exception:
            if version_of(path) == before and not _mid_swap(Path(path)):
                raise
            time.sleep(0.01)  # the swap's second rename is a moment away
            continue
        if version_of(path) == before:
            return value
    raise LoadError(f"{path}: replaced by another run {tries} times while it was being read; try again when "
                    "that run is done")


__all__ = ["LoadError", "check_array", "check_safetensors", "expect_kind", "load_array", "read_config", "read_json",
           "read_json_object", "read_text", "read_whole", "readable", "text_lines", "typed_section", "version_of"]
