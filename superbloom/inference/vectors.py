"""Item vectors of a trained id model: one vector per id, its cosine neighbours, and export to NumPy
`.npy` or Parquet (`superbloom vectors MODEL --out FILE`, `Predictor.similar`).

An id's vector is the **mean of its m input token embeddings**, as the encoder's input layer sees
the id: the hashed token rows, plus the dynamic embedding of the id's string for a model with
ModelConfig.dynamic (model/embeddings.py). Every id model has it, whatever its head. For the
superbloom head, and the full head with identity hashing, the input table is tied to the output
embedding, so these are also the id's output rows (their mean); an untied full head's own output
rows are not used.

    vecs = item_vectors(model, hashing)            # (N, d) float32, row i = vocab id i
    rows, cos = nearest(vecs, [i], k=10)           # (1, k) the most similar ids (cosine), i excluded
    target = claim_vectors("vecs.parquet")          # before any work: a new file or one of ours, a known type
    save_vectors(target, vecs, vocab.strings); load_vectors("vecs.parquet")

The file goes through the guarded writer (storage/guarded.py): a user's file, a folder or a device is
refused before any work, and the file is written beside its name and renamed into place when complete.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..hashing.bloom import BloomHash
from ..heads.dot_topk import table_topk
from ..model.encoder import SetModel
from ..storage.guarded import Target, claim

FORMATS = (".npy", ".parquet")


@torch.no_grad()
def item_vectors(model: SetModel, hashing: BloomHash, chunk: int = 1 << 16) -> np.ndarray:
    """(N, d) float32: the mean of each id's m input token embeddings (module docstring), `chunk`
    ids at a time."""
    enc = model.encoder
    device = next(model.parameters()).device
    parts = []
    for a in range(0, hashing.n_ids, chunk):
        tokens = torch.from_numpy(hashing.tokens(np.arange(a, min(a + chunk, hashing.n_ids))).astype(np.int64))
        tokens = tokens.to(device)  # (n, m)
        x = enc.embed(tokens)  # (n, m, d)
        if enc.dynamic is not None:
            x = x + enc.dynamic(tokens)
        parts.append(x.mean(1).float().cpu().numpy())
    return np.concatenate(parts) if parts else np.zeros((0, enc.cfg.d), np.float32)


def normalized(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero)."""
    norm = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norm, 1e-12)).astype(np.float32)


def nearest(unit: np.ndarray, ids: Sequence[int], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k rows of largest cosine with each row of `ids`, itself excluded; `unit` (N, d) from
    `normalized` -> rows (Q, k) int64 (-1 past N - 1), cosines (Q, k) float32. Exact (dot_topk.py)."""
    ids = np.asarray(ids, np.int64)
    return table_topk(unit[ids], unit, ids[:, None], k)


def claim_vectors(path: str | Path, flag: str = "--out") -> Target:
    """The checked output of save_vectors, before any work: a known file type (FORMATS) and, through the
    guarded writer, a new file or an item-vectors file of ours -> its Target; ValueError (OutputError)
    naming `flag` otherwise."""
    target = claim(path, "item-vectors", flag)
    if target.path.suffix not in FORMATS:
        raise ValueError(f"{flag} {path}: unknown vector file type {target.path.suffix!r}; expected one of "
                         f"{', '.join(FORMATS)}")
    return target


def save_vectors(path: str | Path | Target, vectors: np.ndarray, strings: Sequence[str]) -> Path:
    """Write (N, d) vectors: `.npy` (the matrix alone; row i is the model's vocabulary id i, its
    vocab file gives the strings) or `.parquet` (columns id: string, vector: fixed-size list of d
    float32); `path` claimed here unless it is claim_vectors' Target already -> the file written."""
    target = path if isinstance(path, Target) else claim_vectors(path)
    with target.writing() as tmp:
        if target.path.suffix == ".npy":
            with open(tmp, "wb") as f:  # np.save on a path would append .npy to the temporary name
                np.save(f, np.asarray(vectors, np.float32))
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            n, d = vectors.shape
            flat = pa.array(np.ascontiguousarray(vectors, np.float32).reshape(-1))
            table = pa.table({"id": pa.array(list(strings[:n]) if n else [], pa.string()),
                              "vector": pa.FixedSizeListArray.from_arrays(flat, d)})
            pq.write_table(table, tmp)
    return target.path


def load_vectors(path: str | Path) -> tuple[np.ndarray, list[str] | None]:
    """Read what save_vectors wrote -> (vectors (N, d) float32, id strings, or None for `.npy`)."""
    path = Path(path)
    if path.suffix == ".npy":
        return np.load(path, allow_pickle=False), None
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        col = table.column("vector").combine_chunks()
        d = col.type.list_size
        vecs = col.flatten().to_numpy(zero_copy_only=False).astype(np.float32).reshape(-1, d)
        return vecs, table.column("id").to_pylist()
    raise ValueError(f"{path}: unknown vector file type {path.suffix!r}; expected one of {', '.join(FORMATS)}")
