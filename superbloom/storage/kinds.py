"""What a model directory holds: its kind (config.json's "kind"), read, or inferred for older directories.

    kind = read_kind("runs/wiki/model")        # -> KINDS["set-model"]: what it is, its trainer, its commands

Every trainer records its kind in config.json ("kind"); a directory written before kinds existed is
read from its sections (infer_kind): "embed" is a set embedding (embed-train), "textclass" a text
classifier (textclass-train), and train()'s directories are a text, sequence or set model by their
data summary (prepare-text's "text", prepare's "split"). `superbloom.load` picks its loader by kind,
and the model card (training/card.py) names it; the loaders check the kind they need with
storage/loading.expect_kind.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .loading import read_json_object  # a broken config.json: one line naming it


@dataclass(frozen=True)
class Kind:
    name: str  # config.json's "kind"
    what: str  # for people: "a set model (...)"
    trainer: str  # the command that writes it
    use: str  # the commands that read it


_ID_USE = "superbloom predict / eval / serve / expand / similar-ids / vectors MODEL"
KINDS = {k.name: k for k in (
    Kind("set-model", "a set model (a context of ids -> the ids that complete the set)", "superbloom train", _ID_USE),
    Kind("sequence-model", "a sequence model (a history of ids -> the next ids)",
         "superbloom train (on prepare --split leave-one-out data)", _ID_USE),
    Kind("text-model", "a text model (masked tokens of prepare-text data)",
         "superbloom train --objective text-mlm", "superbloom fill / eval / serve MODEL"),
    Kind("ensemble", "an ensemble (id models of one dataset ranked as one)", "superbloom train --members K", _ID_USE),
    Kind("set-embedding", "a set embedding (one vector per set, its training sets indexed)", "superbloom embed-train",
         "superbloom similar / classify / embed MODEL, or superbloom serve ID_MODEL --embed MODEL"),
    Kind("text-classifier", "a text classifier (words -> one attention layer -> a class)",
         "superbloom textclass-train", "superbloom textclass MODEL \"some text\""),
)}
ID_MODELS = ("set-model", "sequence-model", "text-model", "ensemble")  # train()'s kinds: sb.Predictor loads them


def id_model_kind(data: dict) -> str:
    """The kind of a train() model from its dataset's summary (meta.json, config.json's "data")."""
    if "text" in data:  # prepare-text's settings
        return "text-model"
    return "sequence-model" if data.get("split") == "leave-one-out" else "set-model"


def infer_kind(config: dict, where: str = "config.json") -> str:
    """config.json -> its kind: the "kind" it records, else (a directory written before kinds) read
    from its sections. Neither is a ValueError naming `where`."""
    kind = config.get("kind")
    if kind is not None:
        if kind not in KINDS:
            raise ValueError(f"{where}: unknown \"kind\" {kind!r} (expected one of {', '.join(KINDS)}; "
                             "written by a newer superbloom?)")
        return kind
    if "members" in config and "head" not in config:  # training/members.py
        return "ensemble"
    if "embed" in config:
        return "set-embedding"
    if "textclass" in config:
        return "text-classifier"
    if "head" in config and "model" in config:
        return id_model_kind(config.get("data") or {})
    raise ValueError(f"{where}: not a model's config (no \"kind\", and none of the sections \"head\", \"embed\", "
                     "\"textclass\" a trainer writes)")


def read_kind(model_dir: str | Path) -> Kind:
    """The kind of the model in `model_dir` (its config.json)."""
    path = Path(model_dir) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{model_dir}: not a model directory (no config.json; superbloom train, "
                                "embed-train or textclass-train writes one)")
    return KINDS[infer_kind(read_json_object(path, "the model's settings"), str(path))]
