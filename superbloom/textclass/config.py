"""The text classifier's settings without torch: TextClassConfig, TrainTextConfig, TextClassRunConfig.

The command line shows their defaults and choices without importing torch (every `--help` starts
fast); model.py uses them and re-exports them.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ..model.config import ATTENTION_NAMES
from ..training.config import OptimConfig

EMBEDDINGS = ("dynamic", "table")


@dataclass(frozen=True)
class TextClassConfig:
    d: int = 100  # embedding size (the blog's 100)
    heads: int = 10  # attention heads; must divide d (no parameters depend on it)
    attention: str = "kernel-auto"  # the blog's kernel (kernel_attention.py; -auto: its cheaper form) | softmax
    embedding: str = "dynamic"  # dynamic (64 * d parameters) | table ((V + 1) * d)
    smoothing: float = 0.1  # label smoothing of the loss
    dropout: float = 0.0  # on the input embeddings (the blog: none)

    def __post_init__(self):
        if self.d < 1 or self.heads < 1:
            raise ValueError(f"d and heads must be >= 1, got d={self.d}, heads={self.heads}")
        if self.d % self.heads:
            divisors = [h for h in range(1, self.d + 1) if self.d % h == 0]
            raise ValueError(f"heads={self.heads} must divide d={self.d} (heads split d into equal subspaces; "
                             f"choose one of {divisors})")
        if self.attention not in ATTENTION_NAMES:
            raise ValueError(f"attention must be one of {sorted(ATTENTION_NAMES)}, got {self.attention!r}")
        if self.embedding not in EMBEDDINGS:
            raise ValueError(f"embedding must be one of {EMBEDDINGS}, got {self.embedding!r}")
        if not 0.0 <= self.smoothing < 1.0 or not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"smoothing and dropout must be in [0, 1), got {self.smoothing}, {self.dropout}")


@dataclass(frozen=True)
class TrainTextConfig:
    epochs: int = 5
    batch_size: int = 32
    seed: int = 0
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(name="adapsgd"))  # clip 1, no lr
    steps: int = 0  # > 0: stop after this many steps, if the epochs have not ended before
    device: str = "cpu"  # cpu | cuda | cuda:N | auto (device.py); the blog's small model trains on the CPU

    def __post_init__(self):
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(f"epochs and batch_size must be >= 1, got {self.epochs}, {self.batch_size}")


@dataclass(frozen=True)
class TextClassRunConfig:
    """A run of `textclass-train`: the documents, the model, the training, the model directory."""
    out: str  # model directory to write
    corpus: tuple[str, ...] = ()  # directories / tars of .txt files, or text files (one file = one document)
    labels: str = ""  # two columns per line: document name, label (with corpus)
    wikispeedia: str = ""  # instead of corpus and labels: the Wikispeedia directory
    model: TextClassConfig = field(default_factory=TextClassConfig)
    train: TrainTextConfig = field(default_factory=TrainTextConfig)
    max_words: int = 256  # words read per document
    test_fraction: float = 0.1  # documents held out (seeded by train.seed), scored after every epoch
    checkpoint_every: float = 60.0  # seconds between checkpoints
    keep_best: bool = True  # keep the checkpoint with the best held-out accuracy as BEST too

    def __post_init__(self):
        object.__setattr__(self, "corpus", tuple(str(c) for c in self.corpus))
        if bool(self.wikispeedia) == bool(self.corpus or self.labels):
            raise ValueError("give either CORPUS... with --labels FILE, or --wikispeedia DIR")
        if self.corpus and not self.labels:
            raise ValueError("CORPUS needs --labels FILE (document name<TAB>label)")
        if self.max_words < 1 or not 0.0 <= self.test_fraction < 1.0:
            raise ValueError(f"max_words must be >= 1 and test_fraction in [0, 1), got {self.max_words}, "
                             f"{self.test_fraction}")

    def to_dict(self) -> dict:
        return json.loads(json.dumps(asdict(self), default=str))
