"""Growing the id vocabulary of a trained model without resizing a table.

    superbloom extend runs/wiki/model new_ids.txt --out runs/wiki/model+new

A hashed model's tables have one row per *token*, not per id (Superbloom sec. 3.2: every id is m
tokens, one bucket of each of the m hash maps, in a token space alpha times smaller than the
vocabulary). So a new id needs no new row: it gets one existing bucket per map, and its input and
its output score are read from rows the model already has (plus, for a model trained with the
dynamic input, embeddings.DynamicIdInput, the embedding of its own string, which needs no row
either). Each new id takes, in every map, one of the least-filled buckets (water-filling: the k new
ids raise the fullest bucket as little as possible; ties broken at random, seeded, and each map's
choices shuffled independently, so the new ids' m-tuples are independent like a random map's). A
new id whose m-tuple equals another id's (a full collision: the two could never be told apart) is
moved, in the last map (or if need be another), to the least-filled bucket that makes its tuple
unique; old ids never move.

The new model directory keeps every weight table's shape, byte for byte (the checkpoints are copied
as they are: safetensors, never pickle); its hash maps (n_buckets kept, buckets now holding alpha
or a few more ids) and vocabulary (the new ids appended, count 0) are new. Consequences:
- old ids keep their tokens, so a context of old ids gets the same hidden states and every old id
  the same score (new ids only join the candidates);
- a new id is predictable at once: its score is the sum of its buckets' log-probabilities, which
  the trained model already gives (before fine-tuning, a new id scores like the ids it shares
  buckets with);
- `superbloom train DATA --out NEW_DIR --resume --steps N` fine-tunes it on data that contains the
  new ids (remap.py maps a dataset prepared with another vocabulary onto the model's by id string;
  --steps counts from the start of the run). The copied LATEST checkpoint forgets its best
  validation score (it was measured on the old data), so the fine-tune's first validation makes
  the new BEST; until then predict / serve use the source's BEST weights.

Only the superbloom head can be extended this way (the full, sampled and hierarchical heads own a
row per id), and only with m >= 2: with one token per id (alpha = 1, m = 1, the unhashed model
that `--alpha 0` picks for small vocabularies) a new id must share its only token with an old id.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .config import ExtendConfig  # noqa: F401 (re-exported)
from ..storage.loading import read_text
from .bloom import bucket_sizes, duplicate_rows, key_weights, mix_keys
from ..data.readers import InputError
from ..data.vocab import Vocab


# ------------------------------------------------------------------------------ reading the new ids


def read_new_ids(path: str | Path, vocab: Vocab) -> tuple[list[str], dict]:
    """The new ids of `path` (one per line, UTF-8), minus those already in `vocab` (counted and
    reported in the returned summary, with their line numbers). A blank line, a repeated id or a
    file with no id at all is an InputError naming the file and line."""
    path = Path(path)
    text = read_text(path, "one id per line")  # missing, unreadable or not UTF-8: one line naming file (and line)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    lines = [s[:-1] if s.endswith("\r") else s for s in lines]
    if not lines:
        raise InputError(f"{path}: empty file; expected one new id per line")
    seen: dict[str, int] = {}
    known: list[tuple[int, str]] = []
    for n, s in enumerate(lines, 1):
        if not s.strip():
            raise InputError(f"{path}:{n}: blank line; expected one id per line")
        if s in seen:
            raise InputError(f"{path}:{n}: id {s!r} repeats line {seen[s]}; list each new id once")
        seen[s] = n
        if s in vocab.index:
            known.append((n, s))
    known_set = {s for _, s in known}
    new = [s for s in seen if s not in known_set]
    summary = {"file": str(path), "lines": len(lines), "new": len(new), "already_in_vocabulary": len(known),
               "already_in_vocabulary_first": [f"{path}:{n}: {s}" for n, s in known[:5]]}
    if not new:
        raise InputError(f"{path}: all {len(lines):,} ids are already in the model's vocabulary "
                         f"(first: line {known[0][0]}, {known[0][1]!r}); nothing to add")
    return new, summary


# ------------------------------------------------------------------------------ bucket assignment


def least_filled(fill: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k buckets for k new ids that keep the fullest bucket as low as possible: the k smallest
    (fill level, random) slots, where bucket b offers slots at levels fill[b], fill[b] + 1, ...
    -> (k,) bucket of each new id, in random order. Vectorised over (n_buckets, R) slots."""
    nb = len(fill)
    r = -(-k // nb) + int(fill.max() - fill.min()) + 1  # enough levels per bucket for any k
    levels = (fill[:, None] + np.arange(r)[None, :]).ravel()  # (nb * R,)
    chosen = np.lexsort((rng.random(levels.size), levels))[:k]  # by level, ties at random
    return rng.permutation(chosen // r)


def place_apart(buckets: np.ndarray, n_old: int, n_buckets: int, rng: np.random.Generator) -> int:
    """Make every m-tuple unique by moving new ids (columns >= n_old), in place: each new id whose
    tuple another id already has goes, in the last map (or, if no bucket there frees it, the one
    before, ...), to the least-filled bucket that gives it an unused tuple. Old ids never move.
    -> how many new ids moved.

    A random tuple collides with probability ~ N / n_buckets^m (m = 2, 4,000 ids in 920 buckets:
    ~0.5%), so only a handful of ids move; the loop is over those, not over all ids."""
    dup = duplicate_rows(buckets)  # stable: an id equal to an earlier (e.g. old) one; never an old id
    if dup.size == 0:
        return 0
    if dup.min() < n_old:
        raise ValueError("the model's own hash maps give two ids the same buckets; it cannot be extended")
    m = buckets.shape[0]
    w, _ = key_weights(m, n_buckets)
    fill = bucket_sizes(buckets, n_buckets)  # (m, nb)
    key = mix_keys(buckets, n_buckets)  # (N,) one int64 per m-tuple, linear in each bucket
    used = np.sort(key)
    added: list[int] = []
    tiebreak = rng.random(n_buckets)
    for i in dup.tolist():
        for j in range(m - 1, -1, -1):
            order = np.lexsort((tiebreak, fill[j]))  # map j's buckets, least-filled first (ties: seeded)
            with np.errstate(over="ignore"):
                cand = key[i] + (order - buckets[j, i]).astype(np.int64) * w[j]  # (nb,) i's key in each bucket
            pos = np.searchsorted(used, cand)
            taken = (pos < len(used)) & (used[np.minimum(pos, len(used) - 1)] == cand)
            taken |= np.isin(cand, np.asarray(added, np.int64))
            free = np.flatnonzero(~taken)
            if free.size:
                b = int(order[free[0]])
                fill[j, buckets[j, i]] -= 1
                fill[j, b] += 1
                buckets[j, i] = b
                key[i] = cand[free[0]]
                added.append(int(key[i]))
                break
        else:  # no single-map move frees it (tuples nearly all used): any free tuple, least-filled
            b = _least_filled_free_tuple(used, np.asarray(added, np.int64), fill, w, n_buckets)
            if b is None:
                raise ValueError(f"no bucket of any map gives new id {i} a tuple of its own: too many ids for "
                                 f"{n_buckets:,} buckets per map and m={m}")
            for j in range(m):
                fill[j, buckets[j, i]] -= 1
                fill[j, b[j]] += 1
                buckets[j, i] = b[j]
            key[i] = int((b.astype(np.int64) * w).sum())
            added.append(int(key[i]))
    return int(dup.size)


ENUMERATE_MAX_TUPLES = 1 << 22  # the fallback lists every m-tuple only when there are at most this many


def _least_filled_free_tuple(used: np.ndarray, added: np.ndarray, fill: np.ndarray, w: np.ndarray,
                             n_buckets: int) -> np.ndarray | None:
    """The unused m-tuple (no id has its key) with the least total fill over the maps, when the
    keys are exact and few enough to list (a dense key space: where one-map moves ran out); else or
    if every tuple is used, None. -> (m,) buckets."""
    m = fill.shape[0]
    if float(n_buckets) ** m > ENUMERATE_MAX_TUPLES:
        return None
    keys = np.arange(n_buckets ** m, dtype=np.int64)  # exact mixed-radix keys (w: powers of n_buckets)
    free = keys[~(np.isin(keys, used) | np.isin(keys, added))]
    if free.size == 0:
        return None
    tuples = (free[None, :] // w[:, None]) % n_buckets  # (m, F)
    cost = fill[np.arange(m)[:, None], tuples].sum(0)  # (F,)
    return tuples[:, int(np.argmin(cost))]


def assign(buckets: np.ndarray, n_buckets: int, k: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Buckets (m, N) of the old ids -> (buckets (m, N + k) with k new ids appended, ids moved apart)."""
    new = np.stack([least_filled(fill, k, rng) for fill in bucket_sizes(buckets, n_buckets)])  # (m, k)
    out = np.concatenate([buckets, new.astype(buckets.dtype)], axis=1)
    moved = place_apart(out, buckets.shape[1], n_buckets, rng)
    return out, moved


def fill_stats(buckets: np.ndarray, n_buckets: int) -> dict:
    """Bucket fill and token sharing of a hashing's (m, N) buckets."""
    sizes = bucket_sizes(buckets, n_buckets)  # (m, nb)
    shares = np.zeros(buckets.shape[1], bool)
    for j, row in enumerate(buckets):
        shares |= sizes[j][row] > 1
    return {"ids": int(buckets.shape[1]), "max_fill": int(sizes.max()), "mean_fill": round(float(sizes.mean()), 4),
            "max_fill_per_map": sizes.max(1).tolist(), "empty_buckets": int((sizes == 0).sum()),
            "ids_sharing_a_token": int(shares.sum()), "full_collisions": int(duplicate_rows(buckets).size)}
