"""Set expansion: grow a set one id at a time, each added id joining the context of the next prediction.

The blog's "query expansion for sets" (Y = []; repeat: T = g(f(X)); Y += T; X = X + T) with the
Superbloom decoder as g, as in the paper's appendix D examples. Each step ranks the top `k` ids for
the current context (context ids excluded, so an id is never added twice) and takes the best one
(`argmax`) or draws one from softmax(score / temperature) over those k (`sample`, seeded).

    from superbloom import load
    from superbloom.inference.expand import ExpandConfig, expand
    expand(load("runs/wiki/model"), ["Copenhagen"], ExpandConfig(steps=5)).added
    # -> [Expanded(id=..., score=..., exact=...), ...]  one per added id
    expand(model, ["Copenhagen"], allow=catalog, deny=Path("gone.txt"))   # the filters of recommend

    superbloom expand runs/wiki/model Copenhagen --add 5 [--strategy sample --temperature 0.7]

`model` is anything with a `vocab` and `rank(contexts, k, decode) -> Ranking` (a Predictor, or the
HTTP service's batching wrapper; their `read_context` reads the seed as the model reads a context). A seed's repeated ids count once (a set model's);
more steps than the ids left to add is an ArgumentError naming `steps` (it could never finish).
`allow` / `deny` are recommend's filters (a list of ids or a file of one per line): only allowed ids
are added, never a denied one (the seed's and the added ids are never added again).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .. import _bounds as check
from .._settings import setting
from ..heads.decode_config import DecodeConfig
from .recommend import id_list

STRATEGIES = ("argmax", "sample")


@dataclass(frozen=True)
class ExpandConfig:
    steps: int = setting(10, flag="add", range=(1, None), aliases=(), help="ids to add")
    strategy: str = setting("argmax", choices=STRATEGIES, help="argmax, or sample from softmax(score / temperature) "
                            "over the top k")
    temperature: float = setting(1.0, range=(0.0, 1e6), lo_open=True, help="sample: the temperature")
    k: int = setting(10, range=(1, None), help="candidates ranked per step (sample draws among them)")
    seed: int = setting(0, range=(0, None), help="sample: random seed")
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def __post_init__(self):
        check.one_of("strategy", self.strategy, STRATEGIES)
        check.integer("steps", self.steps, 1)
        check.integer("k", self.k, 1)
        check.number("temperature", self.temperature, 0.0, lo_open=True)
        check.integer("seed", self.seed, 0)
        check.instance("decode", self.decode, DecodeConfig, "a superbloom.DecodeConfig")


@dataclass
class Expanded:
    id: str  # as stored in the vocabulary
    score: float  # gamma score of the id in the step that added it
    exact: bool  # that step's top-k was certified exact


@dataclass
class Expansion:
    seed: list[str]  # known seed ids, as stored
    unknown: list[str]  # seed ids not in the vocabulary (ignored)
    added: list[Expanded]  # in the order they were added; fewer than steps only if the vocabulary ran out
    repeated: int = 0  # seed ids given again (counted once)


def choose(scores: np.ndarray, strategy: str, temperature: float, rng: np.random.Generator) -> int:
    """Index of the chosen candidate among finite `scores` (best first)."""
    if strategy == "argmax":
        return 0
    z = (scores - scores.max()) / temperature
    p = np.exp(z)
    return int(rng.choice(len(p), p=p / p.sum()))


def _filter(model, ids, name: str) -> np.ndarray | None:
    """An allow- or deny-list (id_list) -> its known ids, sorted unique int64; an allow-list with none
    known is a ValueError (nothing could be added)."""
    got = id_list(ids, name)
    if got is None:
        return None
    known = np.unique(np.asarray(model.vocab.lookup(got)[0], np.int64))
    if name == "allow" and not len(known):
        raise ValueError(f"allow: none of the {len(got):,} ids is in the model's vocabulary")
    return known


def expand(model, seed: Sequence[str], cfg: ExpandConfig = ExpandConfig(), allow=None, deny=None) -> Expansion:
    """Add cfg.steps ids to the set `seed` (string ids, stored or display form), one at a time; only ids of
    `allow` (when given), never ids of `deny`."""
    if not (hasattr(model, "vocab") and hasattr(model, "rank")):
        raise check.ArgumentError("model", f"expected a loaded id model (superbloom.load), got {check.shown(model)}")
    check.instance("cfg", cfg, ExpandConfig, "a superbloom.ExpandConfig")
    if hasattr(model, "read_context"):
        known, unknown, repeated = model.read_context(seed, "seed")
    else:  # a model without a reader of its own: the ids as given
        known, unknown, repeated = *model.vocab.lookup(check.id_list("seed", seed)), 0
    if len(known) == 0:
        raise check.ArgumentError("seed", "none of the seed ids is in the model's vocabulary"
                                  + (f" (unknown: {', '.join(unknown[:5])})" if unknown else ""))
    allowed, denied = _filter(model, allow, "allow"), _filter(model, deny, "deny")
    if allowed is None and denied is None:
        left = len(model.vocab) - len(known)
        why = f"the model's {len(model.vocab):,} ids less the seed's {len(known):,}"
    else:
        pool = np.arange(len(model.vocab)) if allowed is None else allowed
        gone = np.concatenate([np.asarray(known, np.int64), np.zeros(0, np.int64) if denied is None else denied])
        left = int(np.setdiff1d(pool, gone).size)
        why = "the allowed ids less the seed's and the denied ones"
    if cfg.steps > left:
        raise check.ArgumentError("steps", f"at most {left:,} ids can be added to this seed ({why}), got "
                                           f"{cfg.steps:,}")
    rng = np.random.default_rng(cfg.seed)
    context = [int(i) for i in known]
    added = []
    for _ in range(cfg.steps):
        lists = {} if allowed is None else {"allow": allowed}
        if denied is not None and len(denied):  # the set and the deny-list excluded
            lists["exclude"] = np.asarray([context + denied.tolist()], np.int64)
        r = model.rank(np.asarray([context], np.int64), cfg.k, cfg.decode, **lists)
        ids, scores = r.ids[0].numpy(), r.scores[0].numpy().astype(np.float64)
        ok = (ids >= 0) & np.isfinite(scores)
        if not ok.any():
            break  # every id is already in the set
        ids, scores = ids[ok], scores[ok]
        j = choose(scores, cfg.strategy, cfg.temperature, rng)
        context.append(int(ids[j]))
        added.append(Expanded(model.vocab.strings[ids[j]], float(scores[j]), bool(r.exact[0])))
    return Expansion(model.vocab.decode(known.tolist()), unknown, added, repeated)
