"""synth: a SYNTHETIC links file with planted structure, at any scale, in bounded memory.

    superbloom synth --ids 5300000 --links 462000000 --out links.parquet      # the paper's Wikipedia sizes
    superbloom prepare links.parquet --format parquet --out data/synth

The paper's large dataset (5.3M entities, 462M links, sec. 5) is not public; this generator gives
inputs of that size whose sets carry structure that a model can learn, so that recall is
meaningful (a uniform random file would make every method look the same). It is synthetic data,
and says so: the Parquet file's key-value metadata (`superbloom.synth`) and the first lines of an
edge list (`#` comments, skipped by the reader) record the generator, its arguments and
`"synthetic": true`.

The generative model
--------------------
- Ids are `0 .. ids-1`; id `r` has popularity weight `(r + topics) ** -zipf` (Zipf over the whole
  vocabulary, id 0 the most popular; zipf = 0 is uniform). The offset `topics` (Zipf-Mandelbrot)
  keeps the head from swamping its topic: with plain `(r + 1) ** -1.1` id 0 alone would carry 12% of
  all draws and, at 1000 topics, 99% of its own topic's, while an id can be in at most every set once.
- Each id belongs to exactly one of `topics` latent topics: a seeded permutation of the ids dealt
  round-robin, so topics have `ids // topics` or one more ids and each holds ranks from the whole
  popularity range. A topic's mass is the sum of its ids' weights.
- A set's size is `1 + Geometric(1 / (mean_set_size - 1))` (support >= 2, mean `mean_set_size`),
  capped at `ids // 2`. The set draws `k ~ Uniform{1..topics_per_set}` topics, each in proportion to
  its mass (with replacement, so two draws may coincide). Each of its links picks one of those k
  topics uniformly and then an id of that topic in proportion to the ids' weights (inverse CDF on
  the ids' cumulative weights laid out topic after topic: a guide table narrows each search to a
  few candidates, then a vectorised binary search; it equals `np.searchsorted` exactly).
  Marginally a draw is id r with probability weight / total: Zipf for ranks >> topics, as stated
  (an id's count saturates at its topic's sets where weight / total * links nears them).
- Ids within a set are distinct (`prepare` would drop repeats): a repeated draw is redrawn from
  the same topic (16 rounds), then from the whole vocabulary by popularity (16 rounds), then
  uniformly until none is left (a set never has more than half of the ids, so this ends).

Numbers honoured: exactly `links` rows; the sets are numbered 0, 1, 2, ... in order and drawn
until the links are used up, the last one truncated (it may then have a single id), so there are
about `links / mean_set_size` sets (the summary gives the exact count); every id can be drawn,
but with a steep Zipf and few links the rarest may never be (`ids_drawn` in the summary counts
those that were).

Streaming: sets are made in chunks of about 2M links (every draw vectorised with NumPy; no
Python loop per set, link or id), each chunk one Parquet row group or one block of text, so peak
memory is the per-id tables (about 25 bytes per id) plus one chunk, whatever `links` is. Chunk
`c` draws from its own generator seeded with (seed, c): the output is a deterministic function of
the arguments, byte for byte.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from .._log import progress_bar

from .._version import __version__
from ..storage.guarded import claim

SYNTH_FORMATS = ("parquet", "edges")
METADATA_KEY = b"superbloom.synth"  # a file-format key: never renamed with the module
CHUNK_LINKS = 1 << 21  # links per chunk (about): a Parquet row group; sets per chunk = CHUNK_LINKS // mean size
_TOPIC_ROUNDS, _POPULAR_ROUNDS = 16, 16  # redraws of repeated ids: within the topic, then by popularity


@dataclass(frozen=True)
class SynthConfig:
    out: str
    ids: int = 5_300_000  # vocabulary size (the paper's Wikipedia entities)
    links: int = 462_000_000  # rows written (the paper's Wikipedia links)
    topics: int = 1000  # latent topics; each id belongs to one
    topics_per_set: int = 3  # a set draws 1..this many topics
    mean_set_size: float = 87.0  # ~ 462M / 5.3M, the paper's links per entity
    zipf: float = 1.1  # popularity exponent over the vocabulary: weight (rank + topics) ** -zipf
    seed: int = 0
    format: str = "parquet"  # parquet (columns set: int64, id: int32) | edges (set<TAB>id lines)

    def __post_init__(self):
        def need(ok, field, expected, got):
            if not ok:
                raise ValueError(f"synth: {field} must be {expected}, got {got}")

        need(self.ids >= 8, "ids", ">= 8", self.ids)
        need(self.links >= 1, "links", ">= 1", self.links)
        need(1 <= self.topics <= self.ids, "topics", f"in [1, ids = {self.ids}]", self.topics)
        need(1 <= self.topics_per_set <= self.topics, "topics_per_set", f"in [1, topics = {self.topics}]",
             self.topics_per_set)
        need(2.0 <= self.mean_set_size <= self.ids / 4, "mean_set_size", f"in [2, ids / 4 = {self.ids / 4:g}]",
             self.mean_set_size)
        need(self.zipf >= 0 and math.isfinite(self.zipf), "zipf", "a finite number >= 0", self.zipf)
        need(self.seed >= 0, "seed", ">= 0", self.seed)
        need(self.format in SYNTH_FORMATS, "format", f"one of {SYNTH_FORMATS}", repr(self.format))

    def arguments(self) -> dict:
        """Everything the output depends on (not the path)."""
        args = {k: v for k, v in asdict(self).items() if k != "out"}
        return {**args, "mean_set_size": float(self.mean_set_size), "zipf": float(self.zipf)}  # 20 and 20.0: one file


def provenance(cfg: SynthConfig) -> dict:
    """What is recorded inside every generated file."""
    return {"synthetic": True, "generator": "superbloom synth", "version": __version__,
            "arguments": cfg.arguments(), "chunk_links": CHUNK_LINKS,
            "model": "Zipf-popular ids in latent topics; each set mixes 1..topics_per_set topics "
                     "(see superbloom/synth.py)"}


# ---------------------------------------------------------------- the planted structure (O(ids) tables)


@dataclass(frozen=True)
class Tables:
    topic_of: np.ndarray  # (ids,) int32: the planted topic of each id
    order: np.ndarray  # (ids,) int32: ids sorted by topic (within a topic by id)
    cum: np.ndarray  # (ids,) float64: cumulative weights of `order`
    guide: np.ndarray  # (ids + 3,) int64: guide[j] = first position with cum > j * cum[-1] / ids
    start: np.ndarray  # (topics,) int64: topic t is order[start[t]:end[t]]
    end: np.ndarray  # (topics,) int64
    topic_cum: np.ndarray  # (topics,) float64: cumulative topic masses


def planted_topics(cfg: SynthConfig) -> np.ndarray:
    """(ids,) int32: the topic of each id (a seeded permutation dealt round-robin)."""
    perm = np.random.default_rng([cfg.seed, 2**32 - 1]).permutation(cfg.ids)  # its own stream
    topic_of = np.empty(cfg.ids, np.int32)
    topic_of[perm] = np.arange(cfg.ids, dtype=np.int64) % cfg.topics
    return topic_of


def build_tables(cfg: SynthConfig) -> Tables:
    topic_of = planted_topics(cfg)
    weights = (np.arange(cfg.ids, dtype=np.float64) + cfg.topics) ** -cfg.zipf  # (ids,) Zipf-Mandelbrot by rank
    order = np.argsort(topic_of, kind="stable").astype(np.int32)  # (ids,)
    cum = np.cumsum(weights[order])  # (ids,)
    del weights
    cells = np.arange(cfg.ids + 3, dtype=np.float64) * (cum[-1] / cfg.ids)
    guide = np.searchsorted(cum, cells, side="right")  # (ids + 3,) sorted queries: fast
    sizes = np.bincount(topic_of, minlength=cfg.topics)
    end = np.cumsum(sizes)
    start = end - sizes
    return Tables(topic_of, order, cum, guide, start, end, cum[end - 1])  # topic_cum: cum at each topic's end


class TopicOracle:
    """A reference ranker that knows the generator: what a model that had learned every id's planted
    topic and popularity could reach, to read the models' recalls against (a planted-structure
    ceiling, not a strict bound: it knows which topics the CONTEXT ids belong to, not the set's own
    topic mix, which it estimates as the context's topic shares).

    For a context of ids (synthetic ids, -1 padding) it scores id i of topic t as
    share_t x weight_i / mass_t, the generator's chance of drawing i for the set if its topics were
    mixed in the context's proportions (each link picks one of the set's topics uniformly, then an id
    of that topic by weight), and returns the top k, context ids excluded. O(ids) tables; each query
    looks only at the heaviest `top` ids of its topics (weights fall with the id, so those are a
    topic's first ids)."""

    def __init__(self, cfg: SynthConfig, top: int = 64):
        topic_of = planted_topics(cfg)
        weights = (np.arange(cfg.ids, dtype=np.float64) + cfg.topics) ** -cfg.zipf
        mass = np.bincount(topic_of, weights, minlength=cfg.topics)  # (topics,)
        order = np.argsort(topic_of, kind="stable")  # by topic, then by id: heaviest first
        sizes = np.bincount(topic_of, minlength=cfg.topics)
        start = np.cumsum(sizes) - sizes
        cols = np.arange(top)
        pos = start[:, None] + cols[None, :]  # (topics, top)
        valid = cols[None, :] < sizes[:, None]
        self.top_ids = np.where(valid, order[np.minimum(pos, cfg.ids - 1)], -1)  # (topics, top)
        self.top_p = np.where(valid, weights[np.maximum(self.top_ids, 0)] / mass[:, None], -np.inf)
        self.topic_of, self.top = topic_of, top

    def rank(self, contexts: np.ndarray, k: int) -> np.ndarray:
        """(E, c) synthetic ids (-1: none) -> (E, k) ids best first (-1 where fewer could be ranked)."""
        contexts = np.asarray(contexts)
        if k + contexts.shape[1] > self.top:
            raise ValueError(f"TopicOracle(top={self.top}) ranks at most top - context length ids: k {k} + "
                             f"{contexts.shape[1]} context columns is more")
        out = np.full((len(contexts), k), -1, np.int64)
        for e, row in enumerate(contexts):
            ctx = row[row >= 0]
            if len(ctx) == 0:
                continue
            topics, counts = np.unique(self.topic_of[ctx], return_counts=True)
            ids = self.top_ids[topics].ravel()  # each id is in one topic: no repeats
            score = (counts[:, None] / len(ctx) * self.top_p[topics]).ravel()
            keep = (ids >= 0) & ~np.isin(ids, ctx)
            ids, score = ids[keep], score[keep]
            best = np.lexsort((ids, -score))[:k]  # ties: the smaller (more popular) id first
            out[e, :len(best)] = ids[best]
        return out


def _search(t: Tables, x: np.ndarray) -> np.ndarray:
    """(n,) points in [0, cum[-1]) -> (n,) first positions p with cum[p] > x: `searchsorted(cum, x, 'right')`
    by the guide table (the answer lies in [guide[j], guide[j + 1]] for j = the cell of x; one cell more
    each side against rounding) and a vectorised binary search over those few candidates; a plain
    searchsorted on millions of ids misses the cache at every one of its ~23 steps."""
    j = np.clip((x * (len(t.cum) / t.cum[-1])).astype(np.int64), 0, len(t.cum))
    lo, hi = t.guide[np.maximum(j - 1, 0)], t.guide[j + 2]  # (n,)
    todo = np.flatnonzero(lo < hi)
    while len(todo):
        a, b = lo[todo], hi[todo]
        mid = (a + b) >> 1
        right = t.cum[mid] <= x[todo]
        a = np.where(right, mid + 1, a)
        b = np.where(right, b, mid)
        lo[todo], hi[todo] = a, b
        todo = todo[a < b]
    return lo


def _draw_in_topics(t: Tables, topic: np.ndarray, u: np.ndarray) -> np.ndarray:
    """(n,) topics, (n,) uniforms in [0, 1) -> (n,) ids, each by its topic's weights (inverse CDF)."""
    first, last = t.start[topic], t.end[topic] - 1
    lo = np.where(first > 0, t.cum[first - 1], 0.0)
    pos = _search(t, lo + u * (t.cum[last] - lo))
    return t.order[np.clip(pos, first, last)]  # clip: float rounding at a topic's edges


def _first_seen(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n,) int64 keys >= 0 -> (positions whose key occurred earlier, sorted; the distinct keys, sorted)."""
    n = len(keys)
    if n == 0:
        return np.zeros(0, np.int64), keys
    if int(keys.max()) < 2**62 // n:  # one plain sort of key * n + position (faster than a stable argsort)
        s = np.sort(keys * n + np.arange(n))
        s_key, s_pos = s // n, s % n
    else:
        s_pos = np.argsort(keys, kind="stable")
        s_key = keys[s_pos]
    again = np.zeros(n, bool)
    again[1:] = s_key[1:] == s_key[:-1]
    return np.sort(s_pos[again]), s_key[~again]


def make_chunk(cfg: SynthConfig, t: Tables, chunk: int, remaining: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Chunk `chunk` of sets, truncated to at most `remaining` links.
    -> (set_of (n,) int64 local set numbers 0.., id_of (n,) int32, number of sets)."""
    rng = np.random.default_rng([cfg.seed, chunk])
    n_sets = max(1, CHUNK_LINKS // math.ceil(cfg.mean_set_size))
    if cfg.mean_set_size > 2:
        sizes = 1 + rng.geometric(1.0 / (cfg.mean_set_size - 1.0), n_sets)  # (S,) support >= 2, mean as asked
    else:
        sizes = np.full(n_sets, 2, np.int64)
    sizes = np.minimum(sizes, cfg.ids // 2)
    ends = np.cumsum(sizes)
    if ends[-1] >= remaining:  # the last chunk: keep sets until `remaining`, truncate the last
        n_sets = int(np.searchsorted(ends, remaining)) + 1
        sizes = sizes[:n_sets].copy()
        sizes[-1] -= int(ends[n_sets - 1]) - remaining
    k = rng.integers(1, cfg.topics_per_set + 1, n_sets)  # (S,) topics in each set
    set_topics = np.searchsorted(t.topic_cum, rng.random((n_sets, cfg.topics_per_set)) * t.topic_cum[-1],
                                 side="right")  # (S, T) by topic mass (a small table: no guide needed)
    set_topics = np.minimum(set_topics, cfg.topics - 1)
    set_of = np.repeat(np.arange(n_sets, dtype=np.int64), sizes)  # (n,)
    which = (rng.random(len(set_of)) * k[set_of]).astype(np.int64)  # (n,) one of the set's k topics
    topic = set_topics[set_of, which]  # (n,)
    id_of = _draw_in_topics(t, topic, rng.random(len(set_of))).astype(np.int64)  # (n,)
    key = set_of * cfg.ids  # (n,) + id: the link's (set, id) key
    idx, first = _first_seen(key + id_of)  # repeated links; the distinct keys, sorted
    kept = [first]
    rounds = 0
    while len(idx):  # redraw the repeats; check them against the kept keys and each other
        u = rng.random(len(idx))
        if rounds < _TOPIC_ROUNDS:
            id_of[idx] = _draw_in_topics(t, topic[idx], u)
        elif rounds < _TOPIC_ROUNDS + _POPULAR_ROUNDS:  # the topics are too small for the set
            id_of[idx] = t.order[np.minimum(_search(t, u * t.cum[-1]), cfg.ids - 1)]
        else:
            id_of[idx] = (u * cfg.ids).astype(np.int64)
        rounds += 1
        new = key[idx] + id_of[idx]
        among, _ = _first_seen(new)
        bad = np.zeros(len(new), bool)
        bad[among] = True
        o = np.argsort(new)  # sorted queries: searchsorted then walks the kept keys in order (cache-friendly)
        for sorted_keys in kept:  # the first draws, then those accepted in each round (a few dozen at most)
            bad[o] |= sorted_keys[np.minimum(np.searchsorted(sorted_keys, new[o]), len(sorted_keys) - 1)] == new[o]
        if not bad.all():
            kept.append(np.sort(new[~bad]))
        idx = idx[bad]
    return set_of, id_of.astype(np.int32), n_sets


# ---------------------------------------------------------------- writing


def _codec(path: Path) -> str | None:
    try:
        return pa.Codec.detect(str(path)).name
    except (TypeError, ValueError, pa.ArrowInvalid):
        return None


class _ParquetSink:
    def __init__(self, path: Path, cfg: SynthConfig):
        import pyarrow.parquet as pq

        self.schema = pa.schema([("set", pa.int64()), ("id", pa.int32())],
                                metadata={METADATA_KEY: json.dumps(provenance(cfg), sort_keys=True),
                                          b"synthetic": b"true"})
        self.writer = pq.ParquetWriter(path, self.schema, compression="zstd")

    def write(self, sets: np.ndarray, ids: np.ndarray):
        self.writer.write_table(pa.table([pa.array(sets), pa.array(ids)], schema=self.schema),
                                row_group_size=len(sets))

    def close(self, summary: dict):
        self.writer.add_key_value_metadata({"superbloom.synth.summary": json.dumps(summary, sort_keys=True)})
        self.writer.close()


class _EdgesSink:
    def __init__(self, path: Path, cfg: SynthConfig, codec: str | None):
        import pyarrow.csv as pcsv

        self.pcsv = pcsv
        self.stream = pa.output_stream(str(path), compression=codec)
        self.stream.write(("# SYNTHETIC links (set<TAB>id), not real data: "
                           + json.dumps(provenance(cfg), sort_keys=True) + "\n").encode())
        self.options = pcsv.WriteOptions(include_header=False, delimiter="\t", quoting_style="none")

    def write(self, sets: np.ndarray, ids: np.ndarray):
        self.pcsv.write_csv(pa.table({"set": sets, "id": ids}), self.stream, self.options)

    def close(self, summary: dict):
        self.stream.close()


def synth(cfg: SynthConfig, progress: bool = True) -> dict:
    """Write `cfg.links` synthetic links to `cfg.out` (atomically: complete or absent) -> a summary."""
    target = claim(cfg.out, "links")  # before any work: a new file, or a links file of ours (storage/guarded.py)
    out = target.path
    t0 = time.time()
    tables = build_tables(cfg)
    drawn = np.zeros(cfg.ids, bool)  # (ids,) which ids occur
    written, n_sets, chunk = 0, 0, 0
    with target.writing() as tmp, progress_bar(total=cfg.links, unit="link", unit_scale=True, progress=progress,
                                               desc="synth") as bar:
        sink = _ParquetSink(tmp, cfg) if cfg.format == "parquet" else _EdgesSink(tmp, cfg, _codec(out))
        try:
            while written < cfg.links:
                set_of, id_of, s = make_chunk(cfg, tables, chunk, cfg.links - written)
                sink.write(set_of + n_sets, id_of)
                drawn[id_of] = True
                written += len(id_of)
                n_sets += s
                chunk += 1
                bar.update(len(id_of))
            seconds = time.time() - t0
            summary = {"synthetic": True, "out": str(out), "format": cfg.format, **cfg.arguments(),
                       "sets": n_sets, "ids_drawn": int(drawn.sum()), "mean_set_size_drawn": written / n_sets}
            sink.close({k: v for k, v in summary.items() if k != "out"})
        except BaseException:
            if cfg.format == "edges":
                sink.stream.close()
            else:
                sink.writer.close()
            raise
    summary.update(seconds=round(seconds, 3), links_per_s=round(written / max(seconds, 1e-9)))
    return summary


def read_provenance(path: str | Path) -> dict:
    """The generator's record inside a synthetic Parquet file ({} for any other file)."""
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    out = json.loads(meta[METADATA_KEY]) if METADATA_KEY in meta else {}
    summary = pq.ParquetFile(path).metadata.metadata.get(b"superbloom.synth.summary")
    if summary:
        out["summary"] = json.loads(summary)
    return out


def format_summary(s: dict) -> str:
    return (f"SYNTHETIC data (superbloom synth, seed {s['seed']}): {s['links']:,} links in {s['sets']:,} sets "
            f"(mean size {s['mean_set_size_drawn']:.1f}), {s['ids_drawn']:,} of {s['ids']:,} ids drawn, "
            f"{s['topics']:,} topics, 1..{s['topics_per_set']} per set, zipf {s['zipf']}; "
            f"{s['seconds']:.1f} s ({s['links_per_s']:,.0f} links/s)")
