"""The text classifier's settings without torch: TextClassConfig, TrainTextConfig, TextClassRunConfig.

The command line shows their defaults and choices without importing torch (every `--help` starts
fast); model.py uses them and re-exports them.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from .._settings import setting
from ..model.config import ATTENTION_NAMES
from ..training.config import OptimConfig

EMBEDDINGS = ("dynamic", "table")


@dataclass(frozen=True)
class TextClassConfig:
    d: int = setting(100, range=(1, 65_536), help="embedding size (the blog's 100)")
    heads: int = setting(10, range=(1, 4096), help="attention heads, must divide --d (no parameters depend on it)")
    attention: str = setting("kernel-auto", choices=ATTENTION_NAMES, help=(
        "kernel: the blog's kernelized attention (linear form); kernel-auto: the same kernel in its cheaper form "
        "for the document length; softmax"))
    embedding: str = setting("dynamic", choices=EMBEDDINGS, help="dynamic (MD5 trits, 64 x d parameters) or a "
                             "table over the training words ((V + 1) x d)")
    smoothing: float = setting(0.1, range=(0.0, 0.999999), what="a fraction in [0, 1)", help="label smoothing")
    dropout: float = setting(0.0, range=(0.0, 0.999999), what="a fraction in [0, 1)",
                             help="dropout on the input embeddings (the blog: none)")

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
    epochs: int = setting(5, range=(1, 1_000_000), help="passes over the training documents")
    batch_size: int = setting(32, range=(1, 1 << 24), help="documents per step")
    seed: int = setting(0, range=(0, None), help="split, initial weights, batches")
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(name="adapsgd"))  # clip 1, no lr
    steps: int = setting(0, range=(0, None), help="stop after N steps if --epochs has not ended before, 0: no limit")
    device: str = setting("cpu", help="auto, cpu, cuda or cuda:N (the blog's small model trains on the CPU)")

    def __post_init__(self):
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(f"epochs and batch_size must be >= 1, got {self.epochs}, {self.batch_size}")


@dataclass(frozen=True)
class TextClassRunConfig:
    """A run of `textclass-train`: the documents, the model, the training, the model directory."""
    out: str = setting(help="model directory to write")
    corpus: tuple[str, ...] = ()  # directories / tars of .txt files, or text files (one file = one document)
    labels: str = setting("", metavar="FILE", help="two columns per line: document name (file name without .txt) "
                          "and label")
    wikispeedia: str = setting("", metavar="DIR", help=(
        "instead of CORPUS and --labels: the Wikispeedia directory (plaintext_articles.tar.xz, categories.tsv); "
        "label = the first listed top-level category, the header naming it is cut"))
    model: TextClassConfig = field(default_factory=TextClassConfig)
    train: TrainTextConfig = field(default_factory=TrainTextConfig)
    max_words: int = setting(256, range=(2, 1 << 20), help="words read per document")
    test_fraction: float = setting(0.1, range=(0.0, 0.999999), what="a fraction in [0, 1)",
                                   help="documents held out (seeded by --seed), scored after every epoch")
    checkpoint_every: float = setting(60.0, cli=False, help="seconds between checkpoints")
    keep_best: bool = setting(True, cli=False, help="keep the checkpoint with the best held-out accuracy as BEST too")

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
