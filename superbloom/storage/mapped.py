"""Model weights as views of a memory-mapped safetensors file: one copy shared by every process.

    map_weights(model, ckpt)   # model's parameters now alias ckpt/model.safetensors' pages (and the
                               # fixed-*.safetensors file it names, storage/fixed.py)

`checkpoint.load_weights` reads the file into fresh tensors, so N server processes hold N copies of
the tables. Here the file is mapped copy-on-write (MAP_PRIVATE) and every tensor of it becomes a
torch view of its bytes (safetensors layout: 8-byte little-endian header length, a JSON header of
dtype / shape / byte range per tensor, then the raw little-endian data). The pages come from the
page cache and are shared by every process that maps the same file until one writes to them, which
inference never does (the process' own copy would be made then, page by page, never the file
changed). The weights are then put into the model with `load_state_dict(assign=True)`, so no copy is
made; the randomly initialised tensors the model was built with are freed.

RSS counts shared pages in every process that touches them: the figure that shows the sharing is
PSS (/proc/PID/smaps_rollup), which splits each shared page between the processes mapping it.
Checkpoints are never rewritten in place (checkpoint.py writes new directories), and a deleted
file stays readable through an existing mapping, so training on beside a server is safe.
Only for CPU models: on an accelerator the weights must be copied to its memory anyway.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import torch

_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
           "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
           "BOOL": torch.bool}


def map_safetensors(path: str | Path) -> dict[str, torch.Tensor]:
    """{name: tensor} viewing a copy-on-write memory map of the safetensors file at `path`.
    A tensor whose bytes are not aligned to its element size (never written by safetensors, which
    aligns its header to 8 bytes and sorts tensors by alignment) is copied instead."""
    path = Path(path)
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    if not header:
        return {}
    data = torch.from_numpy(np.memmap(path, dtype=np.uint8, mode="c"))  # (file bytes,) uint8, shared pages
    out = {}
    for name, info in header.items():
        if info["dtype"] not in _DTYPES:
            raise ValueError(f"{path}: tensor {name!r} has dtype {info['dtype']}; expected one of {sorted(_DTYPES)}")
        dtype = _DTYPES[info["dtype"]]
        a, b = (8 + n + o for o in info["data_offsets"])
        raw = data[a:b]
        if a % dtype.itemsize:
            raw = raw.clone()
        out[name] = raw.view(dtype).reshape(info["shape"])
    return out


def map_weights(model: torch.nn.Module, ckpt: Path) -> None:
    """The weights of checkpoint `ckpt` into the (CPU) `model` as mapped views (no copy); the same
    checks as checkpoint.load_weights."""
    from .checkpoint import check_shapes, fit_state
    from .fixed import fixed_path
    from .loading import check_safetensors

    path = Path(ckpt) / "model.safetensors"
    check_safetensors(path, "a checkpoint's weights")
    check_shapes(model, path)
    tensors = map_safetensors(path)
    fixed = fixed_path(Path(ckpt))  # the term, stored once per folder: mapped and shared as well
    if fixed is not None:
        tensors.update(map_safetensors(fixed))
    fit_state(model, tensors, ckpt, assign=True)


def is_mapped(t: torch.Tensor, path: str | Path) -> bool:
    """Does tensor `t`'s memory lie in a mapping of the file at `path` (Linux /proc/self/maps)?"""
    where = t.data_ptr()
    target = str(Path(path).resolve())
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].strip() == target:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                if lo <= where < hi:
                    return True
    return False
