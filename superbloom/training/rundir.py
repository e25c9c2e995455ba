"""The run skeleton every trainer shares (the id model's train(), setembed's embed_train(), the text
classifier's train_textclass()): where a run writes, so that no trained model is ever lost, and
what its config.json records across resumes.

    out = check_out(cfg.out)                                    # before any work
    ckpt = resume_point(out, resume, overwrite, main=d.main)    # the overwrite / resume policy
    if ckpt is not None:
        saved = read_saved(out, ("train",))                     # config.json, its sections checked
        arch, changed = config_changes(saved_settings, cfg.to_dict(), ARCHITECTURE)
        refuse_changes(arch, "...", out)
    run = open_run(out, ckpt)                                   # staged beside OUT over an old model
    ... write run.path/config.json (a new run) or continue_run(out, ckpt, saved, "train", now, changed)
    with attempt(run, d.main):
        fit(objective, loop, optim, run, d, ckpt, progress)     # BEST / LATEST: loop.fit

The policy: a new run in an empty (or missing) directory writes there; cfg.out may hold a model
only with resume (continue its newest complete checkpoint; the architecture must not change, other
settings may and are recorded in config.json's "resumes") or overwrite (a new run staged in
`OUT.new` that replaces OUT only at its first complete checkpoint: a failure or a kill before it
leaves the previous model untouched).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import uuid
from pathlib import Path
from typing import Callable, TypeVar

from .._version import __version__
from ..storage.checkpoint import check_checkpoint, holds_model, latest_checkpoint
from ..storage.files import load_json, save_json
from ..storage.guarded import Target, claim, kind_of
from ..storage.loading import LoadError, read_config

log = logging.getLogger(__name__)
T = TypeVar("T")
FORMAT_VERSION = 1  # config.json's layout (config.json's "versions"): raised when a reader must tell layouts apart


class RunDir:
    """Where a run writes.

    A new run over a directory that holds a model (only with overwrite=True), or any new run that
    commits at its end (`at_end`: the set embedding and the text classifier, whose final files are
    written after training), writes into a staging directory beside OUT, `OUT.new` (storage/guarded.py:
    marked ours, incomplete), and takes OUT's place only at its first complete checkpoint (`committed`)
    or, with `at_end`, when the run is done (`finish`): until then a failure or a kill leaves the
    previous model untouched, and the next run or a loader recovers whatever state a kill left. A new
    run in an empty (or missing) directory otherwise, and a resumed run, write in place."""

    def __init__(self, final: Path, staged: bool, kind: str = "model", at_end: bool = False, main: bool = True):
        self.final, self.at_end = final, at_end
        self.target = Target(final, kind, uuid.uuid4().hex[:12])
        self.path = final.with_name(final.name + ".new") if staged else final
        if main:
            self.path = self.target.stage() if staged else self.target.mark_in_place()

    @property
    def staged(self) -> bool:
        return self.path != self.final

    def committed(self) -> None:
        """After a complete checkpoint: a staged run replaces the previous model (unless it commits at its end)."""
        if not self.at_end:
            self.finish()

    def finish(self) -> None:
        """The staged run, complete, replaces the previous model in one step (Target.commit)."""
        if self.staged:
            self.target.commit()
            self.path = self.final


def check_out(out: str | Path, kind: str = "model") -> Path:
    """The model directory to write, checked and locked before any work (storage/guarded.claim: not "", "/"
    or the current folder, nor a link; a folder, empty or holding a model of ours of this kind; no other
    process writing it; no user's OUT.new / OUT.old beside it; writable), after recovering what a killed run
    left there. OutputError (a ValueError) if not. The lock lasts as long as the trainer's
    storage.guarded.one_writer scope; the other processes of a distributed run only check."""
    return claim(out, kind, main=_main_process()).path


def _main_process() -> bool:
    """Rank 0 of a distributed run, or the only process: the one that locks, recovers and writes."""
    import torch.distributed as dist

    return not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0


def resume_point(out: Path, resume: bool, overwrite: bool, main: bool = True) -> Path | None:
    """The overwrite / resume policy -> the checkpoint to continue (resume), or None for a new run.
    Refuses, changing nothing, a directory that holds a model when neither flag allows it, and a
    resume whose directory holds model files but no complete checkpoint."""
    if resume and overwrite:
        raise ValueError("--resume and --overwrite exclude each other")
    found = kind_of(out, "model") if out.is_dir() else None  # the kind its marker names, or its files say
    if resume and main and found is not None:
        Target(out, found, uuid.uuid4().hex[:12]).adopt()  # a folder written before markers: continued by name
    if overwrite and found is not None and holds_model(out):
        Target(out, found, "check").check_replace()  # an unmarked folder, or one holding files not ours: refused
    ckpt = latest_checkpoint(out, promote=True) if resume else None  # no finished step lost
    if resume and ckpt is None:
        if holds_model(out):
            raise ValueError(f"--resume: {out} holds model files but no complete checkpoint to continue from; "
                             "nothing was changed (start a new run there with --overwrite)")
        if main:
            log.info(f"no checkpoint in {out}; starting a new run" + (" (replacing the config files of a run stopped "
                     "before its first checkpoint)" if (out / "config.json").exists() else ""))
    if ckpt is None and holds_model(out) and not overwrite:
        raise ValueError(f"{out} already holds a model; pass --resume to continue it or --overwrite to replace it "
                         "(the old model is kept until the new run has a complete checkpoint)")
    return ckpt


def read_saved(out: Path, sections: tuple[str, ...], build: Callable[[dict], T] | None = None) -> dict | T:
    """OUT/config.json of the run a resume continues: a JSON object holding each of `sections` as an object
    (-> it), or with `build`, the run's config built from it (-> build(config)); one LoadError naming the
    file otherwise (a field renamed, removed or of another shape by hand), before anything is written."""
    config = read_config(out, {name: dict for name in sections})
    if build is None:
        return config
    try:
        return build(config)
    except (TypeError, KeyError, AttributeError, ValueError) as e:
        raise LoadError(f"{Path(out) / 'config.json'}: its settings do not rebuild the run ({type(e).__name__}: {e}); "
                        "expected the config.json superbloom wrote (was it edited by hand?)") from None


# settings no resume may change, whatever the trainer: a checkpoint's optimizer state is that optimizer's
KEPT_ON_RESUME = ("optim.name",)


def config_changes(before: dict, now: dict, architecture: tuple[str, ...],
                   skip: tuple[str, ...] = ("data", "out")) -> tuple[list[str], list[str]]:
    """(architecture changes, other changes) of the settings `now` against `before` (both as
    config.json's "train" holds them), as 'field old -> new' strings; a dict-valued setting is
    compared field by field. `architecture` names the settings a resumed run must keep: a section
    ("model") or one field of a section ("loop.seed"). Settings in `skip` are not compared."""
    arch, other = [], []
    for key, new in now.items():
        if key in skip:
            continue
        old = before.get(key)
        if isinstance(new, dict) and isinstance(old, dict):
            diffs = [(f"{key}.{k}", f"{key}.{k} {old.get(k)!r} -> {v!r}") for k, v in new.items() if old.get(k) != v]
        else:
            diffs = [(key, f"{key} {old!r} -> {new!r}")] if old != new and key in before else []
        for name, text in diffs:
            kept = name in architecture or name.split(".")[0] in architecture or name in KEPT_ON_RESUME
            (arch if kept else other).append(text)
    return arch, other


def refuse_changes(arch: list[str], what: str, out: Path) -> None:
    """A resume that would change the architecture stops here, naming every change."""
    if arch:
        raise ValueError(f"--resume cannot change {what}: {'; '.join(arch)} (the run in {out} keeps its settings; "
                         "start a new run with --overwrite to change them)")


def open_run(out: Path, ckpt: Path | None, kind: str = "model", at_end: bool = False, main: bool = True) -> RunDir:
    """Where this run writes: in place (a resume, or nothing there), or staged beside a model that a
    new run replaces at its first complete checkpoint (at_end: every new run, replacing at its end)."""
    staged = ckpt is None and (at_end or holds_model(out))
    if staged:
        Target(out, kind, "check").check_replace()  # what the swap replaces is ours, every entry of it
    return RunDir(out, staged=staged, kind=kind, at_end=at_end, main=main)


def start_run(run: RunDir, hashing, vocab, config: dict) -> None:
    """A new run's files (rank 0): the run folder, its hash maps, vocabulary and config.json (the
    versions that wrote it first)."""
    run.path.mkdir(parents=True, exist_ok=True)
    hashing.save(run.path / "hashing.safetensors")
    vocab.save(run.path)
    save_json(run.path / "config.json", {"versions": versions(), **config})


def versions() -> dict:
    """What wrote a model directory (config.json's "versions"): the superbloom, torch and format versions."""
    import torch

    return {"superbloom": __version__, "torch": torch.__version__, "format": FORMAT_VERSION}


def dataset_record(data: str | Path) -> dict:
    """How config.json names a prepared dataset (its "dataset"): the folder's name and the sha256 of its
    meta.json, never the machine's path (a resume takes the path from the command line)."""
    path = Path(data)
    return {"name": path.resolve().name, "meta_sha256": hashlib.sha256((path / "meta.json").read_bytes()).hexdigest()}


def portable(settings: dict) -> dict:
    """A run's settings (config.json's "train") with the paths `data` and `out` as folder names: a model
    directory records no path of the machine it was trained on (resume and eval take paths as given)."""
    return {k: Path(v).name if k in ("data", "out") and isinstance(v, str) and v else v for k, v in settings.items()}


def portable_summary(meta: dict) -> dict:
    """A dataset's meta.json as config.json's "data" copies it: the raw input file by its name only."""
    return dict(meta, input=Path(meta["input"]).name) if isinstance(meta.get("input"), str) else meta


def continue_run(out: Path, ckpt: Path, saved: dict, section: str, now: dict, changed: list[str],
                 main: bool = True) -> None:
    """A resumed run: drop the metrics a killed run logged after its checkpoint, and record the
    settings it changes (config.json's `section` and its "resumes" history)."""
    if not main:
        return
    check_checkpoint(ckpt)  # before anything is written: a truncated checkpoint is refused, naming its file
    truncate_metrics(out / "metrics.jsonl", load_json(ckpt / "state.json")["step"])
    if changed:
        log.info("resume: changed settings (recorded in config.json): " + "; ".join(changed))
        resumes = saved.get("resumes", []) + [{"from": ckpt.name, "changed": changed}]
        save_json(out / "config.json", dict(saved, **{section: portable(now)}, resumes=resumes))


@contextlib.contextmanager
def attempt(run: RunDir, main: bool = True):
    """Around fit: a staged run that never reached its commit is removed (the previous model stays)."""
    try:
        yield run
    finally:
        if main and run.staged:
            run.target.discard()


def truncate_metrics(path: Path, step: int) -> None:
    """Drop metrics.jsonl records a killed run wrote after the checkpoint it resumes from, and a last
    line a kill cut short (said, naming the file); any other line that is not a JSON object is refused
    (ValueError naming the file and line), the file unchanged."""
    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    keep = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("not an object")
        except ValueError:
            if n == len(lines):
                log.warning("%s: line %d is cut short (a killed run's last write): dropped", path, n)
                continue
            raise ValueError(f"{path}, line {n}: not a JSON object (a metrics record was expected); "
                             "nothing was changed") from None
        if not isinstance(record.get("step", 0), int) or record.get("step", 0) <= step:
            keep.append(line)
    path.write_text("".join(line + "\n" for line in keep), encoding="utf-8")
