"""Model directories and atomic, resumable checkpoints (no pickle anywhere).

    MODEL_DIR/config.json              hash / model / head / training configs + data summary
    MODEL_DIR/hashing.safetensors      the m hash maps and the inverse index (int32)
    MODEL_DIR/vocab.txt, counts.npy    the vocabulary the ids refer to
    MODEL_DIR/metrics.jsonl            one JSON object per logged step / validation
    MODEL_DIR/LATEST                   name of the newest complete checkpoint (what --resume continues)
    MODEL_DIR/BEST                     name of the checkpoint with the best validation score, if kept
    MODEL_DIR/checkpoints/step-N/      model.safetensors, optimizer.safetensors, state.json
    MODEL_DIR/checkpoints/best-N/      model.safetensors, state.json (weights only)

A checkpoint is written into a temporary directory and renamed into place, then its pointer is
replaced atomically: a kill at any moment leaves the previous checkpoint intact and loadable.
Inference loads BEST when there is one, else LATEST.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, load_model, save_file, save_model

from .files import atomic_path, load_json, save_json


def latest_checkpoint(model_dir: str | Path, pointer: str = "LATEST") -> Path | None:
    model_dir = Path(model_dir)
    latest = model_dir / pointer
    if not latest.exists():
        return None
    path = model_dir / latest.read_text().strip()
    return path if (path / "state.json").exists() else None


def inference_checkpoint(model_dir: str | Path) -> Path | None:
    """The weights to serve: the best validated checkpoint if one was kept, else the latest."""
    return latest_checkpoint(model_dir, "BEST") or latest_checkpoint(model_dir)


def save_checkpoint(model_dir: str | Path, step: int, model: torch.nn.Module, optimizer, state: dict,
                    keep: int = 2, kind: str = "step", pointer: str = "LATEST") -> Path:
    model_dir = Path(model_dir)
    final = model_dir / "checkpoints" / f"{kind}-{step:09d}"
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_model(model, str(tmp / "model.safetensors"))
    if optimizer is not None:
        tensors, meta = _optimizer_state(optimizer)
        save_file(tensors, str(tmp / "optimizer.safetensors"))
        save_json(tmp / "optimizer.json", meta)
    save_json(tmp / "state.json", state)  # last: marks the directory complete
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    with atomic_path(model_dir / pointer) as t:
        t.write_text(str(final.relative_to(model_dir)) + "\n")
    old = sorted(p for p in (model_dir / "checkpoints").glob(f"{kind}-*") if not p.name.endswith(".tmp"))
    for p in old[:-keep]:
        shutil.rmtree(p, ignore_errors=True)
    return final


def load_weights(model: torch.nn.Module, ckpt: Path) -> None:
    """Weights of checkpoint `ckpt` into `model`, onto the device the model is on."""
    device = next(model.parameters()).device
    missing, unexpected = load_model(model, str(ckpt / "model.safetensors"), strict=False, device=str(device))
    if unexpected or [k for k in missing if not _is_tied(model, k)]:
        raise ValueError(f"{ckpt}: weights do not fit the model (missing {missing}, unexpected {unexpected})")


def _is_tied(model, name: str) -> bool:
    """safetensors stores a shared tensor once; its other names are reported missing."""
    params = dict(model.named_parameters(remove_duplicate=False))
    return name in params and any(params[name] is p for n, p in params.items() if n != name)


def load_optimizer(optimizer, ckpt: Path) -> None:
    """Optimizer state of `ckpt` (torch moves each state tensor to its parameter's device)."""
    meta = load_json(ckpt / "optimizer.json")
    tensors = load_file(str(ckpt / "optimizer.safetensors"))
    state: dict = {}
    for key, value in list(tensors.items()) + list(meta["scalars"].items()):
        idx, name = key.split(".", 1)
        state.setdefault(int(idx), {})[name] = value
    optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})


def _optimizer_state(optimizer) -> tuple[dict, dict]:
    sd = optimizer.state_dict()
    tensors, scalars = {}, {}
    for idx, st in sd["state"].items():
        for name, v in st.items():
            if torch.is_tensor(v):
                tensors[f"{idx}.{name}"] = v.detach().contiguous()
            else:
                scalars[f"{idx}.{name}"] = v
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def rng_state(rng: np.random.Generator) -> dict:
    st = rng.bit_generator.state
    return {"bit_generator": st["bit_generator"], "state": {k: str(v) for k, v in st["state"].items()},
            "has_uint32": st["has_uint32"], "uinteger": st["uinteger"]}


def restore_rng(saved: dict) -> np.random.Generator:
    rng = np.random.default_rng()
    rng.bit_generator.state = {"bit_generator": saved["bit_generator"],
                               "state": {k: int(v) for k, v in saved["state"].items()},
                               "has_uint32": saved["has_uint32"], "uinteger": saved["uinteger"]}
    return rng
