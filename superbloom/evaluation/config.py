"""The evaluation settings without torch: EvalConfig and the names of the protocols and baselines.

The command line shows their defaults and choices without importing torch (every `--help` starts
fast); evaluate.py uses them and re-exports them. The names stand for registries whose entries are
torch code: protocols.REGISTRY (PROTOCOLS is "auto" and its names) and baselines.BASELINES
(tests/test_cli_flags.py checks that each names list equals its registry's keys).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import _bounds as check
from .._settings import setting
from ..heads.decode_config import DecodeConfig

PROTOCOLS = ("auto", "sets", "leave-one-out", "text")  # text: masked tokens in place (evaluation/text_protocol.py)
BASELINE_NAMES = ("popularity", "cooccurrence", "ease", "puresvd", "cooc-count", "cooc-idf", "cooc-cosine", "item2vec",
                  "item2vec-untuned", "als", "als-untuned", "transition", "ease-term", "cooc-term", "local-ease", "sansa")  # baselines.BASELINES

# the baselines whose package is an optional extra (the [baselines] extra; sansa: its own [sansa] extra,
# which needs SuiteSparse): name -> the modules it imports
BASELINE_EXTRAS = {"item2vec": ("gensim",), "als": ("implicit",), "item2vec-untuned": ("gensim",),
                   "als-untuned": ("implicit",), "sansa": ("sansa", "sksparse")}


def require_baselines(names) -> None:
    """MissingExtra, before any work, for the first of `names` whose package is not installed: one line
    naming the extra and how to install it (evaluate and compare call it first; so does the CLI)."""
    from .._extras import require_extra

    for name in names:
        if name == "sansa":
            from .sansa import require_sansa  # numpy only: its message names the apt and pip commands
            require_sansa()
        elif name in BASELINE_EXTRAS:
            require_extra("baselines", f"the {name} baseline (--baselines {name})", BASELINE_EXTRAS[name])


@dataclass(frozen=True)
class EvalConfig:
    seed: int = setting(0, range=(0, None), help="example sampling seed")
    n: int = setting(32, cli=False, help="segment length (the paper's 32)")
    targets_per_set: int = setting(1, range=(1, None), help="held-out ids per set, each its own example")
    depth: int = setting(20, range=(1, None), help="ids retrieved per example (MRR is truncated here)")
    decode: DecodeConfig = DecodeConfig()
    baselines: tuple[str, ...] = setting(("popularity", "cooccurrence"), cli=False,
                                         help="the baselines ranked on the same examples (baselines.BASELINES)")
    batch_size: int = setting(256, range=(1, 1 << 24), help="queries per model call")
    max_sets: int = setting(0, range=(0, None), help="use at most N held-out sets / users, 0: all")
    protocol: str = setting("auto", choices=PROTOCOLS, help=(
        "sets: the paper's held-out sets; leave-one-out: each user's last id (test) or the one before (valid) "
        "ranked against all ids from the history before it; text: 15% of the tokens of test rows masked in place "
        "(--max-sets rows, 0: 2000), unigram and bigram-context baselines; auto: the dataset's split, text for a "
        "prepare-text dataset"))
    split: str = setting("test", flag="holdout", choices=("valid", "test"), help=(
        "leave-one-out: which held-out targets (validation picks a checkpoint; test is touched once)"))
    context_len: int = setting(50, range=(1, None), help=(
        "leave-one-out: the most recent history ids in the context, in order (at most the model's --positions - 1)"))
    exclude_history: bool = setting(True, help=(
        "leave-one-out: never rank an id of the user's history; --no-exclude-history: rank every id"))
    cooc_last: int = setting(1, range=(0, None), help=(
        "leave-one-out: the co-occurrence baseline scores from the last N context ids, 0: all"))

    def __post_init__(self):
        """Each field checked (ArgumentError naming it); depth beyond the ids is clamped by evaluate."""
        for name in ("seed", "max_sets", "cooc_last"):
            check.integer(name, getattr(self, name), 0)
        for name in ("n", "targets_per_set", "depth", "batch_size", "context_len"):
            check.integer(name, getattr(self, name), 1)
        check.instance("decode", self.decode, DecodeConfig, "a superbloom.DecodeConfig")
        if isinstance(self.baselines, str) or not all(isinstance(b, str) for b in self.baselines):
            raise check.ArgumentError("baselines", f"expected a tuple of baseline names ({', '.join(BASELINE_NAMES)})"
                                                   f", got {check.shown(self.baselines)}")
        check.one_of("protocol", self.protocol, PROTOCOLS)
        check.one_of("split", self.split, ("valid", "test"))
        check.flag("exclude_history", self.exclude_history)
