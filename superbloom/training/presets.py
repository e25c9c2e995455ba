"""Training presets: the best measured recipe per kind of dataset, by name, and `auto`, which picks one.

    superbloom train data/wiki --out runs/wiki --steps 2000              # --preset auto (the default)
    superbloom train data/wiki --out runs/wiki --steps 2000 --preset none  # the library's own defaults

A preset is a frozen set of TrainConfig settings keyed by config path ({"head.name": "hybrid",
"hash.alpha": 1, ...}), the file whose measurements chose it, and the rule under which `auto` picks it.
`auto` (choose) looks only at the prepared dataset's meta.json (DatasetFacts: ids, mean training-set
size, split kind, text or not). A setting the user gives always wins over the preset; a given setting
that the resolved recipe makes meaningless (refusals: hash.m with an unhashed model, a head setting
the head does not have) is an error, never silently dropped. resolve.py applies the chosen settings
and records the choice in config.json ("preset"); messages name a setting through the caller's
`name` (the command line: its flag).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Mapping

from ..hashing.config import UNHASHED_MAX_IDS
from ..heads.config import head_settings
from ..storage.loading import LoadError, read_json_object

STOP_FLAGS = ("loop.steps", "loop.epochs", "loop.time_budget")  # train's bounds: at least one is needed
# a preset's stop rule: "until the network stops improving on validation (patience: validations without a
# gain of the score or of a hybrid's network alone, LoopConfig.patience), at most the cap"
STOP_RULE = STOP_FLAGS + ("loop.patience",)
PATIENCE = 3  # the presets' patience: 3 validations (eval_every 500: 1,500 steps) without a gain

# auto's size tiers (ids of the prepared vocabulary); tests monkeypatch them
SMALL_MAX_IDS = UNHASHED_MAX_IDS  # the unhashed hybrid with the full softmax (the demo's recipe)
LARGE_MAX_IDS = 500_000  # the unhashed hybrid with sampled negatives (Epinions, 277,910 ids, measured); hashed above


@dataclass(frozen=True)
class Preset:
    """One named recipe: the settings it sets (config path -> value), when `auto` picks it, and the
    results file that measured it."""
    name: str
    settings: Mapping[str, object]
    when: str
    evidence: str
    # the stop rule, applied when no bound (STOP_FLAGS) is typed: `train` with no flag but --out trains until
    # the network stops improving on validation (patience), at most the cap; any typed bound replaces it
    # whole (--time-budget 30 trains 30 s), a typed --patience replaces its patience only
    stop: Mapping[str, object] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))
        object.__setattr__(self, "stop", MappingProxyType(dict(self.stop)))
        if set(self.stop) - set(STOP_RULE) or not set(self.stop) & set(STOP_FLAGS):
            raise ValueError(f"preset {self.name}: a stop rule is made of {STOP_RULE}, one of {STOP_FLAGS} at least "
                             f"(its cap), got {sorted(self.stop)}")

    def describe(self, name: Callable[[str], str] = lambda path: path) -> str:
        """'head hybrid, alpha 1, m 1': the settings as `name` names them (the command line: its flags)."""
        return ", ".join(f"{name(k)} {v}" for k, v in self.settings.items())


PRESETS: dict[str, Preset] = {}


def register(preset: Preset) -> Preset:
    if preset.name in PRESETS or preset.name in ("auto", "none"):
        raise ValueError(f"preset {preset.name!r} is already registered (or reserved)")
    PRESETS[preset.name] = preset
    return preset


register(Preset(
    "small", {"head.name": "hybrid", "hash.alpha": 1, "hash.m": 1},
    # the term first (step 0), then until the network stops improving, at most 4x the harness's 2,000 steps
    when=f"set data up to SMALL_MAX_IDS ({SMALL_MAX_IDS:,}) ids", stop={"loop.steps": 8000, "loop.patience": PATIENCE},
    evidence="benchmarks/results/quality.md"))  # the hybrid beats co-occurrence on all nine datasets; the demo's
register(Preset(
    "large", {"head.name": "hybrid", "hash.alpha": 1, "hash.m": 1, "head.samples": 4096},
    when=f"set data up to LARGE_MAX_IDS ({LARGE_MAX_IDS:,}) ids", stop={"loop.steps": 8000, "loop.patience": PATIENCE},
    evidence="benchmarks/results/quality.md"))  # session 6: Epinions 277,910 ids, recipe hybrid_sampled
register(Preset(
    "millions", {"head.name": "hashed-hybrid", "hash.alpha": 50, "hash.m": 2, "hash.coherent": 2, "init": "cooccurrence",
                 # the item-item term is 8 bytes a value in memory (and written once per model folder,
                 # storage/fixed.py): 200 values per id is 8 GB at 5M ids (heads/neighbours.py), 50 is 2 GB;
                 # and a checkpoint every 10 minutes
                 "head.neighbours": 50, "loop.checkpoint_every": 600.0},
    when=f"set data above LARGE_MAX_IDS ({LARGE_MAX_IDS:,}) ids",
    stop={"loop.time_budget": 3 * 3600.0, "loop.patience": PATIENCE},  # at most 3 hours (the term serves from step 0)
    # the recipe against the baselines: text_sets_time_to_quality.md (1M real ids: ahead of every baseline) and
    # synth5m_time_to_quality_weightings.md (5.1M synthetic ids: level with count / IDF co-occurrence and item2vec
    # once the validation chooses the term's weighting, weighting_choice.md; the network adds nothing there); the hashing and
    # start: e2e7.md; the term's exact top-k: hashed_hybrid_topk.md
    evidence="benchmarks/results/scale/text_sets_time_to_quality.md"))
register(Preset(
    "sequences", {"objective": "next-item", "head.name": "hybrid", "hash.alpha": 1, "hash.m": 1, "head.samples": 2048,
                  "model.d": 64, "model.heads": 2, "model.d_ff": 256, "model.layers": 2, "model.dropout": 0.2,
                  "model.positions": 50, "mask.n": 50, "optim.lr": 0.005, "optim.warmup": 200, "loop.batch_size": 128},
    when="a leave-one-out dataset (prepare --split leave-one-out)", stop={"loop.steps": 12000, "loop.patience": PATIENCE},
    evidence="benchmarks/results/sequence.md"))  # the next-item hybrid rows, 2,048 negatives (Beauty, Toys, BERT4Rec)
register(Preset(
    # the network and the bigram-context count, fused (heads/bigram.py; the term adds ~12M values, ~107 MB, to
    # the model folder at the 1M vocabulary, once: storage/fixed.py): at 3,529 steps level with the count and +8.3 rec@10 over the
    # network alone, at 10,486 steps above both (text_bigram_head_s17_4500.md); hash40-d128 with random maps
    # (table5_s10_paired.md: they beat coherent ones)
    "text", {"objective": "text-mlm", "model.positions": 128, "hash.alpha": 40, "hash.m": 2, "head.name": "hashed-hybrid",
             "head.term": "bigram"},
    when="a prepare-text dataset", stop={"loop.steps": 8000, "loop.patience": PATIENCE},
    evidence="benchmarks/results/text/text_bigram_head_s17_1500.md"))


@dataclass(frozen=True)
class DatasetFacts:
    """What `auto` looks at, from a prepared dataset's meta.json."""
    ids: int
    mean_set_size: float  # training links / training sets
    split: str  # "sets" | "leave-one-out"
    text: bool  # a prepare-text dataset (text-mlm); prepare-text --as-sets is set data

    @classmethod
    def read(cls, data: str | Path) -> "DatasetFacts":
        path = Path(data) / "meta.json"
        if not path.exists():
            raise FileNotFoundError(f"{data} is not a prepared dataset (no meta.json); "
                                    "run `superbloom prepare` (or prepare-text) first")
        meta = read_json_object(path, "the dataset's summary (superbloom prepare writes it)")  # one line if broken
        train = meta["train"] if isinstance(meta.get("train"), dict) else {}
        sets, links = train.get("sets", meta.get("sets", 0)), train.get("links", meta.get("links", 0))
        if not isinstance(meta.get("ids"), int) or not all(isinstance(v, (int, float)) for v in (sets, links)):
            raise LoadError(f"{path}: no integer \"ids\" (or non-numeric set and link counts); expected the summary "
                            "superbloom prepare wrote (was it edited by hand?)")
        return cls(ids=int(meta["ids"]), mean_set_size=round(links / sets, 2) if sets else 0.0,
                   split=meta.get("split", "sets"), text=meta.get("format") == "text")


# auto's rules, in order: the first that holds names the preset
RULES: list[tuple[str, Callable[[DatasetFacts], bool]]] = [
    ("text", lambda f: f.text),
    ("sequences", lambda f: f.split == "leave-one-out"),
    ("small", lambda f: f.ids <= SMALL_MAX_IDS),
    ("large", lambda f: f.ids <= LARGE_MAX_IDS),
    ("millions", lambda f: True),
]


def choose(facts: DatasetFacts) -> str:
    """auto: the preset for a dataset (RULES, first match). The mean set size is reported, not used:
    no measurement yet tells recipes apart by it."""
    return next(name for name, holds in RULES if holds(facts))


@dataclass(frozen=True)
class Choice:
    """A resolved preset: its name, whether auto chose it, the settings it applied (the flags typed
    override it, `overridden`), and the dataset it was chosen for."""
    preset: Preset
    auto: bool
    applied: Mapping[str, object]
    overridden: tuple[str, ...]
    facts: DatasetFacts

    def line(self, name: Callable[[str], str] = lambda path: path) -> str:
        """The one line `train` prints; `name` names a setting (the command line: its flag's name)."""
        head = f"preset auto -> {self.preset.name}" if self.auto else f"preset {self.preset.name}"
        typed = f"; typed: {', '.join('--' + name(p) for p in self.overridden)}" if self.overridden else ""
        stop = [f"{name(k)} {v:g}" for k, v in self.applied.items() if k in STOP_RULE]
        stop = f"; stop: {', '.join(stop)} (no bound given)" if stop else ""
        return (f"{head}: {self.preset.describe(name)}{typed}{stop} (evidence: {self.preset.evidence}) "
                f"[{self.facts.ids:,} ids, mean set size {self.facts.mean_set_size:g}, split {self.facts.split}"
                f"{', text' if self.facts.text else ''}]")

    def record(self) -> dict:
        """config.json's "preset"."""
        return {"name": self.preset.name, "chosen_by": "auto" if self.auto else "--preset",
                "settings": dict(self.preset.settings), "stop": dict(self.preset.stop), "applied": dict(self.applied),
                "overridden": list(self.overridden), "evidence": self.preset.evidence,
                "dataset": dataclasses.asdict(self.facts)}


def resolve(name: str, facts: DatasetFacts, given: set[str]) -> Choice | None:
    """Preset `name` for a dataset -> the Choice (None for "none"); the settings in `given` (config
    paths the user gave) are not applied."""
    if name == "none":
        return None
    auto = name == "auto"
    if auto:
        name = choose(facts)
    if name not in PRESETS:
        raise ValueError(f"preset {name!r}: unknown; choose one of auto, none, {', '.join(PRESETS)}")
    preset = PRESETS[name]
    applied = {k: v for k, v in preset.settings.items() if k not in given}
    if not given & set(STOP_FLAGS):  # no bound typed: the preset's stop rule (a typed --patience kept)
        applied.update({k: v for k, v in preset.stop.items() if k not in given})
    return Choice(preset, auto, applied, tuple(k for k in preset.settings if k in given), facts)


# ------------------------------------------------------------------ flags the resolved recipe ignores


def refusals(settings: Mapping[str, object], given: set[str], facts: DatasetFacts, by: str,
             name: Callable[[str], str] = lambda path: path, check_head: bool = True) -> list[str]:
    """Given settings that the resolved ones make meaningless, each as 'the setting: why' (empty: none).

    settings: the resolved settings (config path -> value, the preset's and the given ones); given: the
    paths the user gave; by: what chose the recipe ("preset small", "the library defaults"); name: how
    a message names a setting (the command line: its flag); check_head: refuse a given setting of another
    head than the recipe's (off: the head config's own check names it)."""
    out = []
    alpha = settings["hash.alpha"]
    unhashed = alpha == 1 or (alpha == 0 and facts.ids <= UNHASHED_MAX_IDS)
    if unhashed and "hash.alpha" not in given:  # a given alpha 1 with m 2 is the user's own choice
        why = ("alpha 1: unhashed, one row per id" if alpha == 1 else
               f"alpha 0 (auto) trains unhashed at {facts.ids:,} ids (<= {UNHASHED_MAX_IDS:,})")
        for path in ("hash.m", "hash.coherent"):
            if path in given:
                out.append(f"{name(path)}: {by} trains unhashed ({why}), so there are no hash maps for "
                           f"{name(path)}; drop it or give {name('hash.alpha')}")
    if check_head and "head.name" not in given:  # with a given head the head's own check names it
        head = str(settings["head.name"])
        own = set(head_settings(head))
        for path in sorted(given):
            if path.startswith("head.") and path != "head.name" and path[5:] not in own:
                out.append(f"{name(path)}: {by} trains the {head} head, which has no such setting "
                           f"(its settings: {', '.join(name('head.' + s) for s in sorted(own)) or 'none'}); "
                           f"drop it or give {name('head.name')}")
    if settings.get("head.term") == "bigram" and not facts.text:  # heads/bigram.py reads a blank's neighbours
        out.append(f"{name('head.term')} bigram: the bigram term counts adjacent tokens of text and reads a blank's two "
                   "neighbours; this dataset is not prepare-text data (use cooccurrence, ease or transition)")
    return out
