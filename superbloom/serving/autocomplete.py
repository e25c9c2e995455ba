"""Autocomplete over a vocabulary's display names (serve's GET /v1/ids?prefix=...): a sorted Arrow
array of folded keys and two binary searches per prefix; for a memory-mapped vocabulary
(mapped_vocab.py) the sorted tables are cache files too, shared by serve's workers."""
from __future__ import annotations

from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..data.mapped_vocab import MappedStrings, mapped_table
from ..data.vocab import Vocab


def _fold(s: str) -> str:
    return s.replace("_", " ").lower()


def _bisect(keys: pa.Array, x: str) -> int:
    """First position in the sorted string array `keys` whose value is >= x."""
    lo, hi = 0, len(keys)
    while lo < hi:
        mid = (lo + hi) // 2
        if keys[mid].as_py() < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _inverse(order: np.ndarray) -> np.ndarray:
    """id -> sorted position, from sorted position -> id."""
    position = np.empty(len(order), np.int32)
    position[order] = np.arange(len(order), dtype=np.int32)
    return position


class PrefixIndex:
    """Autocomplete over display names (URL-decoded, '_' read as ' ', lower-cased).

    Built once with Arrow (a vectorised sort: seconds for millions of ids, no Python string per key
    kept); a prefix is two binary searches. Matches come back most frequent first: vocab ids are
    numbered by decreasing training count, so that is the smallest ids of the matching range, found
    by a partial sort of a small range or, for a large one, by scanning ids in order until `limit` hit.
    """

    SCAN = 1 << 15  # ranges longer than this are searched by scanning the most frequent ids first

    def __init__(self, vocab: Vocab):
        if isinstance(vocab.strings, MappedStrings):  # serve's workers share these tables (mapped_vocab.py)
            built = []  # the sort, done at most once when the cache files are (re)built

            def part(i: int):
                built or built.append(self._sorted(vocab))
                return built[0][i]
            self.order = mapped_table(vocab.strings, "vocab.prefix_order.npy", lambda: part(0))
            self.keys = mapped_table(vocab.strings, "vocab.prefix_keys.arrow", lambda: part(1))
            self.position = mapped_table(vocab.strings, "vocab.prefix_position.npy", lambda: _inverse(self.order))
        else:
            self.order, self.keys = self._sorted(vocab)
            self.position = _inverse(self.order)

    @staticmethod
    def _sorted(vocab: Vocab) -> tuple[np.ndarray, pa.Array]:
        """-> (sorted position -> id (N,) int32, the folded keys in sorted order)."""
        decoded = pa.array([unquote(s) if "%" in s else s for s in vocab.strings], pa.large_string())
        keys = pc.utf8_lower(pc.replace_substring(decoded, "_", " "))
        order = pc.sort_indices(keys).to_numpy().astype(np.int32)
        return order, keys.take(pa.array(order))

    def search(self, prefix: str, limit: int) -> np.ndarray:
        p = _fold(prefix)
        lo, hi = _bisect(self.keys, p), _bisect(self.keys, p + "\U0010ffff")
        if hi - lo <= self.SCAN:
            ids = self.order[lo:hi]
            return np.sort(np.partition(ids, limit - 1)[:limit] if len(ids) > limit else ids)
        found = []
        for start in range(0, len(self.order), self.SCAN):
            pos = self.position[start:start + self.SCAN]
            found.extend((np.flatnonzero((pos >= lo) & (pos < hi)) + start)[:limit - len(found)].tolist())
            if len(found) == limit:
                break
        return np.asarray(found, np.int64)
