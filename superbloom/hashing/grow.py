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

import shutil
from pathlib import Path

import numpy as np

from ..storage.checkpoint import check_checkpoint, latest_checkpoint
from ..storage.files import load_json, save_json
from ..storage.guarded import claim
from .config import ExtendConfig  # noqa: F401 (re-exported)
from ..storage.loading import expect_kind, read_config, read_text
from .bloom import BloomHash, bucket_sizes, duplicate_rows, inverse_index, key_weights, mix_keys
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


# ------------------------------------------------------------------------------ the model directory


def check_extendable(config: dict, hashing: BloomHash, model_dir: Path) -> None:
    head = config.get("head", {}).get("name", "superbloom")
    if head != "superbloom":
        raise ValueError(f"{model_dir}: the {head} head owns one output row per id, so new ids would need new rows; "
                         "only a model with the superbloom (hashed) head can be extended")
    if hashing.m < 2:
        raise ValueError(f"{model_dir}: this model gives each id one token (alpha={hashing.alpha}, m={hashing.m}: "
                         "unhashed, as --alpha 0 picks for up to 50,000 ids), so a new id would share all its tokens "
                         "with an old one; extend needs m >= 2 (train with e.g. --alpha 4 --m 2)")


def extend(model_dir: str | Path, new_ids: str | Path, out: str | Path, cfg: ExtendConfig = ExtendConfig()) -> dict:
    """Write `out`: the model of `model_dir` with the ids of the file `new_ids` added (module
    docstring). -> the summary (also written to out/extend.json)."""
    target = claim(out, "model")  # before any work (storage/guarded.py): no "", "/", file or user's folder
    # every file read checked first (storage/loading.py): a set embedding, a broken config.json, truncated
    # weights or a truncated vocabulary is one line naming it, before anything is written
    model_dir, out = expect_kind(model_dir, "model"), target.path
    if not (model_dir / "config.json").is_file() or not (model_dir / "hashing.safetensors").is_file():
        raise FileNotFoundError(f"{model_dir}: not a model directory (no config.json / hashing.safetensors)")
    if out.resolve() == model_dir.resolve():
        raise ValueError(f"--out {out} is the model directory itself; write the extended model elsewhere")
    if target.holds_output():  # extend writes a new folder only
        raise ValueError(f"--out {out} already exists and is not empty; give a new directory")
    config = read_config(model_dir, {"model": dict, "head": dict})
    hashing = BloomHash.load(model_dir / "hashing.safetensors")
    check_extendable(config, hashing, model_dir)
    vocab = Vocab.load(model_dir)
    latest = latest_checkpoint(model_dir)
    best = latest_checkpoint(model_dir, "BEST")
    if latest is None and best is None:
        raise FileNotFoundError(f"{model_dir}: no complete checkpoint to extend")
    for ckpt in {p for p in (latest, best) if p is not None}:  # copied as they are: complete, or refused
        check_checkpoint(ckpt)
    new, read = read_new_ids(new_ids, vocab)

    rng = np.random.default_rng([cfg.seed, 15])
    nb = hashing.n_buckets
    buckets, moved = assign(hashing.buckets, nb, len(new), rng)
    grown = BloomHash(buckets, hashing.alpha, inverse=inverse_index(buckets, nb))  # as wide as the fullest bucket
    before, after = fill_stats(hashing.buckets, nb), fill_stats(buckets, nb)
    if after["full_collisions"]:  # place_apart guarantees none; a wrong model must never be written
        raise AssertionError(f"extend left {after['full_collisions']} full collisions")
    summary = {"model": str(model_dir), "out": str(out), **read, "ids_before": hashing.n_ids,
               "ids_after": grown.n_ids, "n_buckets_per_map": nb, "m": hashing.m, "alpha": hashing.alpha,
               "n_tokens": hashing.n_tokens, "new_ids_moved_apart": moved, "before": before, "after": after}

    tmp = target.stage()  # OUT.new, marked ours; swapped in complete (a kill leaves no half model at OUT)
    (tmp / "checkpoints").mkdir()
    for ckpt in {p for p in (latest, best) if p is not None}:  # weights, optimizer, averages: shapes unchanged
        shutil.copytree(ckpt, tmp / "checkpoints" / ckpt.name)
    for pointer, ckpt in (("LATEST", latest), ("BEST", best)):
        if ckpt is not None:
            (tmp / pointer).write_text(f"checkpoints/{ckpt.name}\n")
    if latest is not None:  # its best score was measured on the old data: a fine-tune starts a new BEST
        state = load_json(tmp / "checkpoints" / latest.name / "state.json")
        save_json(tmp / "checkpoints" / latest.name / "state.json", dict(state, best=None))
    if (model_dir / "metrics.jsonl").exists():
        shutil.copy2(model_dir / "metrics.jsonl", tmp / "metrics.jsonl")
    grown.save(tmp / "hashing.safetensors")
    Vocab(vocab.strings + new, np.concatenate([vocab.counts, np.zeros(len(new), np.int64)])).save(tmp)
    record = {k: summary[k] for k in ("model", "file", "new", "already_in_vocabulary", "ids_before", "ids_after")}
    save_json(tmp / "config.json", dict(config, extended=config.get("extended", []) + [record]))
    save_json(tmp / "extend.json", summary)
    target.commit()
    return summary


def format_summary(s: dict) -> str:
    b, a = s["before"], s["after"]
    rows = [("ids", f"{b['ids']:,}", f"{a['ids']:,}"),
            ("buckets per map (unchanged)", f"{s['n_buckets_per_map']:,}", f"{s['n_buckets_per_map']:,}"),
            ("max bucket fill", str(b["max_fill"]), str(a["max_fill"])),
            ("mean bucket fill", f"{b['mean_fill']:.3f}", f"{a['mean_fill']:.3f}"),
            ("empty buckets", str(b["empty_buckets"]), str(a["empty_buckets"])),
            ("ids sharing >= 1 token", f"{b['ids_sharing_a_token']:,}", f"{a['ids_sharing_a_token']:,}"),
            ("full collisions", str(b["full_collisions"]), str(a["full_collisions"]))]
    lines = [f"added {s['new']:,} ids from {s['file']} to {s['model']} -> {s['out']} "
             f"(m={s['m']}, alpha={s['alpha']}, {s['n_tokens']:,} tokens: every table keeps its shape)"]
    if s["already_in_vocabulary"]:
        lines.append(f"skipped {s['already_in_vocabulary']:,} ids already in the vocabulary: "
                     + "; ".join(s["already_in_vocabulary_first"]) + (" ..." if s["already_in_vocabulary"] > 5 else ""))
    if s["new_ids_moved_apart"]:
        lines.append(f"{s['new_ids_moved_apart']} new ids moved to another last-map bucket to avoid a full collision")
    w = max(len(r[0]) for r in rows)
    lines.append(f"{'':<{w}}  {'before':>10}  {'after':>10}")
    lines += [f"{r[0]:<{w}}  {r[1]:>10}  {r[2]:>10}" for r in rows]
    return "\n".join(lines)
