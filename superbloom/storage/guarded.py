"""The guarded writer of every output: ownership marker, checks before any work, staged swap, recovery.

Every output of every command (a model, a set embedding, a text classifier, a prepared dataset, the
demo's folder, an embed, synth, vectors or predict --output file) is checked before any work, carries our ownership marker, is
built beside its final name and swapped in at once, and any state a kill leaves is recovered on the
next run and read correctly on load (issue 32, class 1).

    target = claim(out, "model")       # before any work: OutputError (one line) if OUT may not be written
    work = target.stage()              # OUT.new (a dataset: OUT.partial), marked {"kind", "run", "complete": false}
    ... write into work ...
    target.commit()                    # marked complete; OUT -> OUT.old, OUT.new -> OUT, OUT.old removed
    target.discard()                   # (on failure) the staged folder goes; OUT stays as it was

    path = resolve(out)                # loaders: OUT, or the complete staged / old one a kill left

The marker is `.superbloom.json` inside a folder, `.NAME.superbloom.json` beside a single file (it also
records the file's size and mtime, so a file the user put there later is not ours). Nothing without our
marker of the expected kind is ever deleted, renamed or written into: a user's OUT, OUT.new, OUT.old or
OUT.partial makes the command refuse, naming it. Folders written before the marker existed are
recognised by their files (config.json + weights or checkpoints; meta.json + vocab.txt) and adopted
(marked) before they are replaced. A folder of ours is removed marker last, so a kill part-way leaves
it still marked ours (the next run finishes the removal).

The states a kill can leave, and what the next run (recover) and a loader (resolve) make of them:

    OUT.new incomplete (+ OUT or not)     a killed build: removed; OUT (if any) is the output
    OUT.new complete, no OUT (+ OUT.old)  killed between the swap's renames: OUT.new becomes OUT
    OUT + OUT.old                         killed before OUT.old's removal: OUT.old removed
    OUT.old only                          (the new one lost by hand): OUT.old becomes OUT again
    OUT.new / OUT empty, or holding only  killed between making the folder and marking it: the
      an unfinished marker write          folder counts as ours (nothing in it can be lost)
"""
from __future__ import annotations

import contextlib
import glob
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from .files import load_json, save_json

MARKER = ".superbloom.json"
SIDE_SUFFIXES = (".new", ".partial", ".old")  # the names beside OUT our writers use (staging, the swap's old one)


class OutputError(ValueError):
    """An output path that may not be written (what it is, and what was expected); nothing was changed."""


# ------------------------------------------------------------------------------ what we write


def _config(path: Path) -> dict:
    try:
        config = load_json(path / "config.json")
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def _has_weights(p: Path) -> bool:
    return any((p / n).exists() for n in ("model.safetensors", "LATEST", "BEST", "checkpoints", "hashing.safetensors"))


def _trained(p: Path, key: str) -> bool:
    """A model folder written before the marker existed whose config.json has `key` (what kind it is)."""
    return (p / "config.json").is_file() and _has_weights(p) and key in _config(p)


@dataclass(frozen=True)
class Kind:
    """One kind of output: what it is (for messages), its staging suffix, whether it is a single file,
    and how a folder written before the marker existed is recognised."""

    what: str
    legacy: Callable[[Path], bool]
    staging: str = ".new"
    file: bool = False


KINDS: dict[str, Kind] = {
    "model": Kind("an id model (superbloom train / extend)", lambda p: _trained(p, "head")),
    "ensemble": Kind("an ensemble of id models (superbloom train --members)",
                     lambda p: _config(p).get("kind") == "ensemble"),
    "set-embedding": Kind("a set embedding (superbloom embed-train)", lambda p: _trained(p, "embed")),
    "text-classifier": Kind("a text classifier (superbloom textclass-train)", lambda p: _trained(p, "textclass")),
    "dataset": Kind("a prepared dataset (superbloom prepare / prepare-text)",
                    lambda p: (p / "meta.json").is_file() and (p / "vocab.txt").is_file(), staging=".partial"),
    "demo": Kind("the demo's folder (superbloom demo)",
                 lambda p: (p / "data" / "meta.json").is_file() or (p / "model" / "config.json").is_file()),
    "vectors": Kind("a vectors file (superbloom embed)", lambda p: False, file=True),
    "links": Kind("a links file (superbloom synth)", lambda p: False, file=True),
    "recommendations": Kind("a recommendations file (superbloom predict --output)", lambda p: False, file=True),
    "item-vectors": Kind("an item vectors file (superbloom vectors)", lambda p: False, file=True),
}


def _marker_path(path: Path, kind: str) -> Path:
    return path.with_name(f".{path.name}{MARKER}") if KINDS[kind].file else path / MARKER


def read_marker(path: Path, kind: str) -> dict | None:
    """Our marker of `path` (a folder's `.superbloom.json`, a file's sidecar), or None (absent, unreadable,
    or a file's sidecar that matches no version of the file we wrote: a file the user put there later)."""
    try:
        marker = load_json(_marker_path(path, kind))
    except (OSError, ValueError):
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


def kind_of(path: Path, kind: str) -> str | None:
    """What `path` is as far as we can tell: the kind its marker names, `kind` for a folder of that kind
    written before markers existed, else None (not ours)."""
    marker = read_marker(path, kind)
    if marker is not None:
        return marker["kind"]
    if KINDS[kind].file or not path.is_dir():
        return None
    return next((k for k, entry in KINDS.items() if not entry.file and entry.legacy(path)), None)


def is_ours(path: Path, kind: str) -> bool:
    return kind_of(path, kind) == kind


def write_marker(path: Path, kind: str, run: str, complete: bool, files: list | None = None) -> None:
    """Mark `path` ours: kind, run id, complete; a file's sidecar lists the [size, mtime_ns] of the
    versions of the file it vouches for (`files`)."""
    record = {"kind": kind, "run": run, "complete": complete, "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if KINDS[kind].file:
        record["files"] = files or []
    save_json(_marker_path(path, kind), record)


def _stat(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def _complete(path: Path, kind: str) -> bool:
    marker = read_marker(path, kind)
    return marker is not None and marker["kind"] == kind and bool(marker.get("complete"))


def remove_ours(path: Path, kind: str) -> None:
    """Remove an output of ours: a folder's contents first and its marker last (a kill part-way leaves it
    marked, and the next run finishes); a file, then its sidecar."""
    if KINDS[kind].file:
        path.unlink(missing_ok=True)
        _marker_path(path, kind).unlink(missing_ok=True)
        return
    if not path.exists():
        return
    for entry in path.iterdir():
        if entry.name != MARKER:
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    (path / MARKER).unlink(missing_ok=True)
    path.rmdir()


# ------------------------------------------------------------------------------ checks before any work


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def check_path(out: str | Path, kind: str, flag: str = "--out") -> Path:
    """The output path `out`, refused (OutputError, one line) if it is "", the root, the current folder
    or one above it, or exists as the wrong type (a file or device for a folder; a folder, device or
    other non-regular file for a file)."""
    if str(out).strip() == "":
        raise OutputError(f"{flag} is empty; expected a path for {KINDS[kind].what}")
    path = Path(out)
    here, full = Path.cwd().resolve(), path.resolve()
    if full == Path(full.anchor) or full == here or full in here.parents:
        what = ("the root folder" if full == Path(full.anchor) else "the current folder" if full == here
                else "a folder above the current one")
        raise OutputError(f"{flag} {out} is {what}; give a folder of its own for {KINDS[kind].what}")
    if path.exists() or path.is_symlink():
        if KINDS[kind].file:
            if path.is_dir():
                raise OutputError(f"{flag} {out} is a directory; expected a file name for {KINDS[kind].what}")
            if not path.is_file():
                raise OutputError(f"{flag} {out} is not a regular file (a device, pipe or socket); expected a "
                                  f"file name for {KINDS[kind].what}")
        elif not path.is_dir():
            what = "a file" if path.is_file() else "a device, pipe, socket or broken link"
            raise OutputError(f"{flag} {out} is {what}, not a directory; expected a folder for {KINDS[kind].what}")
    return path


@dataclass
class Target:
    """A checked output: `path` (its final name), `kind`, `run` (this run's id, in every marker it writes)."""

    path: Path
    kind: str
    run: str

    @property
    def staging(self) -> Path:
        return _sibling(self.path, KINDS[self.kind].staging)

    @property
    def old(self) -> Path:
        return _sibling(self.path, ".old")

    def holds_output(self) -> bool:
        """Does the final path hold an output of ours (which a new run would replace)?"""
        return self.path.exists() and kind_of(self.path, self.kind) == self.kind

    def mark_in_place(self) -> Path:
        """Write in the final path itself (a new output in an empty or missing folder, or a resumed run):
        the folder is made and marked (complete: it holds a usable output whenever it holds one at all)."""
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
        """The staged output, complete, takes the final name in one step (two renames; recover() completes
        a kill between them); the previous output of ours is removed after."""
        write_marker(self.staging, self.kind, self.run, complete=True)
        if self.path.exists():
            if is_empty_dir(self.path):
                self.path.rmdir()
            else:
                if read_marker(self.path, self.kind) is None:  # an older folder of ours: adopted before it moves
                    write_marker(self.path, self.kind, "before-markers", complete=True)
                self.path.rename(self.old)
        self.staging.rename(self.path)
        remove_ours(self.old, self.kind)

    def discard(self) -> None:
        """A failed run's staged output goes; the final path is left as it was."""
        if self.staging.exists():
            remove_ours(self.staging, self.kind)

    @contextlib.contextmanager
    def writing(self) -> Iterator[Path]:
        """A single file: yield a hidden temporary path beside it; when the block succeeds, the sidecar
        vouches for the old (if ours) and the new version, the file is renamed into place (one step), and
        the sidecar then names the new one only. A kill at any moment leaves the old or the new file,
        both marked ours, and at worst a hidden temporary file that the next run removes."""
        tmp = self.path.with_name(f".{self.path.name}.tmp-{self.run}")
        try:
            yield tmp
            versions = ([_stat(self.path)] if self.path.is_file() else []) + [_stat(tmp)]
            write_marker(self.path, self.kind, self.run, True, versions)
            os.replace(tmp, self.path)  # rename keeps size and mtime: the new version is vouched for
            write_marker(self.path, self.kind, self.run, True, [_stat(self.path)])
        finally:
            tmp.unlink(missing_ok=True)


def is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


MARKER_TMP = f".{MARKER}.tmp"  # the prefix of an unfinished write of a folder's marker (files.atomic_path)


def unstarted(path: Path) -> bool:
    """A folder holding nothing, or nothing but unfinished writes of our marker: what a kill leaves
    between making a folder and marking it (Target.stage, Target.mark_in_place). Nothing in it can be
    lost, and only we write such names, so claim treats it as ours."""
    return (path.is_dir() and not path.is_symlink()
            and all(e.name.startswith(MARKER_TMP) and e.is_file() for e in path.iterdir()))


def claim(out: str | Path, kind: str, flag: str = "--out") -> Target:
    """Check an output path before any work -> its Target (with a fresh run id), after recovering what a
    killed run left (recover). Refuses (OutputError, one line, nothing changed) a path check_path refuses,
    a folder that holds files but is not ours of this kind, a user's OUT.new / OUT.partial / OUT.old
    beside it, and a place we cannot write."""
    path = check_path(out, kind, flag)
    target = Target(path, kind, uuid.uuid4().hex[:12])
    entry = KINDS[kind]
    for side in () if entry.file else [_sibling(path, s) for s in SIDE_SUFFIXES]:
        if (side.exists() or side.is_symlink()) and (not side.is_dir() or not (is_ours(side, kind) or unstarted(side))):
            raise OutputError(f"{side} exists beside {flag} {out} and is not {entry.what} written by superbloom; "
                              "move it away or choose another --out (nothing was changed)")
    if path.exists() and not entry.file and not unstarted(path):
        found = kind_of(path, kind)
        if found is None:
            raise OutputError(f"{flag} {out} holds files that superbloom did not write; expected a new or empty "
                              f"folder, or {entry.what} (nothing was changed)")
        if found != kind:
            raise OutputError(f"{flag} {out} holds {KINDS[found].what}; expected {entry.what} (give another "
                              "folder; nothing was changed)")
    if entry.file and path.is_file() and read_marker(path, kind) is None:
        raise OutputError(f"{flag} {out} exists and was not written by superbloom; give a new file name (nothing "
                          "was changed)")
    _check_writable(path, flag, out)
    recover(target)
    return target


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
    folders and files of ours of the target's kind are touched (claim checked them)."""
    kind, path, staged, old = target.kind, target.path, target.staging, target.old
    if KINDS[kind].file:
        for tmp in path.parent.glob(f".{glob.escape(path.name)}.tmp-*"):  # hidden files of killed runs
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
            remove_ours(old, kind)  # the swap was done; the old output's removal was not
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
        if staged.is_dir() and _complete(staged, k):
            return staged
        old = _sibling(path, ".old")
        if old.is_dir() and is_ours(old, k):
            return old
    return path


__all__ = ["KINDS", "MARKER", "Kind", "OutputError", "Target", "check_path", "claim", "is_ours", "kind_of",
           "read_marker", "recover", "remove_ours", "resolve", "unstarted", "write_marker"]
