"""The guarded writer of every output: ownership marker, checks before any work, staged swap, recovery.

Every output of every command (a model, a set embedding, a text classifier, a prepared dataset, the
demo's folder, an embed, synth, vectors or predict --out file) is checked before any work, carries our
ownership marker, is built beside its final name and swapped in at once, and any state a kill leaves is
recovered on the next run and read correctly on load.

    target = claim(out, "model")       # before any work, locked: OutputError (one line) if OUT may not be written
    target.check_replace()             # before replacing: OutputError naming what in OUT is not ours
    work = target.stage()              # OUT.new (a dataset: OUT.partial), marked {"kind", "run", "complete": false}
    ... write into work ...
    target.commit()                    # marked complete; OUT -> OUT.old, OUT.new -> OUT, our part of OUT.old removed
    target.discard()                   # (on failure) the staged folder goes; OUT stays as it was

    path = resolve(out)                # loaders: OUT, or the complete staged / old one a kill left

Ownership is a marker we wrote, never a file name. A folder is ours only when it holds
`.superbloom.json` (written when we create it: the kind, a random run id, complete or not, and the
names of the entries it holds that we wrote); a single file only when its sidecar
`.NAME.superbloom.json` vouches for its size and mtime. Nothing without our marker of the expected
kind is ever deleted, renamed or written into: a user's OUT, OUT.new, OUT.old or OUT.partial makes
the command refuse, naming it.

Inside a folder of ours, an entry is ours when the marker lists it (the staged folder's entries are
listed when it is committed; `record` adds one written later, such as eval's eval.json) or when its
name is one the folder's kind writes in place (Kind.writes: a model's checkpoints/, LATEST, metrics.jsonl,
README.md, ...). Anything else is the user's (their notes.txt, a model trained into a dataset's folder, an
eval.json written there by hand): replacing the folder is refused before any work, naming it
(check_replace), and a removal leaves it where it is (remove_ours).

One writer per output: claim takes an advisory lock (flock on `.NAME.superbloom.lock` beside the
output, recording the holder's pid, start and command) held for the writer's whole run (one_writer,
exclusive_outputs) and released by the kernel however the process ends (kill -9 included). A second
writer of the same output is refused at once, naming the holder; recovery runs only under the lock, so
a live run's staging folder is never taken for a killed run's leftovers.

Links are never followed: an output that is a symbolic link, a link beside it (OUT.new, OUT.old) or
anywhere inside an output of ours is refused with one line naming it (we never create links; resolving
one would let a run replace or empty the folder it points to).

Folders written before the marker existed (recognised by their files, Kind.legacy) still load, and
are never replaced, emptied or removed as they are: replacing one is refused, saying to delete or move it
by hand; continuing one (`train --resume`, asked for by name) marks it ours first (adopt), and from then
on it is an output of ours like any other.

A folder of ours is removed marker last, so a kill part-way leaves it still marked ours (the next run
finishes the removal). The states a kill can leave, and what the next run (recover) and a loader
(resolve) make of them:

    OUT.new incomplete (+ OUT or not)     a killed build: removed; OUT (if any) is the output
    OUT.new complete, no OUT (+ OUT.old)  killed between the swap's renames: OUT.new becomes OUT
    OUT + OUT.old                         killed before OUT.old's removal: OUT.old removed
    OUT.old only                          (the new one lost by hand): OUT.old becomes OUT again
    OUT.new / OUT empty, or holding only  killed between making the folder and marking it: the
      an unfinished marker write          folder counts as ours (nothing in it can be lost)
"""
from __future__ import annotations

import contextlib
import contextvars
import errno
import fcntl
import fnmatch
import functools
import glob
import json
import logging
import os
import shutil
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from .files import load_json, save_json

log = logging.getLogger(__name__)

MARKER = ".superbloom.json"
SIDE_SUFFIXES = (".new", ".partial", ".old")  # the names beside OUT our writers use (staging, the swap's old one)


class OutputError(ValueError):
    """An output path that may not be written (what it is, and what was expected); nothing was changed."""


# ------------------------------------------------------------------------------ what we write


def _config(path: Path) -> dict:
    try:
        config = load_json(path / "config.json")
    except (OSError, ValueError, RecursionError):
        return {}
    return config if isinstance(config, dict) else {}


def _has_weights(p: Path) -> bool:
    return any((p / n).exists() for n in ("model.safetensors", "LATEST", "BEST", "checkpoints", "hashing.safetensors"))


def _trained(p: Path, key: str) -> bool:
    """A model folder written before the marker existed whose config.json has `key` (what kind it is)."""
    return (p / "config.json").is_file() and _has_weights(p) and key in _config(p)


# the names every kind of model folder writes in place (a resumed run, a new run in an empty folder,
# the card, the vocabulary caches a server maps: data/mapped_vocab.py)
_VOCAB = ("vocab.txt", "counts.npy", "vocab.strings.arrow", "vocab.sorted.npy")
_RUN = ("config.json", "metrics.jsonl", "LATEST", "BEST", "checkpoints", "README.md")
_SPLITS = tuple(f"{split}.{part}" for split in ("train", "valid", "test")
                for part in ("offsets.npy", "ids.npy", "sets.txt", "targets.npy"))


@dataclass(frozen=True)
class Kind:
    """One kind of output: what it is (for messages), how a folder written before the marker existed
    is recognised, the names (fnmatch patterns) of the entries its writers write into a folder in place,
    its staging suffix, and whether it is a single file."""

    what: str
    legacy: Callable[[Path], bool]
    writes: tuple[str, ...] = ()
    staging: str = ".new"
    file: bool = False


KINDS: dict[str, Kind] = {
    "model": Kind("an id model (superbloom train / extend)", lambda p: _trained(p, "head"),
                  _RUN + _VOCAB + ("hashing.safetensors", "fixed-*.safetensors", "extend.json", "done.json")),
    "ensemble": Kind("an ensemble of id models (superbloom train --members)",
                     lambda p: _config(p).get("kind") == "ensemble", ("config.json", "README.md", "member-*")),
    "set-embedding": Kind("a set embedding (superbloom embed-train)", lambda p: _trained(p, "embed"),
                          _RUN + _VOCAB + ("hashing.safetensors", "index.safetensors", "index.sets.txt")),
    "text-classifier": Kind("a text classifier (superbloom textclass-train)", lambda p: _trained(p, "textclass"),
                            _RUN + ("model.safetensors", "vocab.txt")),
    "dataset": Kind("a prepared dataset (superbloom prepare / prepare-text)",
                    lambda p: (p / "meta.json").is_file() and (p / "vocab.txt").is_file(),
                    ("meta.json", "ngram_counts.npy") + _VOCAB + _SPLITS, staging=".partial"),
    "demo": Kind("the demo's folder (superbloom demo)",
                 lambda p: (p / "data" / "meta.json").is_file() or (p / "model" / "config.json").is_file(),
                 tuple(f"{name}{side}" for name in ("data", "model") for side in ("",) + SIDE_SUFFIXES)),
    "vectors": Kind("a vectors file (superbloom embed)", lambda p: False, file=True),
    "links": Kind("a links file (superbloom synth)", lambda p: False, file=True),
    "recommendations": Kind("a recommendations file (superbloom predict --out)", lambda p: False, file=True),
    "item-vectors": Kind("an item vectors file (superbloom vectors)", lambda p: False, file=True),
    "exported-network": Kind("an exported network (model.export)", lambda p: False, file=True),
}
LOCK = ".superbloom.lock"  # an output's lock file beside it: .NAME.superbloom.lock (lock_path)
# the hidden temporary files of our atomic writes (files.atomic_path, a marker's write) and the lock files of
# the outputs inside it (a demo's data and model): ours in any folder of ours
_TEMPORARY = (".*.tmp*", f".*{LOCK}")


def _marker_path(path: Path, kind: str) -> Path:
    return path.with_name(f".{path.name}{MARKER}") if KINDS[kind].file else path / MARKER


def read_marker(path: Path, kind: str) -> dict | None:
    """Our marker of `path` (a folder's `.superbloom.json`, a file's sidecar), or None (absent, unreadable,
    a link, or a file's sidecar that matches no version of the file we wrote: a file the user put there
    later)."""
    where = _marker_path(path, kind)
    if where.is_symlink() or path.is_symlink():
        return None
    try:
        marker = load_json(where)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(marker, dict) or not isinstance(marker.get("kind"), str):
        return None
    if KINDS[kind].file:
        try:
            st = path.stat()
        except OSError:
            return None
        if [st.st_size, st.st_mtime_ns] not in marker.get("files", []):
            return None
    return marker


def _legacy_kind(path: Path) -> str | None:
    """The kind a folder without our marker looks like by its files (a folder written before markers)."""
    if path.is_symlink() or not path.is_dir():
        return None
    return next((k for k, entry in KINDS.items() if not entry.file and entry.legacy(path)), None)


def kind_of(path: Path, kind: str) -> str | None:
    """What `path` is as far as we can tell, for loaders and messages: the kind its marker names, the
    kind a folder written before markers existed looks like, else None. Ownership is the marker alone
    (is_ours): this also names folders we will never write into."""
    marker = read_marker(path, kind)
    if marker is not None:
        return marker["kind"]
    return None if KINDS[kind].file else _legacy_kind(path)


def is_ours(path: Path, kind: str) -> bool:
    """Does `path` carry our marker of this kind (a folder) or a sidecar that vouches for it (a file)?"""
    marker = read_marker(path, kind)
    return marker is not None and marker["kind"] == kind


def write_marker(path: Path, kind: str, run: str, complete: bool, files: list | None = None) -> None:
    """Mark `path` ours: kind, run id, complete, and `files`: a folder's entries that we wrote (names), a
    file's sidecar the [size, mtime_ns] of the versions of the file it vouches for."""
    record = {"kind": kind, "run": run, "complete": complete, "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "files": sorted(files or []) if not KINDS[kind].file else (files or [])}
    save_json(_marker_path(path, kind), record)


def record(folder: str | Path, *names: str) -> None:
    """Entries `names` of a folder of ours were written by us after its staged build was committed (the
    eval.json that `eval` and the demo write into a model folder): listed in its marker, so a
    replacement removes them. A folder without our marker is left as it is."""
    folder = Path(folder)
    marker = read_marker(folder, "model")  # a folder's marker is .superbloom.json whatever its kind
    if marker is None or marker["kind"] not in KINDS or KINDS[marker["kind"]].file:
        return
    listed = set(marker.get("files") or [])
    if not set(names) <= listed:
        marker["files"] = sorted(listed | set(names))
        save_json(folder / MARKER, marker)


def _stat(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def _complete(path: Path, kind: str) -> bool:
    marker = read_marker(path, kind)
    return marker is not None and marker["kind"] == kind and bool(marker.get("complete"))


def _ours_in(folder: Path, kind: str, marker: dict | None, entry: os.DirEntry | Path) -> bool:
    """Is `entry` of our folder ours: every entry of an unfinished staged build (only our run writes
    there), else one the marker lists or whose name the kind writes in place; never a link."""
    if entry.name == MARKER:
        return True
    if entry.is_symlink():
        return False
    if marker is not None and not marker.get("complete"):
        return True
    listed = (marker or {}).get("files") or []
    return entry.name in listed or any(fnmatch.fnmatchcase(entry.name, p) for p in KINDS[kind].writes + _TEMPORARY)


def foreign_entries(folder: Path, kind: str) -> list[str]:
    """The entries of a folder that are not ours (sorted names; a folder name ends in '/'): all of them
    for a folder without our marker."""
    marker = read_marker(folder, kind)
    if marker is not None and marker["kind"] != kind:
        marker = None
    with os.scandir(folder) as it:
        entries = list(it)
    return sorted(e.name + ("/" if e.is_dir(follow_symlinks=False) else "") for e in entries
                  if marker is None or not _ours_in(folder, kind, marker, e))


def remove_ours(path: Path, kind: str) -> list[str]:
    """Remove an output of ours: a file, then its sidecar; a folder's entries that are ours first and its
    marker last (a kill part-way leaves it marked, and the next run finishes). Links are removed, never
    followed. -> the entries left because they are not ours (the folder then stays, unmarked, holding
    only them)."""
    if KINDS[kind].file:
        path.unlink(missing_ok=True)
        _marker_path(path, kind).unlink(missing_ok=True)
        return []
    if not path.is_dir() or path.is_symlink():
        return []
    marker = read_marker(path, kind)
    kept = []
    with os.scandir(path) as it:
        entries = [e for e in it if e.name != MARKER]
    for entry in entries:
        if not _ours_in(path, kind, marker, entry):
            kept.append(entry.name)
        elif entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)  # rmtree never follows a link inside (it unlinks it)
        else:
            os.unlink(entry.path)
    (path / MARKER).unlink(missing_ok=True)
    if kept:
        return sorted(kept)
    path.rmdir()
    return []


# ------------------------------------------------------------------------------ one writer per output


def lock_path(path: Path) -> Path:
    """The lock file of output `path`: hidden beside it, `.NAME.superbloom.lock` (it covers OUT.new,
    OUT.partial and OUT.old too)."""
    return path.with_name(f".{path.name}{LOCK}")


class _Held:
    """An output's lock file, locked (flock) by this process, and how many OutputLocks share it."""

    def __init__(self, key: str, path: Path, fd: int):
        self.key, self.path, self.fd, self.count = key, path, fd, 0


_HELD: dict[str, _Held] = {}  # lock file (its real path) -> this process' hold on it
_GUARD = threading.Lock()
_SCOPE: contextvars.ContextVar[list | None] = contextvars.ContextVar("superbloom_output_locks", default=None)


class OutputLock:
    """This process' hold on one output's lock. Released by release(), when nothing refers to it any more,
    at the end of the `exclusive_outputs` scope it was taken in, and by the kernel when the process ends
    (kill -9 included: an flock dies with its last open descriptor). Claims of one output within one
    process share the lock (the same process may claim it again)."""

    def __init__(self, held: _Held | None):
        self._held = held
        if held is not None:
            held.count += 1

    def release(self) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        with _GUARD:
            held.count -= 1
            if held.count:
                return
            _HELD.pop(held.key, None)
            with contextlib.suppress(OSError):
                os.unlink(held.path)  # while still locked: a process that opened it sees another file, retries
            os.close(held.fd)

    def __del__(self):
        with contextlib.suppress(Exception):
            self.release()


def _holder(fd: int) -> str:
    """Who holds the lock of `fd`, from what the holder wrote in the file: 'pid N, since T: COMMAND'."""
    for _ in range(20):  # the holder writes its record just after locking
        try:
            record = json.loads(os.pread(fd, 4096, 0) or b"null")
        except (OSError, ValueError):
            record = None
        if isinstance(record, dict) and "pid" in record:
            return (f"pid {record['pid']}, since {record.get('started', '?')}"
                    + (f": {record['command']}" if record.get("command") else ""))
        time.sleep(0.05)
    return "pid unknown"


def lock_output(path: Path, flag: str = "--out", out=None) -> OutputLock:
    """Take the lock of output `path` for this process (an advisory flock on lock_path(path), which must be
    creatable: its parent folder exists) -> an OutputLock. Another process holding it: OutputError at once,
    naming the holder's pid, start and command. A filesystem without locks: a warning, and no lock."""
    out = path if out is None else out
    lock = lock_path(path)
    key = os.path.join(os.path.realpath(lock.parent), lock.name)
    with _GUARD:
        held = _HELD.get(key)
        if held is not None:
            return OutputLock(held)
        for _ in range(100):
            try:
                fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            except OSError as e:
                if e.errno == errno.ELOOP:
                    raise _link_line(flag, out, lock, " (its lock file)") from None
                raise OutputError(f"{flag} {out}: cannot create its lock file {lock} ({e.strerror})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise OutputError(f"{flag} {out} is being written by another superbloom process ({holder}); one "
                                  "writer per output: wait for it to end, or give another path (nothing was "
                                  "changed)") from None
            except OSError as e:  # no flock here (some network filesystems)
                os.close(fd)
                log.warning(f"{lock}: the filesystem cannot lock files ({e.strerror}); {out} is written without "
                            "a lock: run one writer of it at a time")
                return OutputLock(None)
            st = os.fstat(fd)
            try:
                now = os.lstat(lock)
            except FileNotFoundError:
                now = None
            if now is None or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                os.close(fd)  # the previous holder removed it as we opened it: lock the file there now
                continue
            record = {"pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                      "command": " ".join(Path(sys.argv[0]).name.split() + sys.argv[1:])[:160]}
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
            held = _HELD[key] = _Held(key, lock, fd)
            return OutputLock(held)
    raise OutputError(f"{flag} {out}: its lock file {lock} keeps being replaced; is another program removing it?")


@contextlib.contextmanager
def exclusive_outputs() -> Iterator[None]:
    """A writer's whole run: every output claimed inside the block stays locked until it ends (however it
    ends), and is released then."""
    taken: list[OutputLock] = []
    token = _SCOPE.set(taken)
    try:
        yield
    finally:
        _SCOPE.reset(token)
        for lock in reversed(taken):
            lock.release()


def one_writer(fn):
    """Decorator: `fn` runs inside exclusive_outputs (a trainer, from its first check of --out to its last
    file written)."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with exclusive_outputs():
            return fn(*args, **kwargs)
    return run


# ------------------------------------------------------------------------------ checks before any work


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _link_line(flag: str, out, link: Path, where: str = "") -> OutputError:
    try:
        to = os.readlink(link)
    except OSError:
        to = "?"
    named = f"{flag} {out}" if link == Path(out) else f"{flag} {out}: {link}{where}"
    return OutputError(f"{named} is a symbolic link (to {to}); superbloom never writes, replaces or deletes through "
                       "a link: give the real path, or another one (nothing was changed)")


def first_link(folder: Path) -> Path | None:
    """The first symbolic link found anywhere inside `folder` (never followed), or None."""
    for dirpath, dirs, files in os.walk(folder):
        for name in sorted(dirs) + sorted(files):
            p = Path(dirpath) / name
            if p.is_symlink():
                return p
    return None


def check_path(out: str | Path, kind: str, flag: str = "--out") -> Path:
    """The output path `out`, refused (OutputError, one line) if it is "", the root, the current folder
    or one above it, a symbolic link, or exists as the wrong type (a file or device for a folder; a
    folder, device or other non-regular file for a file)."""
    if str(out).strip() == "":
        raise OutputError(f"{flag} is empty; expected a path for {KINDS[kind].what}")
    path = Path(out)
    if path.is_symlink():
        raise _link_line(flag, out, path)
    here, full = Path.cwd().resolve(), path.resolve()
    if full == Path(full.anchor) or full == here or full in here.parents:
        what = ("the root folder" if full == Path(full.anchor) else "the current folder" if full == here
                else "a folder above the current one")
        raise OutputError(f"{flag} {out} is {what}; give a folder of its own for {KINDS[kind].what}")
    if path.exists():
        if KINDS[kind].file:
            if path.is_dir():
                raise OutputError(f"{flag} {out} is a directory; expected a file name for {KINDS[kind].what}")
            if not path.is_file():
                raise OutputError(f"{flag} {out} is not a regular file (a device, pipe or socket); expected a "
                                  f"file name for {KINDS[kind].what}")
        elif not path.is_dir():
            what = "a file" if path.is_file() else "a device, pipe or socket"
            raise OutputError(f"{flag} {out} is {what}, not a directory; expected a folder for {KINDS[kind].what}")
    return path


def _listing(names: list[str], most: int = 5) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


@dataclass
class Target:
    """A checked output: `path` (its final name), `kind`, `run` (this run's id, in every marker it writes),
    `flag` (how messages name it)."""

    path: Path
    kind: str
    run: str
    flag: str = "--out"
    lock: OutputLock | None = field(default=None, repr=False, compare=False)

    @property
    def staging(self) -> Path:
        return _sibling(self.path, KINDS[self.kind].staging)

    @property
    def old(self) -> Path:
        return _sibling(self.path, ".old")

    def holds_output(self) -> bool:
        """Does the final path hold an output of this kind (ours, or one written before markers), which a
        new run would replace?"""
        if KINDS[self.kind].file:
            return is_ours(self.path, self.kind)
        return (self.path.is_dir() and not self.path.is_symlink() and not unstarted(self.path)
                and kind_of(self.path, self.kind) == self.kind)

    def legacy(self) -> bool:
        """Does the final path hold an output of this kind written before markers (never replaced)?"""
        return self.holds_output() and not is_ours(self.path, self.kind)

    def check_replace(self) -> None:
        """Before any work of a run that will replace OUT: refuse (OutputError, one line, nothing changed) an
        OUT written before markers (never replaced; delete or move it by hand) and one that holds entries we
        did not write (named: the user's notes, a model trained into a dataset's folder, an eval.json)."""
        if KINDS[self.kind].file or not self.path.is_dir() or unstarted(self.path):
            return
        out = self.path
        if not is_ours(out, self.kind):
            raise OutputError(f"{self.flag} {out} holds {KINDS[self.kind].what} written by an earlier superbloom, "
                              f"without the ownership marker ({MARKER}) that lets superbloom replace it; superbloom "
                              "never replaces a folder it cannot tell it wrote: delete or move it yourself, or give "
                              "another folder (nothing was changed)")
        foreign = foreign_entries(out, self.kind)
        if foreign:
            raise OutputError(f"{self.flag} {out} holds {_listing(foreign)}, not part of {KINDS[self.kind].what}; "
                              f"replacing it would delete them: move them out of {out}, or give another folder "
                              "(nothing was changed)")

    def adopt(self) -> None:
        """Mark ours an output of this kind written before markers, to continue it in place (a resume):
        nothing in it is listed as ours, so its files are never removed by a later replacement."""
        if not KINDS[self.kind].file and self.path.is_dir() and read_marker(self.path, self.kind) is None \
                and _legacy_kind(self.path) == self.kind:
            write_marker(self.path, self.kind, "adopted-" + self.run, complete=True)
            log.info(f"{self.path}: written by an earlier superbloom; marked as superbloom's ({MARKER}) to continue it")

    def mark_in_place(self) -> Path:
        """Write in the final path itself (a new output in an empty or missing folder, or a resumed run):
        the folder is made and marked (complete: it holds a usable output whenever it holds one at all).
        A folder written before markers is marked by `adopt` only, never here."""
        if self.path.is_dir() and read_marker(self.path, self.kind) is None and not unstarted(self.path):
            raise OutputError(f"{self.flag} {self.path} holds files without superbloom's ownership marker ({MARKER}; "
                              "written by an earlier superbloom?); superbloom writes only into a new or empty folder "
                              "or one it marked: give another folder (nothing was changed)")
        self.path.mkdir(parents=True, exist_ok=True)
        if read_marker(self.path, self.kind) is None:
            write_marker(self.path, self.kind, self.run, complete=True)
        return self.path

    def stage(self) -> Path:
        """The staging folder (removing an earlier one of ours), made and marked incomplete -> its path."""
        if self.staging.exists():
            remove_ours(self.staging, self.kind)  # claim checked it is ours
        self.staging.mkdir(parents=True)
        write_marker(self.staging, self.kind, self.run, complete=False)
        return self.staging

    def commit(self) -> None:
        """The staged output, complete (its entries listed as ours), takes the final name in one step (two
        renames; recover() completes a kill between them); our part of the previous output is removed after.
        An entry of the user's that appeared in OUT during the run stays, in OUT.old (said)."""
        with os.scandir(self.staging) as it:
            built = [e.name for e in it if e.name != MARKER and not e.is_symlink()]
        write_marker(self.staging, self.kind, self.run, complete=True, files=built)
        if self.path.exists():
            if is_empty_dir(self.path) or unstarted(self.path):
                for tmp in self.path.iterdir():
                    tmp.unlink()
                self.path.rmdir()
            else:
                if not is_ours(self.path, self.kind):  # check_replace refused it before any work; never replaced
                    raise OutputError(f"{self.flag} {self.path} no longer holds superbloom's ownership marker "
                                      f"({MARKER}): not replaced")
                self.path.rename(self.old)
        self.staging.rename(self.path)
        kept = remove_ours(self.old, self.kind)
        if kept:
            log.warning(f"{self.old}: kept, holding {_listing(kept)}, which superbloom did not write (put in "
                        f"{self.path} during the run); move them, then delete {self.old}")

    def discard(self) -> None:
        """A failed run's staged output goes; the final path is left as it was."""
        if self.staging.exists():
            remove_ours(self.staging, self.kind)

    def release(self) -> None:
        """This claim's hold on the output's lock ends (the lock goes when no claim of it is left)."""
        if self.lock is not None:
            self.lock.release()

    @contextlib.contextmanager
    def writing(self) -> Iterator[Path]:
        """A single file: yield a hidden temporary path beside it; when the block succeeds, the sidecar
        vouches for the old (if ours) and the new version, the file is renamed into place (one step), and
        the sidecar then names the new one only. A kill at any moment leaves the old or the new file,
        both marked ours, and at worst a hidden temporary file that the next run removes."""
        tmp = self.path.with_name(f".{self.path.name}.tmp-{self.run}")
        try:
            yield tmp
            if self.path.is_symlink():
                raise _link_line(self.flag, self.path, self.path)
            versions = ([_stat(self.path)] if self.path.is_file() else []) + [_stat(tmp)]
            write_marker(self.path, self.kind, self.run, True, versions)
            os.replace(tmp, self.path)  # rename keeps size and mtime: the new version is vouched for
            write_marker(self.path, self.kind, self.run, True, [_stat(self.path)])
        finally:
            tmp.unlink(missing_ok=True)


def is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink() and not any(path.iterdir())


MARKER_TMP = f".{MARKER}.tmp"  # the prefix of an unfinished write of a folder's marker (files.atomic_path)


def unstarted(path: Path) -> bool:
    """A folder holding nothing, or nothing but unfinished writes of our marker: what a kill leaves
    between making a folder and marking it (Target.stage, Target.mark_in_place). Nothing in it can be
    lost, and only we write such names, so claim treats it as ours."""
    return (path.is_dir() and not path.is_symlink()
            and all(e.name.startswith(MARKER_TMP) and e.is_file() and not e.is_symlink() for e in path.iterdir()))


def claim(out: str | Path, kind: str, flag: str = "--out", main: bool = True) -> Target:
    """Check an output path before any work and take its lock -> its Target (with a fresh run id and the
    lock), after recovering what a killed run left (recover). Refuses (OutputError, one line, nothing
    changed) a path check_path refuses, an output another process is writing (naming its pid), a folder
    that holds files but is not ours of this kind (nor one of this kind written before markers), a link at,
    beside or anywhere inside the output, a user's OUT.new / OUT.partial / OUT.old beside it, and a place
    we cannot write. The lock is held while the Target (or the exclusive_outputs scope it was claimed in)
    lives. `main`: False on the other processes of a distributed run (checks only: rank 0 locks and
    recovers)."""
    path = check_path(out, kind, flag)
    target = Target(path, kind, uuid.uuid4().hex[:12], flag)
    if not main:
        _check_claim(target, out)
        return target
    made = _make_parent(path, flag, out)
    try:
        target.lock = lock_output(path, flag, out)
        _check_claim(target, out)  # under the lock: no other writer is half-way through a swap
        recover(target)
    except BaseException:
        target.release()
        for folder in made:  # the parent folders this claim made, if still empty
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    scope = _SCOPE.get()
    if scope is not None:
        scope.append(target.lock)
    return target


def _make_parent(path: Path, flag: str, out) -> list[Path]:
    """The output's parent folders, made where missing (the lock file lives there) -> those made, deepest first."""
    made, parent = [], path.parent
    while not parent.exists() and not parent.is_symlink() and parent != parent.parent:
        made.append(parent)
        parent = parent.parent
    _check_writable(path, flag, out)
    for folder in reversed(made):
        try:
            folder.mkdir()
        except OSError as e:
            raise OutputError(f"{flag} {out}: cannot create the folder {folder} ({e.strerror})") from None
    return made


def _check_claim(target: Target, out) -> None:
    path, kind, flag = target.path, target.kind, target.flag
    entry = KINDS[kind]
    for side in () if entry.file else [_sibling(path, s) for s in SIDE_SUFFIXES]:
        if side.is_symlink():
            raise _link_line(flag, out, side, " (beside it)")
        if side.exists() and (not side.is_dir() or not (is_ours(side, kind) or unstarted(side))):
            raise OutputError(f"{side} exists beside {flag} {out} and is not {entry.what} written by superbloom; "
                              "move it away or choose another --out (nothing was changed)")
        if side.is_dir() and (link := first_link(side)) is not None:
            raise _link_line(flag, out, link)
    if path.exists() and not entry.file and not unstarted(path):
        marker = read_marker(path, kind)
        found = marker["kind"] if marker is not None else _legacy_kind(path)
        if found is None:
            raise OutputError(f"{flag} {out} holds files that superbloom did not write; expected a new or empty "
                              f"folder, or {entry.what} (nothing was changed)")
        if found != kind:
            raise OutputError(f"{flag} {out} holds {KINDS[found].what}; expected {entry.what} (give another "
                              "folder; nothing was changed)")
        if (link := first_link(path)) is not None:
            raise _link_line(flag, out, link)
    if entry.file and path.is_file() and read_marker(path, kind) is None:
        raise OutputError(f"{flag} {out} exists and was not written by superbloom; give a new file name (nothing "
                          "was changed)")
    _check_writable(path, flag, out)


def _check_writable(path: Path, flag: str, out) -> None:
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"{flag} {out}: {parent} is not a folder")
    for p in (parent, path) if path.is_dir() else (parent,):
        if not os.access(p, os.W_OK | os.X_OK):
            raise OutputError(f"{flag} {out}: {p} is not writable (permission denied)")


def recover(target: Target) -> None:
    """Finish or undo what a killed run left beside the target (the module docstring's table). Only
    folders and files of ours of the target's kind are touched (claim checked them); an entry of the
    user's found in OUT.old is kept there, and the run refused naming it."""
    kind, path, staged, old = target.kind, target.path, target.staging, target.old
    if KINDS[kind].file:
        for tmp in path.parent.glob(f".{glob.escape(path.name)}.tmp-*"):  # hidden files of killed runs
            if not tmp.is_symlink():
                tmp.unlink(missing_ok=True)
        return
    if path.is_dir() and not path.is_symlink() and unstarted(path):
        for tmp in path.iterdir():  # a marker whose write a kill cut short
            tmp.unlink(missing_ok=True)
    if staged.is_dir() and not path.exists() and _complete(staged, kind):
        staged.rename(path)  # killed between the swap's two renames (or just before a first output's one)
    if staged.is_dir():
        remove_ours(staged, kind)  # a build that never completed
    if old.is_dir():
        if path.exists():
            kept = remove_ours(old, kind)  # the swap was done; the old output's removal was not
            if kept:
                raise OutputError(f"{old} (beside {target.flag} {path}) holds {_listing(kept)}, which superbloom "
                                  f"did not write: kept there; move them, then delete {old} (nothing else was changed)")
        else:
            old.rename(path)


def resolve(path: str | Path, kind: str | None = None) -> Path:
    """Where a loader finds the output named `path`, without changing anything: `path` itself, or when a
    kill left it missing, the complete staged output (killed between the swap's renames), else the old one."""
    path = Path(path)
    if path.exists():
        return path
    for k in ((kind,) if kind else tuple(n for n, e in KINDS.items() if not e.file)):
        staged = _sibling(path, KINDS[k].staging)
        if staged.is_dir() and not staged.is_symlink() and _complete(staged, k):
            return staged
        old = _sibling(path, ".old")
        if old.is_dir() and is_ours(old, k):
            return old
    return path


__all__ = ["KINDS", "LOCK", "MARKER", "Kind", "OutputError", "OutputLock", "Target", "check_path", "claim",
           "exclusive_outputs", "first_link", "foreign_entries", "is_ours", "kind_of", "lock_output", "lock_path",
           "one_writer", "read_marker", "record", "recover", "remove_ours", "resolve", "unstarted", "write_marker"]
