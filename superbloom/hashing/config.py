"""The hashing settings without torch: HashConfig, ExtendConfig and the sizes they are resolved with.

The command line shows their defaults without importing torch (every `--help` starts fast); bloom.py
(the hash maps), coherent.py and grow.py use them and re-export them."""
from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass

from .._bounds import bad, within_ranges
from .._settings import setting

UNHASHED_MAX_IDS = 50_000  # alpha = 0 (auto): no hashing up to this many ids
AUTO_ALPHA = 4  # alpha = 0 (auto): ids per bucket above UNHASHED_MAX_IDS
MAX_M = 1024  # hash maps per id at most: the range of HashConfig.m (its flag's); a config.json beyond is refused
TREE_MIN_IDS = 500_000  # coherent maps: from this many ids on, the bisection tree instead of the exact greedy


@dataclass(frozen=True)
class HashConfig:
    alpha: int = setting(0, range=(0, None), help="ids per hash bucket; 0: chosen from the vocabulary size "
                         f"(unhashed up to {UNHASHED_MAX_IDS:,} ids, else {AUTO_ALPHA}: resolve)")
    m: int = setting(2, range=(1, MAX_M), help="hash functions (maps, tokens) per id")
    seed: int = setting(0, range=(0, None), flag="hash-seed", help="the hash maps' seed")
    coherent: int = setting(0, range=(0, None), help=(
        "how many of the m maps are coherent: similar ids (training co-occurrence) share a bucket (appendix C, "
        f"coherent.py: the exact greedy below {TREE_MIN_IDS:,} ids, a bisection tree from there on); the rest are "
        "random; they come first. Helps on set data with structure; on text random maps did better"))

    def __post_init__(self):
        if self.alpha < 0:
            raise bad("alpha", f"alpha must be >= 1 (or 0: auto), got alpha={self.alpha}")
        within_ranges(self, ("m",))  # 1 .. MAX_M, as --m allows
        if not 0 <= self.coherent <= self.m:
            raise bad("coherent", f"coherent must be between 0 and m={self.m}, got {self.coherent}")

    def resolve(self, n_ids: int) -> "HashConfig":
        """alpha = 0 (auto) -> a concrete config for `n_ids` ids: the unhashed model (alpha = 1, m = 1)
        while the id table is small (<= UNHASHED_MAX_IDS ids: hashing would save little memory and
        costs accuracy there), else alpha = AUTO_ALPHA with this m.
        A config with alpha >= 1 is returned unchanged."""
        if isinstance(n_ids, bool) or not isinstance(n_ids, numbers.Integral) or n_ids < 0:
            raise bad("n_ids", f"n_ids must be an integer >= 0, got {n_ids!r}")
        if self.alpha:
            return self
        if n_ids <= UNHASHED_MAX_IDS:
            return dataclasses.replace(self, alpha=1, m=1, coherent=0)
        return dataclasses.replace(self, alpha=AUTO_ALPHA)


@dataclass(frozen=True)
class ExtendConfig:
    seed: int = 0  # tie-breaks between equally filled buckets and each map's shuffle
