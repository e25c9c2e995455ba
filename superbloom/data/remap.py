"""A prepared dataset's int ids mapped onto another vocabulary (a model's), by id string.

`train --resume` on data prepared after the model (e.g. fine-tuning a model grown by `superbloom
extend` on new links): `prepare` numbers ids by the new data's own training counts, so the same int
means another id in the model. `align_dataset` maps every split onto the model's vocabulary, in
memory (the dataset directory is not changed): training ids the model does not know are dropped
from their sets, held-out ones become -1 (unseen, as `prepare` marks them), and both are counted
and reported, never silently lost. Vectorised: one Arrow `index_in` over the vocabulary, then one
NumPy gather per split.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .dataset import Dataset, SetArray
from .vocab import Vocab


def vocabulary_map(source: Vocab, target: Vocab) -> np.ndarray:
    """(len(source),) int64: the target id of each source id (by exact string), -1 where target lacks it."""
    idx = pc.index_in(pa.array(source.strings, pa.large_string()), value_set=pa.array(target.strings, pa.large_string()))
    return idx.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)


def _drop_unknown(sets: SetArray, ids: np.ndarray) -> SetArray:
    """Sets with the ids mapped to -1 removed (offsets recomputed)."""
    keep = ids >= 0
    row = np.repeat(np.arange(len(sets)), sets.lengths)
    lengths = np.bincount(row[keep], minlength=len(sets))
    offsets = np.zeros(len(sets) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return SetArray(offsets, ids[keep].astype(np.int32))


def align_dataset(data: Dataset, vocab: Vocab) -> dict | None:
    """Map `data` (in place) onto `vocab`'s ids; None when its vocabulary already is `vocab`.
    -> a summary: ids and training links the model does not know (dropped), held-out links made -1."""
    if data.vocab.strings == vocab.strings:
        return None
    if data.split != "sets":
        raise ValueError(f"{data.path}: its vocabulary differs from the model's, and only a set dataset "
                         f"(not {data.split!r}) can be mapped onto it; prepare it from the same vocabulary")
    to_model = vocabulary_map(data.vocab, vocab)
    train_ids = to_model[np.asarray(data.train.ids, np.int64)]
    unknown = to_model < 0
    summary = {"dataset_ids": len(data.vocab), "model_ids": len(vocab), "unknown_ids": int(unknown.sum()),
               "unknown_first": [data.vocab.strings[i] for i in np.flatnonzero(unknown)[:5].tolist()],
               "train_links_dropped": int((train_ids < 0).sum()), "train_links": int(len(train_ids))}
    data.train = _drop_unknown(data.train, train_ids)
    for name in ("test", "valid"):
        split = getattr(data, name)
        if split is not None:
            ids = np.asarray(split.ids, np.int64)
            mapped = np.where(ids >= 0, to_model[np.maximum(ids, 0)], -1)
            summary[f"{name}_links_unknown"] = int(((ids >= 0) & (mapped < 0)).sum())
            setattr(data, name, SetArray(split.offsets, mapped.astype(np.int32)))
    data.counts = vocab.counts
    data.vocab = vocab  # replaces the cached property's value
    return summary


def format_alignment(s: dict) -> str:
    msg = (f"the dataset's vocabulary ({s['dataset_ids']:,} ids) is not the model's ({s['model_ids']:,} ids): "
           f"its ids were mapped onto the model's by string")
    if s["unknown_ids"]:
        msg += (f"; {s['unknown_ids']:,} ids the model does not know ({', '.join(s['unknown_first'])}"
                f"{', ...' if s['unknown_ids'] > 5 else ''}) were dropped from training "
                f"({s['train_links_dropped']:,} of {s['train_links']:,} links): add them with `superbloom extend` first")
    return msg
