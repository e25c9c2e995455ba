"""Bloom hash maps: every id -> m tokens in a space alpha times smaller (Superbloom, sec. 3.2).

Map j orders the vocabulary (a seeded random permutation, or a coherent order from
`coherent.py`) and gives every run of alpha consecutive ids one bucket, so every bucket holds
exactly alpha ids (the last may hold fewer). The m maps own disjoint token ranges, after the
special tokens, each of which has m dedicated collision-free tokens ([MASK_1] ... [MASK_m]):

    token 0 .. S*m-1                      special s, copy j  -> s*m + j
    token S*m + j*n_buckets + b           bucket b of map j

With m >= 2 the builder guarantees that no two ids share all m buckets (such ids could never be
told apart); alpha = 1, m = 1 is the identity map, i.e. the unhashed model.

Elements fed to `encode` are ids >= 0 or special markers < 0: PAD_ELEM = -1, MASK_ELEM = -2, ...
The inverse index (map j, bucket b) -> ids is a dense (m, n_buckets, alpha) int32 array padded
with -1, since every bucket but the last holds exactly alpha ids; decoding reads it directly.
A vocabulary grown by `superbloom extend` (extend.py) keeps its n_buckets and token space; its
buckets then hold alpha or a few more ids, and the inverse is as wide as the fullest bucket.
Both are built by `inverse_index`, and both builders tell ids apart by `mix_keys` (one int64 per
id's m-tuple of buckets), so neither exists twice.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file, save_file

from ..storage.files import atomic_path
from .config import AUTO_ALPHA, MAX_M, UNHASHED_MAX_IDS, HashConfig  # noqa: F401 (re-exported: callers import them here)

SPECIALS = ("[PAD]", "[MASK]", "[UNK]", "[CLS]", "[SEP]")
PAD, MASK, UNK, CLS, SEP = range(len(SPECIALS))
PAD_ELEM, MASK_ELEM = -1 - PAD, -1 - MASK  # special markers in element arrays


class BloomHash:
    """m equal-bucket hash maps over ids 0..n_ids-1, their token layout and inverse index."""

    def __init__(self, buckets: np.ndarray, alpha: int, inverse: np.ndarray | None = None):
        buckets = np.ascontiguousarray(buckets, dtype=np.int32)  # (m, N) local bucket per id
        self.m, self.n_ids = buckets.shape
        self.alpha = int(alpha)
        # an extended vocabulary (extend.py) keeps the buckets it was built with: the inverse says how many
        self.n_buckets = -(-self.n_ids // self.alpha) if inverse is None else int(inverse.shape[1])
        self.buckets = buckets
        self.n_special_tokens = len(SPECIALS) * self.m
        self.offsets = self.n_special_tokens + self.n_buckets * np.arange(self.m, dtype=np.int64)
        self.n_tokens = self.n_special_tokens + self.m * self.n_buckets  # the token vocabulary
        if inverse is None:  # built here: check bucket sizes, then invert
            sizes = bucket_sizes(buckets, self.n_buckets)  # (m, n_buckets)
            expect = np.full(self.n_buckets, self.alpha)
            expect[-1] = self.n_ids - self.alpha * (self.n_buckets - 1)
            if sizes.shape[1] != self.n_buckets or not (sizes == expect).all():
                raise ValueError("every bucket must hold exactly alpha ids (the last may hold fewer)")
            # (m, n_buckets, alpha): ids of each bucket, -1 padded (only the last bucket is short);
            # the order within a bucket is free, so the faster unstable sort
            inverse = inverse_index(buckets, self.n_buckets, width=self.alpha, kind="quicksort")
        self.inverse = inverse

    # ------------------------------------------------------------------ building

    @classmethod
    def build(cls, n_ids: int, cfg: HashConfig, sets=None, stats=None) -> "BloomHash":
        """Random maps (sec. 3.2): seeded permutations, alpha consecutive ids per bucket.

        With cfg.coherent = c > 0 the first c maps are coherent (appendix C): built from the
        co-occurrences of `sets` (the training SetArray, required then) by coherent.py, which
        reports how (greedy or tree, rescans, violations) into `stats` (a CoherentStats) if given."""
        cfg = cfg.resolve(n_ids)
        rng = np.random.default_rng(cfg.seed)
        orders = []
        if cfg.coherent:
            if sets is None:
                raise ValueError(f"coherent={cfg.coherent}: coherent hash maps are built from the training "
                                 "sets; pass them (BloomHash.build(n_ids, cfg, sets))")
            from .coherent import coherent_orders

            orders = coherent_orders(sets, n_ids, cfg.alpha, cfg.coherent, cfg.seed, stats=stats)
        orders += [np.arange(n_ids) if (cfg.alpha == 1 and j == 0) else rng.permutation(n_ids)
                   for j in range(cfg.coherent, cfg.m)]
        return cls.from_orders(orders, cfg.alpha, rng)

    @classmethod
    def from_orders(cls, orders, alpha: int, rng: np.random.Generator | None = None) -> "BloomHash":
        """Buckets from one ordering of the ids per map: positions [b*alpha, (b+1)*alpha) -> b."""
        orders = [np.asarray(o) for o in orders]
        n = len(orders[0])
        buckets = np.empty((len(orders), n), np.int32)
        for j, o in enumerate(orders):
            if len(o) != n or not np.array_equal(np.bincount(o, minlength=n), np.ones(n, np.int64)):
                raise ValueError(f"order {j} is not a permutation of 0..{n - 1}")
            buckets[j, o] = np.arange(n) // alpha
        if len(orders) >= 2 and alpha > 1:
            separate_collisions(buckets, alpha, rng or np.random.default_rng(0))
        return cls(buckets, alpha)

    def adopt(self, other: "BloomHash") -> None:
        """Take `other`'s maps (the same ids, alpha, m and buckets): everything holding this object
        (an objective's batches, decoding) reads them from now on; modules that copied the tables
        rebuild them (model.encoder.rehash). train serves its term under quick random maps and adopts
        the coherent ones, built from the training sets, before the first step."""
        shape = lambda h: (h.m, h.n_ids, h.alpha, h.n_buckets)  # noqa: E731
        if shape(other) != shape(self):
            raise ValueError(f"hash maps of (m, ids, alpha, buckets) {shape(other)} cannot replace {shape(self)}")
        self.buckets, self.inverse = other.buckets, other.inverse

    # ------------------------------------------------------------------ lookups

    def encode(self, elems: np.ndarray) -> np.ndarray:
        """Elements (..., n) (ids >= 0, special markers < 0) -> tokens (..., n*m), element-major."""
        elems = np.asarray(elems, dtype=np.int64)
        special = elems < 0
        ids = np.where(special, 0, elems)
        tok = self.buckets.T[ids] + self.offsets  # (..., n, m)
        spec = (-elems - 1)[..., None] * self.m + np.arange(self.m)
        tok = np.where(special[..., None], spec, tok)
        return tok.reshape(*elems.shape[:-1], elems.shape[-1] * self.m)

    def tokens(self, ids: np.ndarray) -> np.ndarray:
        """Ids (...) -> global tokens (..., m)."""
        return self.buckets.T[np.asarray(ids)] + self.offsets

    def special_tokens(self, special: int) -> np.ndarray:
        return special * self.m + np.arange(self.m)

    def tables(self, device=None, dtype=torch.long) -> tuple[torch.Tensor, torch.Tensor]:
        """(buckets (m, N), inverse (m, n_buckets, alpha)) as tensors for decoding. dtype int32 on the
        CPU: views of this object's arrays (no copy: shared pages when they are memory-mapped, `load`)."""
        return (torch.from_numpy(self.buckets).to(device=device, dtype=dtype),
                torch.from_numpy(self.inverse).to(device=device, dtype=dtype))

    # ------------------------------------------------------------------ persistence

    def save(self, path: str | Path) -> None:
        with atomic_path(path) as tmp:
            save_file({"buckets": self.buckets, "inverse": self.inverse}, str(tmp),
                      metadata={"alpha": str(self.alpha), "m": str(self.m), "n_ids": str(self.n_ids),
                                "n_buckets": str(self.n_buckets)})

    @classmethod
    def load(cls, path: str | Path, mmap: bool = False) -> "BloomHash":
        """The saved maps; mmap=True: views of a copy-on-write memory map of the file (mapped.py), so
        that every server process that loads them shares one copy of the pages."""
        from safetensors import safe_open

        from ..storage.loading import LoadError, check_array, check_safetensors

        check_safetensors(path, "the hash maps (hashing.safetensors)")
        with safe_open(str(path), "np") as f:
            meta = f.metadata() or {}
            names = set(f.keys())
        if not str(meta.get("alpha", "")).isdigit() or not {"buckets", "inverse"} <= names:
            raise LoadError(f"{path}: no 'alpha' in its metadata or no 'buckets' / 'inverse' tensor; expected the hash "
                            "maps superbloom writes")
        alpha = int(meta["alpha"])
        if mmap:
            from ..storage.mapped import map_safetensors
            t = {name: x.numpy() for name, x in map_safetensors(path).items()}
        else:
            t = load_file(str(path))
        buckets, inverse = t["buckets"], t["inverse"]
        if (buckets.ndim != 2 or inverse.ndim != 3 or inverse.shape[0] != buckets.shape[0]
                or not 1 <= buckets.shape[0] <= MAX_M or alpha < 1):
            raise LoadError(f"{path}: tensors of shapes {list(buckets.shape)} and {list(inverse.shape)}, alpha "
                            f"{alpha}; expected (m, ids) buckets and an (m, buckets, width) inverse index, m between "
                            f"1 and {MAX_M:,}, alpha >= 1")
        m, n_ids = buckets.shape
        check_array(buckets, path, "(m, ids) buckets, each one of the map's buckets", ndim=2, low=0,
                    high=inverse.shape[1])
        check_array(inverse, path, "an inverse index of ids (or -1: padding)", ndim=3, low=-1, high=n_ids)
        return cls(buckets, alpha, inverse=inverse)

    def describe(self) -> dict:
        return {"alpha": self.alpha, "m": self.m, "n_ids": self.n_ids, "n_buckets": self.n_buckets,
                "n_tokens": self.n_tokens}


def bucket_sizes(buckets: np.ndarray, n_buckets: int) -> np.ndarray:
    """(m, N) buckets -> (m, n_buckets) int64: how many ids each bucket of each map holds."""
    return np.stack([np.bincount(row, minlength=n_buckets) for row in buckets])


def inverse_index(buckets: np.ndarray, n_buckets: int, width: int | None = None,
                  kind: str | None = "stable") -> np.ndarray:
    """(m, N) buckets -> (m, n_buckets, width) int32 ids of every bucket, -1 padded; width: the fullest
    bucket's size if None. Within a bucket the ids come in the order np.argsort(kind) leaves them
    (stable: increasing id). One vectorised scatter per map."""
    m, n = buckets.shape
    sizes = bucket_sizes(buckets, n_buckets)  # (m, nb)
    width = int(sizes.max(initial=0)) if width is None else int(width)
    order = np.argsort(buckets, axis=1, kind=kind).astype(np.int32)  # (m, N): ids grouped by bucket
    inverse = np.full((m, n_buckets * width), -1, np.int32)
    for j in range(m):
        # position p of `order` holds the (p - start[b])-th id of its bucket b: flat slot p + b*width - start[b]
        shift = np.arange(n_buckets, dtype=np.int64) * width - (np.cumsum(sizes[j]) - sizes[j])  # (nb,)
        inverse[j, np.arange(n) + np.repeat(shift, sizes[j])] = order[j]
    return inverse.reshape(m, n_buckets, width)


def key_weights(m: int, n_buckets: int) -> tuple[np.ndarray, bool]:
    """(m,) int64 weights w of `mix_keys` (w[m-1] = 1, so changing the last map's bucket by d changes the
    key by d) and whether the keys are exact: mixed radix n_buckets when n_buckets^m < 2^62, else
    wrapping products of odd multipliers (a hash)."""
    exact = float(n_buckets) ** m < 2.0 ** 62
    step = [np.int64(n_buckets) if exact else np.int64(0x9E3779B97F4A7C15 - (1 << 64) + 2 * j) for j in range(m)]
    w = np.ones(m, np.int64)
    with np.errstate(over="ignore"):
        for j in range(m - 2, -1, -1):
            w[j] = w[j + 1] * step[j + 1]
    return w, exact


def mix_keys(buckets: np.ndarray, n_buckets: int | None = None) -> np.ndarray:
    """One int64 per id, equal for equal m-tuples: sum_j bucket_j * w_j (key_weights), exact when it fits,
    else a hash (a hash tie between different tuples only costs a needless swap or move). Linear in every
    bucket, so changing one is one add. (m, N) -> (N,); n_buckets: buckets.max() + 1 if None."""
    n_buckets = int(buckets.max()) + 1 if n_buckets is None else n_buckets
    w, _ = key_weights(buckets.shape[0], n_buckets)
    key = np.zeros(buckets.shape[1], np.int64)
    with np.errstate(over="ignore"):
        for j, row in enumerate(buckets):
            key += row.astype(np.int64) * w[j]
    return key


def duplicate_rows(buckets: np.ndarray) -> np.ndarray:
    """Ids whose m-tuple of buckets equals that of an id sorted before it. (m, N) -> (k,)."""
    n_buckets = int(buckets.max()) + 1
    key = mix_keys(buckets, n_buckets)
    order = np.argsort(key, kind="stable")
    same = key[order[1:]] == key[order[:-1]]
    if not key_weights(buckets.shape[0], n_buckets)[1]:  # hashed keys: confirm
        same &= (buckets[:, order[1:]] == buckets[:, order[:-1]]).all(0)
    return order[1:][same]


def separate_collisions(buckets: np.ndarray, alpha: int, rng: np.random.Generator, tries: int = 200) -> None:
    """Make all m-tuples distinct by swapping last-map buckets between ids (in place).

    A swap keeps every bucket size. Each colliding id swaps with a random partner such that
    neither new tuple exists yet; a random map expects about (alpha-1)^2/2 colliding pairs for
    m = 2, so only a handful of ids move.
    """
    m, n = buckets.shape
    n_buckets = int(buckets.max()) + 1
    if float(n_buckets) ** m < n:
        raise ValueError(f"{n} ids cannot get distinct tuples from {m} maps of {n_buckets} buckets; "
                         "lower alpha or raise m")
    dup = duplicate_rows(buckets)
    if dup.size == 0:
        return
    last = buckets[-1]
    key = mix_keys(buckets)
    with np.errstate(over="ignore"):
        prefix = key - last  # key = prefix + last bucket, for both key kinds
    initial = np.sort(key)
    delta: dict[int, int] = {}  # changes to the multiset of keys since `initial`

    def count(k: int) -> int:
        return int(np.searchsorted(initial, k, "right") - np.searchsorted(initial, k, "left")) + delta.get(k, 0)

    for i in dup.tolist():
        if count(int(key[i])) == 1:  # an earlier swap already freed it
            continue
        for j in rng.integers(0, n, tries).tolist():
            if last[i] == last[j]:
                continue
            with np.errstate(over="ignore"):
                ki, kj = int(prefix[i] + last[j]), int(prefix[j] + last[i])
            if ki == kj or count(ki) or count(kj):
                continue
            for old, new in ((int(key[i]), ki), (int(key[j]), kj)):
                delta[old] = delta.get(old, 0) - 1
                delta[new] = delta.get(new, 0) + 1
            key[i], key[j] = ki, kj
            last[i], last[j] = last[j], last[i]
            break
        else:
            raise ValueError(f"could not give {n} ids distinct tuples with alpha={alpha}, m={m} "
                             "(too few buckets for this alpha); lower alpha or raise m")
