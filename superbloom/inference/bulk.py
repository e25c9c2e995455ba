"""Bulk recommendations: a file of contexts -> a Parquet file of top-k ids, streamed in batches
(`superbloom predict MODEL --input contexts.jsonl --out recs.parquet`).

    stats = bulk_predict(predictor, "contexts.jsonl", "recs.parquet", k=10)   # -> BulkStats

Input, one context per row:
  .jsonl (or .jsonl.gz)  {"context": ["Copenhagen", "Paris"], "id": "user-1"}; "id" is optional
  .parquet               a list-of-strings column (`context_column`, default "context") and an
                         optional key column (`key_column`, default "id", used when present)
A row without a key is keyed by its row number (0-based). Output: one row per recommended id,
columns key (string), rank (int32, 1 = best), id (string), score (float64, gamma), exact (bool:
the row's top-k is certified exact). A context with none of its ids in the vocabulary gets no rows;
it is counted (`BulkStats.skipped`) and its first keys named. Memory: one batch of contexts and
of answers at a time (Predictor.predict_batches).

The output goes through the guarded writer (storage/guarded.py): it must be a new file or one of ours
(a user's file, a folder or a device is refused before any work), is written beside its name and
renamed into place when complete, so a failure or a kill leaves the earlier file (if any) as it was.
"""
from __future__ import annotations

import gzip
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from .._log import progress_bar

from ..heads.decode_config import DecodeConfig
from ..storage.guarded import claim
from ..storage.files import json_loads
from ..storage.loading import text_lines

INPUTS = (".jsonl", ".jsonl.gz", ".parquet")


@dataclass
class BulkStats:
    contexts: int = 0  # rows read
    rows: int = 0  # recommendation rows written
    skipped: int = 0  # contexts with no id in the vocabulary (no rows written)
    skipped_keys: list[str] = field(default_factory=list)  # the first 5 of them
    exact: int = 0  # contexts whose top-k is certified exact
    seconds: float = 0.0

    @property
    def per_second(self) -> float:
        return self.contexts / max(self.seconds, 1e-9)

    def summary(self) -> str:
        skipped = (f"; {self.skipped:,} with no known id skipped (first: {', '.join(self.skipped_keys)})"
                   if self.skipped else "")
        return (f"{self.contexts:,} contexts in {self.seconds:.1f} s ({self.per_second:,.1f} contexts/s), "
                f"{self.rows:,} rows written, {self.exact:,} certified exact{skipped}")


def _suffix(path: Path) -> str:
    return ".jsonl.gz" if path.name.endswith(".jsonl.gz") else path.suffix


def count_rows(path: str | Path) -> int | None:
    """Rows of a Parquet input (from its footer), None for JSONL (not known without reading it)."""
    path = Path(path)
    if _suffix(path) != ".parquet":
        return None
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


def read_contexts(path: str | Path, context_column: str = "context", key_column: str = "id",
                  batch_rows: int = 4096) -> Iterator[tuple[str, list[str]]]:
    """(key, context ids) for every row of a JSONL or Parquet file (module docstring). Bad input is a
    ValueError naming the file, the line (JSONL) or column (Parquet), and what was expected."""
    path = Path(path)
    kind = _suffix(path)
    if kind not in INPUTS:
        raise ValueError(f"{path}: unknown contexts file type {kind!r}; expected one of {', '.join(INPUTS)}")
    if kind == ".parquet":
        yield from _read_parquet(path, context_column, key_column, batch_rows)
        return
    opener = gzip.open if kind == ".jsonl.gz" else open
    row = 0
    with opener(path, "rt", encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json_loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{line_no}: not valid JSON ({e.msg}); expected one object per line "
                                 f'like {{"{context_column}": ["a", "b"], "{key_column}": "key"}}') from None
            ctx = obj.get(context_column) if isinstance(obj, dict) else None
            if not isinstance(ctx, list) or not all(isinstance(x, str) for x in ctx):
                raise ValueError(f"{path}:{line_no}: field {context_column!r} must be a list of string ids")
            key = obj.get(key_column)
            yield (str(row) if key is None else str(key)), ctx
            row += 1


def _read_parquet(path: Path, context_column: str, key_column: str, batch_rows: int):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise ValueError(f"{path}: not a readable Parquet file ({e})") from None
    names = pf.schema_arrow.names
    if context_column not in names:
        raise ValueError(f"{path}: no column {context_column!r} (columns: {', '.join(names)}); "
                         f"name the list-of-ids column with --context-column")
    typ = pf.schema_arrow.field(context_column).type
    if not (pa.types.is_list(typ) or pa.types.is_large_list(typ)) or not (
            pa.types.is_string(typ.value_type) or pa.types.is_large_string(typ.value_type)
            or pa.types.is_integer(typ.value_type) or pa.types.is_null(typ.value_type)):  # ids are strings (or numbers)
        raise ValueError(f"{path}: column {context_column!r} is {typ}, expected a list of string ids")
    columns = [context_column] + ([key_column] if key_column in names else [])
    row = 0
    for batch in pf.iter_batches(batch_size=batch_rows, columns=columns):
        ctxs = batch.column(context_column).to_pylist()
        keys = batch.column(key_column).to_pylist() if key_column in names else [None] * len(ctxs)
        for key, ctx in zip(keys, ctxs):
            yield (str(row) if key is None else str(key)), [str(x) for x in (ctx or []) if x is not None]
            row += 1


def read_ids(path: str | Path) -> list[str]:
    """An allow- or deny-list file: one id per line (surrounding whitespace stripped, blank lines skipped)."""
    return [line.strip() for line in text_lines(path, "one id per line") if line.strip()]  # one line if not UTF-8


class RecommendationWriter:
    """Appends recommendation rows (key, rank, id, score, exact) to one Parquet file, a batch at a time."""

    def __init__(self, path: str | Path):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.pa, self.path = pa, Path(path)
        self.schema = pa.schema([("key", pa.string()), ("rank", pa.int32()), ("id", pa.string()),
                                 ("score", pa.float64()), ("exact", pa.bool_())])
        self.writer = pq.ParquetWriter(self.path, self.schema)

    def write(self, keys: list[str], predictions) -> int:
        """Rows of one batch of Predictions (inference/predictor.py) -> rows written."""
        cols: dict[str, list] = {"key": [], "rank": [], "id": [], "score": [], "exact": []}
        for key, pred in zip(keys, predictions):
            for r, (i, s) in enumerate(pred.items, 1):
                cols["key"].append(key)
                cols["rank"].append(r)
                cols["id"].append(i)
                cols["score"].append(s)
                cols["exact"].append(pred.exact)
        self.writer.write_table(self.pa.table(cols, schema=self.schema))
        return len(cols["key"])

    def close(self) -> None:
        self.writer.close()


def bulk_predict(predictor, contexts_path: str | Path, output: str | Path, k: int = 10,
                 decode: DecodeConfig = DecodeConfig(), allow: Iterable[str] | None = None,
                 deny: Iterable[str] | None = None, context_column: str = "context", key_column: str = "id",
                 batch_size: int = 256, progress: bool = False, exclude_seen: bool = True) -> BulkStats:
    """Top-k ids for every context of `contexts_path`, written to the Parquet file `output`
    (module docstring; OutputError before any work if `output` may not be written); `predictor` is an
    inference.Predictor; exclude_seen=False lets a context's own ids be recommended. -> BulkStats."""
    target = claim_output(output)
    with target.writing() as tmp:
        stats = _predict_into(predictor, contexts_path, tmp, k, decode, allow, deny, context_column, key_column,
                              batch_size, progress, exclude_seen)
    return stats


def claim_output(output: str | Path, flag: str = "--out"):
    """The checked output of bulk_predict (storage/guarded.claim: a new file, or a recommendations file of
    ours) -> its Target; OutputError (one line naming `flag`) otherwise, before any work."""
    return claim(output, "recommendations", flag)


def _predict_into(predictor, contexts_path, output: Path, k, decode, allow, deny, context_column, key_column,
                  batch_size, progress, exclude_seen) -> BulkStats:
    stats, start = BulkStats(), time.perf_counter()
    keys: list[str] = []

    def contexts():
        for key, ctx in read_contexts(contexts_path, context_column, key_column):
            keys.append(key)
            yield ctx

    writer = RecommendationWriter(output)
    try:
        bar = progress_bar(total=count_rows(contexts_path), unit="contexts", desc="predict", progress=progress)
        for preds in predictor.predict_batches(contexts(), k, decode, allow, deny, batch_size, skip_empty=True,
                                               exclude_seen=exclude_seen):
            batch_keys, keys[:] = keys[:len(preds)], keys[len(preds):]
            stats.rows += writer.write(batch_keys, preds)
            stats.contexts += len(preds)
            stats.exact += sum(p.exact for p in preds)
            for key, p in zip(batch_keys, preds):
                if not p.context:
                    stats.skipped += 1
                    if len(stats.skipped_keys) < 5:
                        stats.skipped_keys.append(key)
            bar.update(len(preds))
        bar.close()
    finally:
        writer.close()
    stats.seconds = time.perf_counter() - start
    return stats
