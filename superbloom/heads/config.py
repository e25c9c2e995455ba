"""The output heads' settings without torch: each head's config, and the configs by head name.

Each head has its own small frozen config (saved in config.json as {"name": ..., its fields});
HEAD_CONFIGS maps a head's name to it, and head_config / head_settings / head_config_dict /
head_config_from_dict build, list and (de)serialise them. The command line shows their defaults and
choices without importing torch (every `--help` starts fast); the head modules (superbloom.py,
full.py, ...) and registry.py (HEADS: name -> (config class, head class)) use them and re-export them.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Union

from .._bounds import bad
from .._settings import setting

PROPOSALS = ("uniform", "unigram", "log_uniform")
TREES = ("balanced", "huffman", "fano")
MIXES = (0.0, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)  # the hybrids' term weights tried at validation
TERMS = ("auto", "ease", "local-ease", "cooccurrence", "transition", "bigram")  # heads/terms.py; bigram: the hashed hybrid only
WEIGHTINGS = ("cosine", "count", "idf")  # the hashed hybrid's co-occurrence weightings (below)

_SMOOTHING = dict(range=(0.0, 0.999999), what="a fraction in [0, 1)", help="label smoothing over the classes of each softmax")
_TERM = dict(flag="item-term", choices=TERMS, help=(
    "the item-item weights (heads/terms.py): ease (EASE's closed form, dense: up to 60,000 ids, float32 above 25,000), "
    "local-ease (EASE on each id's 32 most co-occurring ids: sparse, any size), cooccurrence (cosine), transition (directed: "
    "log(1 + how often an id follows another in the training sequences)), bigram (text, hashed-hybrid only: "
    "p(w | left neighbour) + p(w | right neighbour) of the blank, entering as log(1 + term / eps), eps chosen at "
    "validation), auto = ease up to 60,000 ids, else local-ease; with a sequence objective auto builds "
    "transition too and the validation chooses"))
_NEIGHBOURS = dict(range=(1, None), help="item-item values per id (EASE: its largest; cosine: its most frequent "
                   "co-occurring ids)")
_WINDOW = dict(flag="transition-window", range=(1, None), help="--item-term transition: an id counts as following "
               "another up to this many ids later")
_GAP_DECAY = dict(range=(0.0, 1.0), lo_open=True, what="a number in (0, 1]",
                  help="--item-term transition: a pair g ids apart counts gap_decay ** (g - 1)")


TOKEN_PROPOSALS = ("uniform", "unigram")  # the superbloom head's sampled tokens: numbers of no frequency order


@dataclass(frozen=True)
class SuperbloomConfig:
    name: ClassVar[str] = "superbloom"
    extendable: ClassVar[bool] = True  # new ids join by their tokens alone (training/extend.py): no row per id
    per_hash_softmax: bool = setting(False, help="softmax j over map j's tokens only")
    label_smoothing: float = setting(0.0, **_SMOOTHING)
    samples: int = setting(0, range=(0, None), help="a sampled softmax over this many hashed tokens a step "
                           "(0: the full softmax over the tokens)")
    proposal: str = setting("unigram", choices=TOKEN_PROPOSALS, help="with --samples: uniform or unigram (the "
                            "tokens' training counts + 1) over the hashed tokens, whose numbers carry no frequency order")

    def __post_init__(self):
        if not 0.0 <= self.label_smoothing < 1.0:
            raise bad("label_smoothing", f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.samples < 0:
            raise bad("samples", f"samples must be >= 0 (0: the full softmax over the tokens), got {self.samples}")
        if self.proposal not in TOKEN_PROPOSALS:
            raise bad("proposal", f"proposal {self.proposal!r}: the {self.name} head draws hashed tokens, whose "
                                  f"numbers carry no frequency order; choose one of {TOKEN_PROPOSALS}")
        if self.samples and (self.label_smoothing or self.per_hash_softmax):
            raise bad("samples", "samples > 0 trains with a sampled softmax over every token: label_smoothing and "
                                 "per_hash_softmax apply to the full softmax only (samples 0)")


@dataclass(frozen=True)
class FullConfig:
    name: ClassVar[str] = "full"
    extendable: ClassVar[bool] = False  # one output row per id
    label_smoothing: float = setting(0.0, **_SMOOTHING)

    def __post_init__(self):
        if not 0.0 <= self.label_smoothing < 1.0:
            raise bad("label_smoothing", f"label_smoothing must be in [0, 1), got {self.label_smoothing}")


@dataclass(frozen=True)
class SampledConfig:
    name: ClassVar[str] = "sampled"
    extendable: ClassVar[bool] = False
    samples: int = setting(1024, range=(1, None), help="ids drawn per training step, shared by the batch")
    proposal: str = setting("log_uniform", choices=PROPOSALS, help="where the sampled negatives are drawn from")

    def __post_init__(self):
        if self.samples < 1:
            raise bad("samples", f"samples must be >= 1, got {self.samples}")
        if self.proposal not in PROPOSALS:
            raise bad("proposal", f"proposal must be one of {PROPOSALS}, got {self.proposal!r}")


@dataclass(frozen=True)
class HierarchicalConfig:
    name: ClassVar[str] = "hierarchical"
    extendable: ClassVar[bool] = False  # a leaf per id
    tree: str = setting("huffman", choices=TREES, help="the tree, built from the training counts")

    def __post_init__(self):
        if self.tree not in TREES:
            raise bad("tree", f"tree must be one of {TREES}, got {self.tree!r}")


@dataclass(frozen=True)
class HybridConfig:
    name: ClassVar[str] = "hybrid"
    extendable: ClassVar[bool] = False
    neighbours: int = setting(200, **_NEIGHBOURS)
    term: str = setting("auto", **_TERM)
    window: int = setting(10, **_WINDOW)
    gap_decay: float = setting(0.8, **_GAP_DECAY)
    label_smoothing: float = setting(0.0, **_SMOOTHING)
    samples: int = setting(0, range=(0, None), help="train the network with this many sampled negatives per step "
                           "instead of the full softmax (0)")
    proposal: str = setting("log_uniform", choices=PROPOSALS, help="with --samples: where the sampled negatives are "
                            "drawn from")
    mix: float | None = setting(None, flag="item-mix", range=(0.0, None), shown="chosen", help=(
        "fix the item-item term's weight instead of choosing it at every validation from "
        f"{', '.join(f'{m:g}' for m in MIXES)}; 0 = the network alone (BEST is the network's own best checkpoint)"))

    def __post_init__(self):
        if self.mix is not None and not 0.0 <= self.mix < float("inf"):
            raise bad("mix", f"mix must be a finite weight >= 0 (or None: chosen on validation), got {self.mix}")
        if self.samples < 0:
            raise bad("samples", f"samples must be >= 0 (0: full softmax), got {self.samples}")
        if self.proposal not in PROPOSALS:
            raise bad("proposal", f"proposal must be one of {PROPOSALS}, got {self.proposal!r}")
        if self.proposal != "log_uniform" and not self.samples:
            raise ValueError(f"proposal {self.proposal!r} is where sampled negatives are drawn from; the hybrid's "
                             "network trains with the full softmax unless samples > 0 (--samples)")
        if self.samples and self.label_smoothing:
            raise ValueError("label_smoothing applies to the full softmax only (samples 0)")
        check_term_settings(self)
        if self.term == "bigram":
            raise ValueError("the bigram term (text) is the hashed-hybrid head's: use --head hashed-hybrid")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise bad("label_smoothing", f"label_smoothing must be in [0, 1), got {self.label_smoothing}")


# the recency weights of a hybrid's item-item term (decay ** age) the sequence objectives' validation tries,
# and the `transition` baseline chooses from on the validation targets (evaluation/protocols.py)
DECAYS = (1.0, 0.7, 0.4, 0.15)


def check_term_settings(cfg) -> None:
    """The item-item term's settings of a hybrid config (HybridConfig, HashedHybridConfig), checked alike."""
    if cfg.neighbours < 1:
        raise bad("neighbours", f"neighbours must be >= 1, got {cfg.neighbours}")
    if cfg.term not in TERMS:
        raise bad("term", f"term must be one of {TERMS}, got {cfg.term!r}")
    if cfg.window < 1:
        raise bad("window", f"window must be >= 1, got {cfg.window}")
    if not 0.0 < cfg.gap_decay <= 1.0:
        raise bad("gap_decay", f"gap_decay must be in (0, 1], got {cfg.gap_decay}")


@dataclass(frozen=True)
class HashedHybridConfig(SuperbloomConfig):
    name: ClassVar[str] = "hashed-hybrid"
    extendable: ClassVar[bool] = False  # its item-item term holds a row per id
    neighbours: int = setting(200, **_NEIGHBOURS)
    term: str = setting("auto", **_TERM)
    window: int = setting(10, **_WINDOW)
    gap_decay: float = setting(0.8, **_GAP_DECAY)
    weighting: str = setting("auto", flag="item-weighting", choices=("auto",) + WEIGHTINGS, help=(
        "--item-term cooccurrence: how the co-occurrence term weighs a pair: cosine, count (how many training sets "
        "hold both), idf (count x log(sets / sets holding the candidate)); auto = the validation chooses"))

    def __post_init__(self):
        super().__post_init__()
        check_term_settings(self)
        if self.weighting not in ("auto",) + WEIGHTINGS:
            raise bad("weighting", f"weighting must be one of {('auto',) + WEIGHTINGS}, got {self.weighting!r}")
        if self.weighting != "auto" and self.term not in ("auto", "cooccurrence"):
            raise ValueError(f"weighting {self.weighting!r} weighs the co-occurrence term; term {self.term!r} "
                             "has its own values (leave weighting auto)")


# the hashed hybrid's co-occurrence term's weightings (heads/hashed_hybrid.py; evaluation/cooccur_index.WEIGHTS, over
# the same neighbour lists): the value of a pair (c, j) held together by count(c, j) training sets, with
# df_i the training sets holding i and S their number:
#   cosine  count / sqrt(df_c df_j)      count  count      idf  count x log(S / df_j)
# count and idf are divided by a global scale (fit: their mean value over the pairs over the cosine's)
# so that one grid of MIXES fits all three; the validation chooses one (config weighting auto): WEIGHTINGS


# ------------------------------------------------------------------ the configs by head name

# name -> config class; registry.HEADS adds each head's class (tests/test_cli_flags.py: they agree)
HEAD_CONFIGS: dict[str, type] = {
    "superbloom": SuperbloomConfig,
    "full": FullConfig,
    "sampled": SampledConfig,
    "hierarchical": HierarchicalConfig,
    "hybrid": HybridConfig,
    "hashed-hybrid": HashedHybridConfig,
}
HeadConfig = Union[SuperbloomConfig, FullConfig, SampledConfig, HierarchicalConfig, HybridConfig, HashedHybridConfig]

# settings of the single HeadConfig that config.json files written before the heads package carry
_LEGACY_FIELDS = {"per_hash_softmax", "label_smoothing", "samples", "proposal", "tree"}
# settings of removed training options that older config.json files carry; they changed only how the
# network was trained, so the saved model reads without them (docs/results.md: what they measured)
_RETIRED_FIELDS = {"hybrid": {"residual", "distill", "distill_scale", "term_folds"}}
_RETIRED_HEADS = {"mixture": "the mixture head was removed (it gained nothing over the full head); "
                             "train the model again with --head full"}


def _config_class(name: str) -> type:
    if name in _RETIRED_HEADS:
        raise ValueError(f"head {name!r}: {_RETIRED_HEADS[name]}")
    if name not in HEAD_CONFIGS:
        raise ValueError(f"unknown head {name!r}; choose from {sorted(HEAD_CONFIGS)}")
    return HEAD_CONFIGS[name]


def head_settings(name: str) -> tuple[str, ...]:
    """The settings of head `name` (its config's fields)."""
    return tuple(f.name for f in dataclasses.fields(_config_class(name)))


def head_config(name: str = "superbloom", **settings) -> HeadConfig:
    """The config of head `name` with the given settings; a setting of another head is an error."""
    if not isinstance(name, str):
        raise bad("name", f"name must be a head's name ({', '.join(sorted(HEAD_CONFIGS))}), got {name!r}")
    cls = _config_class(name)
    wrong = sorted(set(settings) - set(head_settings(name)))
    if wrong:
        own = ", ".join(head_settings(name)) or "none"
        raise ValueError(f"{', '.join(wrong)} {'is not a setting' if len(wrong) == 1 else 'are not settings'} "
                         f"of the {name} head (its settings: {own})")
    return cls(**settings)


def head_config_dict(cfg: HeadConfig) -> dict:
    """{"name": ..., settings...}: how config.json stores a head."""
    return {"name": cfg.name, **dataclasses.asdict(cfg)}


def head_config_from_dict(d: dict) -> HeadConfig:
    """Inverse of head_config_dict; also reads the single HeadConfig of older model directories."""
    d = dict(d)
    name = d.pop("name", "superbloom")
    if _LEGACY_FIELDS <= set(d) and name == "superbloom":  # 0.1: the sampled head's settings, not this head's
        d.pop("samples"), d.pop("proposal")
    own, retired = set(head_settings(name)), _RETIRED_FIELDS.get(name, set())
    return head_config(name, **{k: v for k, v in d.items()
                                if k not in retired and (k in own or k not in _LEGACY_FIELDS)})
