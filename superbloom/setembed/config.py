"""The set embedding's settings without torch: EmbedConfig, EmbedTrainConfig and the names they allow.

The command line shows their defaults and choices without importing torch (every `--help` starts
fast); model.py, train.py and embedder.py use them and re-export them.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from .._settings import setting

from ..hashing.config import HashConfig
from ..model.config import ModelConfig
from ..training.config import LoopConfig, OptimConfig

OBJECTIVES = ("uniformity", "nca", "softmax")
SUPERVISED = ("nca", "softmax")
METHODS = ("auto", "knn", "head")  # how classify decides (auto: the softmax head where there is one, else knn)


@dataclass(frozen=True)
class EmbedConfig:
    """What the set vector is trained for, and how sets are cut (saved in config.json's "embed")."""
    objective: str = setting("uniformity", choices=OBJECTIVES, help=(
        "what the vector is trained for: uniformity (alignment + uniformity of two halves of a set; no labels), "
        "nca (neighbourhood component analysis with a memory bank; needs --labels) or softmax (a label-smoothed "
        "classifier head; needs --labels)"))
    segment: int = setting(32, range=(2, 1 << 20), help="ids per training example: a random run of the set")
    pool_heads: int = setting(4, range=(1, 4096), help="heads of the attention pool")
    uniformity_t: float = setting(2.0, range=(0.0, 1e4), lo_open=True, help=(
        "uniformity: t in log mean exp(-t d^2) (Wang & Isola: 2; the blog: 2 or 3)"))
    uniformity_weight: float = setting(1.0, range=(0.0, 1e6), help="uniformity: its weight next to alignment")
    temperature: float = setting(0.05, range=(0.0, 1e6), lo_open=True, help="nca: cosine / temperature "
                                 "(Wu et al. 2018)")
    momentum: float = setting(0.5, range=(0.0, 0.999999), what="a fraction in [0, 1)",
                              help="nca: memory bank momentum (Wu et al. 2018)")
    smoothing: float = setting(0.1, range=(0.0, 0.999999), what="a fraction in [0, 1)",
                               help="softmax: label smoothing (the blog's 0.1)")
    logit_scale: float = setting(10.0, range=(0.0, 1e4), lo_open=True,
                                 help="softmax: logits = scale x classifier(unit vector)")
    max_len: int = setting(256, range=(2, 1 << 20), help="inference: a longer set is the mean of chunks of at "
                           "most this many ids")

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        if self.segment < 2:
            raise ValueError(f"segment must be >= 2 ids (two views of >= 1 id), got {self.segment}")
        if self.max_len < 1 or self.pool_heads < 1:
            raise ValueError(f"max_len and pool_heads must be >= 1, got {self.max_len}, {self.pool_heads}")
        for name in ("uniformity_t", "temperature", "logit_scale"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if not 0.0 <= self.momentum < 1.0 or not 0.0 <= self.smoothing < 1.0:
            raise ValueError(f"momentum and smoothing must be in [0, 1), got {self.momentum}, {self.smoothing}")
        if self.uniformity_weight < 0:
            raise ValueError(f"uniformity_weight must be >= 0, got {self.uniformity_weight}")

    @property
    def supervised(self) -> bool:
        return self.objective in SUPERVISED


@dataclass(frozen=True)
class EmbedTrainConfig:
    data: str = setting(help="prepared dataset directory (superbloom prepare)")
    out: str = setting(help="model directory to write")
    labels: str = setting("", metavar="FILE", help="two columns per line, set key and label (several lines for "
                          "several labels); needed by nca and softmax, used for validation by uniformity")
    embed: EmbedConfig = field(default_factory=EmbedConfig)
    hash: HashConfig = field(default_factory=HashConfig)
    model: ModelConfig = field(default_factory=lambda: ModelConfig(d=64, heads=4, d_ff=128, layers=1))
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=1e-3, warmup=100, weight_decay=0.01))
    loop: LoopConfig = field(default_factory=lambda: LoopConfig(steps=1000, eval_every=250))
    val_fraction: float = setting(0.1, range=(0.0, 0.999999), what="a fraction in [0, 1)",
                                  help="training sets held out for validation, at most 2000")

    def __post_init__(self):
        if self.embed.supervised and not self.labels:
            raise ValueError(f"the {self.embed.objective} objective learns from labels: give a labels file "
                             "(--labels FILE: one 'set key<TAB>label' per line)")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in [0, 1), got {self.val_fraction}")

    def to_dict(self) -> dict:
        return json.loads(json.dumps(asdict(self), default=str))

    @classmethod
    def from_dict(cls, t: dict) -> "EmbedTrainConfig":
        return cls(data=t["data"], out=t["out"], labels=t.get("labels", ""), embed=EmbedConfig(**t["embed"]),
                   hash=HashConfig(**t["hash"]), model=ModelConfig.from_dict(t["model"]),
                   optim=OptimConfig(**t["optim"]), loop=LoopConfig.from_dict(t["loop"]), val_fraction=t["val_fraction"])
