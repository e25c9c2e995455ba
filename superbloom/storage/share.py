"""A model folder copied for sharing: what `sb.load` reads, without the training state.

    copy_model("runs/wiki", "shared/wiki", "model")    # model.save(dir) calls this; sb.load("shared/wiki")

Every file of the folder is copied (config, vocabulary, hash maps, card, metrics, eval.json, an
index), except the checkpoints: of those only the one inference loads (BEST, else LATEST) is kept,
its weights and state without the optimizer's, with the fixed weights it names and a pointer to it.
An ensemble's member folders are copied the same way. The copy is not resumable (no optimizer state),
and loads, ranks and scores exactly as the original.

The destination goes through the guarded writer (guarded.py): a new or empty folder, or a model of
ours of the same kind (replaced whole), built beside its name and swapped in, so a failure leaves
what was there; a user's folder is refused before anything is copied.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from .checkpoint import inference_checkpoint
from .fixed import named_fixed
from .guarded import MARKER, claim

TRAINING_ONLY = ("optimizer.safetensors", "optimizer.json")  # a checkpoint's files inference never reads


def copy_model(src: str | Path, out: str | Path, kind: str, flag: str = "out") -> Path:
    """`src` (a model folder of guarded kind `kind`: model, ensemble, set-embedding, text-classifier)
    copied to `out` for sharing (module docstring) -> out. OutputError before any copy when `out` may
    not be written; ValueError when `out` is `src` itself or inside it."""
    src = Path(src)
    if Path(out).resolve() == src.resolve() or src.resolve() in Path(out).resolve().parents:
        raise ValueError(f"{flag} {out}: the model's own folder (or inside it); give another folder")
    target = claim(out, kind, flag)
    target.check_replace()  # a model of ours there holding files not ours, or an unmarked one: refused, naming them
    work = target.stage()
    try:
        _copy_tree(src, work, top=True)
        target.commit()
    except BaseException:
        target.discard()
        raise
    return target.path


def _copy_tree(src: Path, dst: Path, top: bool = False) -> None:
    """Everything of folder `src` into `dst` (which exists): a folder holding checkpoints keeps only
    its inference checkpoint and the pointer to it; sub-folders (an ensemble's members) alike, their
    ownership markers with them (the top folder's is the guarded writer's own)."""
    ckpt = inference_checkpoint(src) if (src / "checkpoints").is_dir() else None
    fixed = named_fixed(ckpt / "model.safetensors") if ckpt is not None and (ckpt / "model.safetensors").is_file() \
        else None
    for entry in sorted(src.iterdir()):
        name = entry.name
        if top and (name == MARKER or name.startswith(f".{MARKER}")) or name in ("LATEST", "BEST", "checkpoints"):
            continue  # the guarded writer's marker, or rewritten below
        if name.startswith("fixed-") and name != fixed:
            continue  # the fixed weights of checkpoints not kept
        if entry.is_dir():
            (dst / name).mkdir()
            _copy_tree(entry, dst / name)
        elif entry.is_file():
            shutil.copy2(entry, dst / name)
    if ckpt is not None:
        kept = dst / "checkpoints" / ckpt.name
        kept.mkdir(parents=True)
        for f in sorted(ckpt.iterdir()):
            if f.is_file() and f.name not in TRAINING_ONLY:
                shutil.copy2(f, kept / f.name)
        pointer = "BEST" if ckpt.name.startswith("best-") else "LATEST"
        (dst / pointer).write_text(f"checkpoints/{ckpt.name}\n", encoding="utf-8")


def copy_members(members: list[str | Path], out: str | Path, config: dict, flag: str = "out") -> Path:
    """An ensemble folder at `out` from model folders assembled in memory: each copied as member-i (as
    copy_model copies one), and config.json = `config` with their names -> out."""
    from .files import save_json

    target = claim(out, "ensemble", flag)
    target.check_replace()
    work = target.stage()
    try:
        names = []
        for i, m in enumerate(members):
            names.append(f"member-{i}")
            (work / names[-1]).mkdir()
            _copy_tree(Path(m), work / names[-1])
        save_json(work / "config.json", dict(config, members=names))
        target.commit()
    except BaseException:
        target.discard()
        raise
    return target.path
