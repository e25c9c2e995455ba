"""Model directories and atomic, resumable checkpoints (no pickle anywhere).

    MODEL_DIR/config.json              hash / model / head / training configs + data summary
    MODEL_DIR/hashing.safetensors      the m hash maps and the inverse index (int32)
    MODEL_DIR/vocab.txt, counts.npy    the vocabulary the ids refer to
    MODEL_DIR/metrics.jsonl            one JSON object per logged step / validation
    MODEL_DIR/LATEST                   name of the newest complete checkpoint (what --resume continues)
    MODEL_DIR/BEST                     name of the checkpoint with the best validation score, if kept
    MODEL_DIR/checkpoints/step-N[-r]/  model.safetensors, optimizer.safetensors, state.json
    MODEL_DIR/checkpoints/best-N[-r]/  model.safetensors, state.json (weights only)
    MODEL_DIR/fixed-<digest>.safetensors  buffers fitted once and never trained (a hybrid head's term),
                                       stored once, named by each checkpoint's weights (fixed.py)

A checkpoint is written into a temporary directory (`.tmp`), state.json last (its presence marks
the directory complete), renamed into place under a name no other checkpoint has (a second
checkpoint of one step gets `-1`, `-2`, ...), and only then is its pointer replaced atomically;
older checkpoints are pruned after that. So a pointer only ever names a complete checkpoint, and a
kill at any moment leaves the previous one intact and loadable. If a pointer is stale anyway (a
directory edited by hand) or behind (a kill between rename and pointer), `latest_checkpoint`
takes the newest complete checkpoint of its kind, promoting a complete `.tmp` directory if that is
the newest (readers only when no pointer is valid; the resuming trainer always). Inference loads BEST when there is one, else LATEST.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file, save_model

from .files import atomic_path, load_json, save_json
from .fixed import META_KEY, fixed_of, prune_fixed, split_weights, write_fixed
from .loading import LoadError, check_safetensors, readable

_NAME = re.compile(r"(step|best)-(\d{9})(?:-(\d+))?(\.tmp)?")
KIND_OF_POINTER = {"LATEST": "step", "BEST": "best"}


def _order(path: Path) -> tuple[int, int]:
    """(step, repeat) of a checkpoint directory name: later checkpoints sort last."""
    m = _NAME.fullmatch(path.name)
    return int(m.group(2)), int(m.group(3) or 0)


def complete_checkpoints(model_dir: str | Path, kind: str = "step", tmp: bool = False) -> list[Path]:
    """Complete checkpoint directories of `kind` (step | best), oldest first; with tmp=True also
    complete `.tmp` directories (written in full, killed before their rename)."""
    root = Path(model_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if (m := _NAME.fullmatch(p.name)) and m.group(1) == kind
             and (tmp or not m.group(4)) and (p / "state.json").is_file()]
    return sorted(found, key=_order)


def latest_checkpoint(model_dir: str | Path, pointer: str = "LATEST", promote: bool = False) -> Path | None:
    """The newest complete checkpoint of the pointer's kind: the one `pointer` names, or a newer
    complete one (a kill between a checkpoint's rename and its pointer's move leaves the newest
    unnamed), else None. A complete `.tmp` directory (a kill between its state.json and its rename)
    is taken, and renamed into place, when no pointer names a complete checkpoint, or always with
    `promote` (the resuming training process, the directory's only writer: a reader never renames
    what a running trainer is about to)."""
    model_dir = Path(model_dir)
    ptr = model_dir / pointer
    pointed = None
    if ptr.is_file():
        path = pointed_path(model_dir, pointer)
        if (path / "state.json").is_file():
            pointed = path
            if not _NAME.fullmatch(path.name):  # named by hand: trust it
                return pointed
    found = complete_checkpoints(model_dir, KIND_OF_POINTER[pointer], tmp=promote or pointed is None)
    newest = found[-1] if found else None
    if pointed is not None and (newest is None or _order(newest) <= _order(pointed)):
        return pointed
    if newest is None:
        return None
    if newest.name.endswith(".tmp"):  # complete but never renamed: put it in place
        final = newest.with_name(newest.name[:-4])
        if final.exists():
            final = _unused_name(final)
        newest.rename(final)
        newest = final
    return newest


def pointed_path(model_dir: Path, pointer: str) -> Path:
    """What the pointer file names, as a path inside the model folder; LoadError naming the pointer if it
    is not text or names a place outside the folder (a checkpoint is always under MODEL_DIR/checkpoints)."""
    ptr = model_dir / pointer
    try:
        text = readable(ptr, f"a {pointer} pointer").read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:
        raise LoadError(f"{ptr}: not text; expected the name of a checkpoint (checkpoints/step-N)") from None
    path = model_dir / text
    if not text or Path(text).is_absolute() or not path.resolve().is_relative_to(model_dir.resolve()):
        raise LoadError(f"{ptr}: names {text!r}, outside the model folder {model_dir}; expected a checkpoint "
                        "inside it (checkpoints/step-N)")
    return path


def inference_checkpoint(model_dir: str | Path) -> Path | None:
    """The weights to serve: the best validated checkpoint if one was kept, else the latest."""
    return latest_checkpoint(model_dir, "BEST") or latest_checkpoint(model_dir)


def require_inference_checkpoint(model_dir: str | Path) -> Path:
    """inference_checkpoint, or a FileNotFoundError that says the directory holds no trained model."""
    ckpt = inference_checkpoint(model_dir)
    if ckpt is None:
        raise FileNotFoundError(f"{model_dir}: no complete checkpoint (is this a model directory written by "
                                "`superbloom train`?)")
    return ckpt


def holds_model(model_dir: str | Path) -> bool:
    """Does the directory hold (part of) a trained model: a checkpoint pointer or checkpoints?
    (The config files alone, of a run killed before its first checkpoint, hold no trained weights.)"""
    d = Path(model_dir)
    return (d / "LATEST").exists() or (d / "BEST").exists() or (
        (d / "checkpoints").is_dir() and any((d / "checkpoints").iterdir()))


def _unused_name(final: Path) -> Path:
    """`final`, or final-1, final-2, ... : the first name no checkpoint directory has (nor its .tmp)."""
    path, r = final, 0
    while path.exists() or path.with_name(path.name + ".tmp").exists():
        r += 1
        path = final.with_name(f"{final.name}-{r}")
    return path


def save_checkpoint(model_dir: str | Path, step: int, model: torch.nn.Module, optimizer, state: dict,
                    keep: int = 2, kind: str = "step", pointer: str = "LATEST",
                    extra: dict[str, dict[str, torch.Tensor]] | None = None) -> Path:
    """Write a complete checkpoint, then move `pointer` to it, then prune to the newest `keep`.
    `extra` {name: tensors} adds NAME.safetensors files (e.g. the weight average)."""
    model_dir = Path(model_dir)
    root = model_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(f"{kind}-*.tmp"):  # left by a kill: never pointed to by anything
        shutil.rmtree(stale, ignore_errors=True)
    final = _unused_name(root / f"{kind}-{step:09d}")
    tmp = final.with_name(final.name + ".tmp")
    tmp.mkdir()
    weights, fixed = split_weights(model)
    if fixed:  # the term once per folder (fixed.py), the checkpoint names it
        save_file(weights, str(tmp / "model.safetensors"), metadata={META_KEY: write_fixed(model_dir, fixed)})
    else:
        save_model(model, str(tmp / "model.safetensors"))
    if optimizer is not None:
        tensors, meta = _optimizer_state(optimizer)
        save_file(tensors, str(tmp / "optimizer.safetensors"))
        save_json(tmp / "optimizer.json", meta)
    for name, tensors in (extra or {}).items():
        save_file({k: v.detach().contiguous() for k, v in tensors.items()}, str(tmp / f"{name}.safetensors"))
    save_json(tmp / "state.json", state)  # last: marks the directory complete
    tmp.rename(final)
    with atomic_path(model_dir / pointer) as t:
        t.write_text(str(final.relative_to(model_dir)) + "\n")
    pointed = {(model_dir / p.read_text().strip()).name for p in (model_dir / "LATEST", model_dir / "BEST")
               if p.is_file()}
    for p in complete_checkpoints(model_dir, kind)[:-keep]:
        if p.name not in pointed:
            shutil.rmtree(p, ignore_errors=True)
    if fixed:  # a term no checkpoint names any more (a refitted term): gone with its checkpoints
        named = {model_dir / p.read_text().strip() for p in (model_dir / "LATEST", model_dir / "BEST") if p.is_file()}
        kept = complete_checkpoints(model_dir, "step", True) + complete_checkpoints(model_dir, "best", True)
        prune_fixed(model_dir, kept + [p for p in named if (p / "model.safetensors").is_file()])
    return final


def check_checkpoint(ckpt: Path) -> None:
    """The files a resume (or extend) reads from checkpoint `ckpt`, checked before anything is written: its
    weights and optimizer state complete (check_safetensors), the weights float32 and finite
    (check_weights_file), state.json an object with an integer step. LoadError naming the file otherwise."""
    check_safetensors(ckpt / "model.safetensors", "a checkpoint's weights")
    check_weights_file(ckpt / "model.safetensors")
    if (ckpt / "optimizer.safetensors").exists():
        check_safetensors(ckpt / "optimizer.safetensors", "the checkpoint's optimizer state")
    state = ckpt / "state.json"
    try:
        step = load_json(readable(state, "the checkpoint's state")).get("step")
    except (ValueError, AttributeError):
        step = None
    if not isinstance(step, int) or isinstance(step, bool):
        raise LoadError(f"{state}: no integer 'step'; expected the training state superbloom wrote")


def check_weights_file(path: Path) -> None:
    """Every floating tensor of the weights file `path` float32 (what superbloom writes) and finite (a scalar:
    not NaN), read a piece at a time (FINITE_CHUNK elements: rows of a table), without the model: what can
    be checked before one is built. LoadError naming the file and the tensor otherwise."""
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        for name in f.keys():
            piece = f.get_slice(name)
            dtype, shape = piece.get_dtype(), piece.get_shape()
            if dtype in ("F64", "F16", "BF16", "F8_E4M3", "F8_E5M2"):
                raise LoadError(f"{path}: tensor {name!r} is {dtype}; expected float32 weights (superbloom writes "
                                "no other)")
            if dtype != "F32":
                continue
            if len(shape) < 2:  # a scalar is a setting (a hybrid's mix: infinite for the term alone), never NaN
                _refuse_non_finite(path, name, _non_finite(f.get_tensor(name), not shape), int(np.prod(shape)))
                continue
            step = max(1, FINITE_CHUNK // max(1, int(np.prod(shape[1:]))))  # rows of about FINITE_CHUNK values
            bad = sum(_non_finite(piece[start:start + step]) for start in range(0, shape[0], step))
            _refuse_non_finite(path, name, bad, int(np.prod(shape)))


def load_extra(ckpt: Path, name: str) -> dict[str, torch.Tensor] | None:
    """The tensors of NAME.safetensors in a checkpoint, or None if it has none."""
    path = ckpt / f"{name}.safetensors"
    return load_file(str(path)) if path.exists() else None


def load_weights(model: torch.nn.Module, ckpt: Path) -> None:
    """Weights of checkpoint `ckpt` into `model`, onto the device the model is on, with the fixed
    weights it names (fixed.py) in the same state dict."""
    device = str(next(model.parameters()).device)
    path = Path(ckpt) / "model.safetensors"
    check_safetensors(path, "a checkpoint's weights")
    check_shapes(model, path)
    state = load_file(str(path), device=device)
    state.update(fixed_of(Path(ckpt), device))
    fit_state(model, state, ckpt)


def fit_state(model: torch.nn.Module, state: dict[str, torch.Tensor], ckpt: Path, assign: bool = False) -> None:
    """state into model (strict, but a tied weight's second name may be missing), else LoadError; each
    tensor's dtype (a parameter's shape too) and finite values checked before load_state_dict copies or
    assigns it (check_state)."""
    check_state(model, state, ckpt)
    missing, unexpected = model.load_state_dict(state, strict=False, assign=assign)
    if unexpected or [k for k in missing if not _is_tied(model, k)]:
        raise LoadError(f"{ckpt}: weights do not fit the model (missing {missing}, unexpected {unexpected})")


def _dtype(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _mismatch(got, want, parameter: bool) -> bool:
    """A saved dtype that does not fit: a parameter's must be the model's (float32; with assign=True a
    float64 table would stay float64); a buffer's of the same sort (floating, integer or bool: older
    folders stored some index buffers narrower, which load_state_dict widens)."""
    if got is None:
        return True
    if parameter:
        return got != want
    sort = lambda d: "bool" if d == torch.bool else "float" if d.is_floating_point else "int"  # noqa: E731
    return sort(got) != sort(want)


def check_state(model: torch.nn.Module, state: dict[str, torch.Tensor], where) -> None:
    """The tensors of `state` that the model has (missing or unexpected names are load_state_dict's report):
    each of the model's dtype (with assign=True a float64 table would stay float64), a parameter of its
    shape, every floating parameter finite and no buffer NaN (check_finite). LoadError naming `where` and
    the tensor otherwise."""
    params = dict(model.named_parameters())
    expected = {**dict(model.named_buffers()), **params}
    for name, t in state.items():
        want = expected.get(name)
        if want is None:
            continue
        if _mismatch(t.dtype, want.dtype, name in params):
            raise LoadError(f"{where}: tensor {name!r} is {_dtype(t.dtype)}; the model of this folder's config.json "
                            f"expects {_dtype(want.dtype)}")
        if name in params and tuple(t.shape) != tuple(want.shape):
            raise LoadError(f"{where}: tensor {name!r} has shape {list(t.shape)}; the model of this folder's "
                            f"config.json expects {list(want.shape)} (a checkpoint of another model?)")
    check_finite(state, where, frozenset(n for n in state if n in expected and n not in params))


FINITE_CHUNK = 1 << 22  # elements checked at once: a bounded temporary, whatever the tensor's size


def check_finite(state: dict[str, torch.Tensor], where, settings: frozenset[str] = frozenset()) -> None:
    """Every floating tensor of `state` finite, else LoadError naming `where`, the tensor and how many of
    its values are NaN or infinite (such weights make every score NaN: no ranking could be trusted). The
    tensors named in `settings` (buffers, not weights: a hybrid head's mix is infinite for "the term
    alone") may be infinite, never NaN. One pass over the weights, FINITE_CHUNK elements at a time."""
    for name, t in state.items():
        if t.is_floating_point():
            _refuse_non_finite(where, name, _non_finite(t, name in settings), t.numel())


def _non_finite(t: torch.Tensor, allow_inf: bool = False) -> int:
    """How many values of `t` are NaN or infinite (allow_inf: NaN), FINITE_CHUNK at a time (a bounded
    temporary)."""
    flat = t.detach().reshape(-1)
    bad = 0
    for start in range(0, flat.numel(), FINITE_CHUNK):
        piece = flat[start:start + FINITE_CHUNK]
        ok = ~torch.isnan(piece) if allow_inf else torch.isfinite(piece)
        if not bool(ok.all()):
            bad += int((~ok).sum())
    return bad


def _refuse_non_finite(where, name: str, bad: int, n: int) -> None:
    if bad:
        raise LoadError(f"{where}: tensor {name!r} holds {bad:,} non-finite values (NaN or inf) of {n:,}; expected "
                        "finite weights (a diverged run's checkpoint? resume from an earlier one, or train again)")


def check_shapes(model: torch.nn.Module, path: Path) -> None:
    """Every tensor of the weights file `path` that the model has must have its dtype (a parameter: its
    shape too), read from the file's header before any tensor is (a checkpoint of another model, e.g. a
    BEST pointer edited to another run's, or a file written by hand): LoadError naming the first that does
    not. A header safetensors cannot read is a LoadError too."""
    from safetensors import safe_open

    params = dict(model.named_parameters())  # buffers may be sized by what they load (a hybrid head's term)
    expected = {**dict(model.named_buffers()), **params}
    try:
        with safe_open(str(path), "pt") as f:
            for name in f.keys():
                if name not in expected:
                    continue
                piece = f.get_slice(name)
                dtype, want = piece.get_dtype(), expected[name].dtype
                if _mismatch(_TORCH_DTYPE.get(dtype), want, name in params):
                    raise LoadError(f"{path}: tensor {name!r} is {dtype}; the model of this folder's config.json "
                                    f"expects {_dtype(want)}")
                shape = tuple(piece.get_shape())
                if name in params and shape != tuple(params[name].shape):
                    raise LoadError(f"{path}: tensor {name!r} has shape {list(shape)}; the model of this folder's "
                                    f"config.json expects {list(params[name].shape)} (a checkpoint of another "
                                    "model?)")
    except LoadError:
        raise
    except Exception as e:  # safetensors' own SafetensorError (a header it cannot parse), OSError
        raise LoadError(f"{path}: not a safetensors file superbloom can read ({str(e).splitlines()[0][:160]}); "
                        "expected a checkpoint's weights") from None


_TORCH_DTYPE = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
                "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
                "BOOL": torch.bool}  # safetensors' dtype names


def _is_tied(model, name: str) -> bool:
    """safetensors stores a shared tensor once; its other names are reported missing."""
    params = dict(model.named_parameters(remove_duplicate=False))
    return name in params and any(params[name] is p for n, p in params.items() if n != name)


def load_optimizer(optimizer, ckpt: Path) -> None:
    """Optimizer state of `ckpt` (torch moves each state tensor to its parameter's device)."""
    readable(ckpt / "optimizer.json", "the checkpoint's optimizer settings")
    try:
        meta = load_json(ckpt / "optimizer.json")
        if not isinstance(meta.get("scalars"), dict) or not isinstance(meta.get("param_groups"), list):
            raise ValueError("no 'scalars' / 'param_groups'")
    except (ValueError, AttributeError) as e:
        raise LoadError(f"{ckpt / 'optimizer.json'}: {e}; expected the optimizer state superbloom wrote") from None
    check_safetensors(ckpt / "optimizer.safetensors", "the checkpoint's optimizer state")
    tensors = load_file(str(ckpt / "optimizer.safetensors"))
    state: dict = {}
    for key, value in list(tensors.items()) + list(meta["scalars"].items()):
        idx, name = key.split(".", 1)
        state.setdefault(int(idx), {})[name] = value
    kernels = [{k: g[k] for k in ("fused", "foreach") if k in g} for g in optimizer.param_groups]
    optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
    for g, k in zip(optimizer.param_groups, kernels):  # the kernel is this run's choice (optim.use_fused)
        g.update(k)


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
