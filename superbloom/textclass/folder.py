"""A text classifier's model directory: save_classifier writes it, load_classifier rebuilds the model.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Sequence

from safetensors.torch import load_file, save_file

from ..model.device import resolve_device
from ..storage.files import atomic_path, read_lines, save_json, write_lines
from ..storage.loading import check_safetensors, expect_kind, read_config, typed_section
from .config import TextClassConfig
from .model import TextClassifier


# ------------------------------------------------------------------------------ model directories
#
#   DIR/config.json        "textclass" (TextClassConfig), "labels" (class names), plus what the trainer adds
#   DIR/model.safetensors  the weights
#   DIR/vocab.txt          the table embedding's words, row 1 first (absent for the dynamic embedding)


def save_classifier(model: TextClassifier, out: str | Path, label_names: Sequence[str], extra: dict | None = None,
                    weights: bool = True) -> Path:
    """Write a model directory that `load_classifier` rebuilds the model from (weights=False: its
    config files only, as a run starts)."""
    if len(label_names) != model.n_classes:
        raise ValueError(f"{len(label_names)} label names for a model of {model.n_classes} classes")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if weights:
        with atomic_path(out / "model.safetensors") as tmp:  # a kill never leaves half the weights
            save_file({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}, str(tmp))
    if model.cfg.embedding == "table":
        write_lines(out / "vocab.txt", model.vocab)
    own = {"textclass": asdict(model.cfg), "labels": list(label_names), "parameters": model.n_parameters}
    save_json(out / "config.json", {**own, **{k: v for k, v in (extra or {}).items() if k not in own}})
    return out


def load_classifier(model_dir: str | Path, device: str = "cpu") -> tuple[TextClassifier, list[str], dict]:
    """A directory of `save_classifier` -> (model in eval mode on `device`, class names, its config.json)."""
    model_dir = expect_kind(model_dir, "text-classifier")  # the complete one a kill during its swap left, if need be
    if not (model_dir / "config.json").is_file() or not (model_dir / "model.safetensors").is_file():
        raise FileNotFoundError(f"{model_dir}: not a text classifier directory (needs config.json and "
                                "model.safetensors, written by `superbloom textclass-train`)")
    config = read_config(model_dir, {})
    if "textclass" not in config:
        raise ValueError(f"{model_dir}/config.json has no 'textclass' section: not a text classifier")
    config = read_config(model_dir, {"textclass": dict, "labels": list})
    check_safetensors(model_dir / "model.safetensors", "the classifier's weights")
    cfg = typed_section(model_dir / "config.json", config, "textclass", TextClassConfig)
    vocab = read_lines(model_dir / "vocab.txt") if cfg.embedding == "table" else ()
    model = TextClassifier(cfg, len(config["labels"]), vocab=vocab)
    model.load_state_dict(load_file(str(model_dir / "model.safetensors")))
    return model.eval().to(resolve_device(device)), list(config["labels"]), config
