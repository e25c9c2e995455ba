"""The fixed part of a model's weights, stored once per model folder instead of in every checkpoint.

A module declares the buffers that are fitted once before training and never changed by it with
`declare_fixed(module, names)` (the hybrid heads' sparse item-item term: heads/base.py `fixed_buffers`);
the declarations live in a registry here, so storage never asks a module what it is. Their tensors go
to MODEL_DIR/fixed-<digest>.safetensors, named by a digest of their contents, written once; each
checkpoint's model.safetensors then holds the other weights and names that file in its metadata
(`superbloom.fixed`). At 1M ids the bigram term is about 110 MB: three checkpoints held it three
times. Loading merges the two files into one state dict (so a head's _load_from_state_dict sees
its whole state at once). A checkpoint written before this (the term inside model.safetensors)
names no file and loads as it did. A fixed file no checkpoint names any more is pruned with the
checkpoints (prune_fixed).

    weights, fixed = split_weights(model)        # {name: tensor} for model.safetensors, {name: tensor} fixed
    name = write_fixed(model_dir, fixed)         # "fixed-<digest>.safetensors", written if not there
    tensors = fixed_of(ckpt, model.safetensors)  # {} or the fixed tensors that checkpoint names
"""
from __future__ import annotations

import hashlib
import json
import struct
import weakref
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from .files import atomic_path
from .loading import LoadError, check_safetensors

META_KEY = "superbloom.fixed"


_DECLARED: "weakref.WeakKeyDictionary[torch.nn.Module, tuple[str, ...]]" = weakref.WeakKeyDictionary()


def declare_fixed(module: torch.nn.Module, names) -> None:
    """Buffers `names` of `module` are fixed: written once per model folder, not in each checkpoint."""
    _DECLARED[module] = tuple(names)


def fixed_names(model: torch.nn.Module) -> list[str]:
    """State-dict names of the buffers the model's modules declared fixed (declare_fixed)."""
    return [f"{prefix}.{b}" if prefix else b for prefix, module in model.named_modules()
            for b in _DECLARED.get(module, ())]


def split_weights(model: torch.nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(weights, fixed): the model's state dict without and with only its fixed buffers, each tensor
    contiguous, a tensor shared by several names (a tied embedding) kept under its first name only
    (safetensors stores shared memory once; checkpoint._is_tied accepts the other names missing)."""
    fixed = set(fixed_names(model))
    weights, keep, seen = {}, {}, set()
    for name, t in model.state_dict().items():
        if name in fixed:
            keep[name] = t.detach().contiguous()
            continue
        ident = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride())
        if t.numel() and ident in seen:
            continue
        seen.add(ident)
        weights[name] = t.detach().contiguous()
    return weights, keep


def digest(tensors: dict[str, torch.Tensor]) -> str:
    """A digest of names, dtypes, shapes and bytes (blake2b, 16 hex digits): equal iff the term is."""
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        if t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy())
    return h.hexdigest()


def write_fixed(model_dir: Path, fixed: dict[str, torch.Tensor]) -> str:
    """MODEL_DIR/fixed-<digest>.safetensors holding `fixed`, written atomically unless a complete one
    is there already -> its file name (what a checkpoint's metadata names)."""
    name = f"fixed-{digest(fixed)}.safetensors"
    path = Path(model_dir) / name
    try:
        check_safetensors(path)
        return name
    except LoadError:
        pass
    with atomic_path(path) as tmp:
        save_file({k: v.cpu() for k, v in fixed.items()}, str(tmp))
    return name


def named_fixed(weights_file: Path) -> str | None:
    """The fixed file a checkpoint's model.safetensors names in its metadata, or None (reads the header)."""
    with open(weights_file, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        meta = json.loads(f.read(n)).get("__metadata__") or {}
    return meta.get(META_KEY)


def fixed_path(ckpt: Path) -> Path | None:
    """The fixed file (MODEL_DIR/fixed-*.safetensors) checkpoint `ckpt` needs, checked complete; None for
    a checkpoint that needs none; LoadError naming it when it is missing or truncated."""
    name = named_fixed(Path(ckpt) / "model.safetensors")
    if name is None:
        return None
    model_dir = Path(ckpt).parent.parent
    path = model_dir / name
    if Path(name).name != name or not name.startswith("fixed-"):
        raise LoadError(f"{ckpt / 'model.safetensors'}: names {name!r} as its fixed weights; expected a "
                        "fixed-<digest>.safetensors file in the model folder")
    check_safetensors(path, f"the fixed weights (the item-item term) that {ckpt.name} names")
    return path


def fixed_of(ckpt: Path, device: str = "cpu") -> dict[str, torch.Tensor]:
    """The fixed tensors checkpoint `ckpt` names ({} if none), read onto `device`."""
    path = fixed_path(ckpt)
    return {} if path is None else load_file(str(path), device=device)


def prune_fixed(model_dir: Path, checkpoints: list[Path]) -> None:
    """Remove MODEL_DIR/fixed-*.safetensors files that none of `checkpoints` names."""
    files = list(Path(model_dir).glob("fixed-*.safetensors"))
    if not files:
        return
    used = set()
    for c in checkpoints:
        try:
            used.add(named_fixed(c / "model.safetensors"))
        except (OSError, ValueError, struct.error):
            return  # a checkpoint we cannot read: keep every file
    for f in files:
        if f.name not in used:
            f.unlink(missing_ok=True)
