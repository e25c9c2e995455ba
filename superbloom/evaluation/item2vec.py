"""item2vec (Barkan & Koenigstein, 2016): word2vec over the training sets, each set a sentence whose
ids are shuffled (a set has no order), as a baseline at millions of ids. Optional dependency gensim:
the [baselines] extra
(`pip install -e '.[baselines]'` from a clone, `pip install 'superbloom[baselines]'` from a wheel).

    base = Item2Vec(data.train, data.n_ids)                 # CBOW, d 64, window 50, 10 negatives, 5 epochs
    base = tuned_item2vec(data.train, data.n_ids)           # window and epochs chosen on held-out sets (tuning.py)
    top = base.rank(contexts, exclude, k)                   # (Q, k) ids

Training: gensim's Word2Vec, CBOW or skip-gram (`Item2VecConfig.sg`), every training set one
sentence, shuffled afresh on each pass (seeded by (seed, pass)); `window` 0 makes the window the
longest training set and `shrink_windows=False` keeps it whole (gensim's default draws each position's
window from 1..window), so that every id's context covers its whole set (gensim truncates sentences
at 10,000 ids). With one worker and a fixed seed the vectors are a function of the data and the config.
Scoring: the mean of the context ids' input vectors (wv.vectors) against the output layer of the
negative-sampling loss (syn1neg), the CBOW prediction itself; exact top-k by the chunked product of
dot_topk.py over the ids seen in training (an id never seen has no vector and is never ranked), ties
to the more popular id; context ids without a vector are skipped (none left: every score is 0, so the
most popular ids).

Memory (N ids seen, d 64): gensim's two N x d float32 layers and its vocabulary (a Python dict of N
ids, ~200 bytes each) while training: 2 x 1.36 GB + ~1 GB at 5.3M ids; kept afterwards: the two
layers (the output one in popularity order) and three N-arrays, ~2.9 GB. The corpus streams from
the memory-mapped training sets (one chunk of sets as Python lists at a time).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._extras import require_extra
from ..data.dataset import SetArray
from ..heads.dot_topk import excluded_rows, id_counts, popularity_table, table_topk
from .tuning import tuned

CHUNK_LINKS = 1 << 20  # links shuffled and handed to gensim at a time


@dataclass(frozen=True)
class Item2VecConfig:
    sg: bool = False  # False: CBOW (the issue-29 run), True: skip-gram
    dim: int = 64
    window: int = 50  # 0: the longest training set
    shrink_windows: bool = True  # gensim's default: each position's window drawn from 1..window
    negative: int = 10
    epochs: int = 5
    workers: int = 1  # gensim threads (more than 1: not reproducible)
    seed: int = 0


class ShuffledSets:
    """A restartable corpus for gensim: each pass yields every training set as a list of ids,
    shuffled within the set by a generator seeded with (seed, pass)."""

    def __init__(self, train: SetArray, seed: int):
        self.train, self.seed, self.passes = train, seed, 0

    def __iter__(self):
        rng = np.random.default_rng((self.seed, self.passes))
        self.passes += 1
        offsets = np.asarray(self.train.offsets)
        a = 0
        while a < len(self.train):
            b = max(a + 1, int(np.searchsorted(offsets, offsets[a] + CHUNK_LINKS, "right")) - 1)
            b = min(b, len(self.train))
            ids = np.asarray(self.train.ids[offsets[a]:offsets[b]])  # (n,)
            owner = np.repeat(np.arange(b - a), np.diff(offsets[a:b + 1]))  # (n,) set of each link
            ids = ids[np.lexsort((rng.random(len(ids)), owner))].tolist()  # shuffled within each set
            cuts = (offsets[a:b + 1] - offsets[a]).tolist()
            for s in range(b - a):
                yield ids[cuts[s]:cuts[s + 1]]
            a = b


class Item2Vec:
    """item2vec fitted on the training sets (module docstring)."""

    name = "item2vec"

    def __init__(self, train: SetArray, n_ids: int, config: Item2VecConfig = Item2VecConfig()):
        require_extra("baselines", "the item2vec baseline", ("gensim",))
        from gensim.models import Word2Vec
        self.config, self.n_ids = config, n_ids
        window = config.window or int(max(1, train.lengths.max(initial=1)))
        w2v = Word2Vec(sentences=ShuffledSets(train, config.seed), vector_size=config.dim, window=window,
                       min_count=1, sg=int(config.sg), hs=0, negative=config.negative, epochs=config.epochs,
                       workers=config.workers, seed=config.seed, sorted_vocab=1,
                       shrink_windows=config.shrink_windows)
        keys = np.asarray(w2v.wv.index_to_key, np.int64)  # (V,) our id of each gensim row
        self.gensim_row = np.full(n_ids, -1, np.int64)  # (N,) each id's input-layer row (-1: unseen)
        self.gensim_row[keys] = np.arange(len(keys))
        self.inputs = w2v.wv.vectors  # (V, d) float32
        counts = id_counts(train.ids, n_ids)
        self.seen, self.row_of = popularity_table(counts)  # (M,), (N,): table rows, most popular first
        self.outputs = np.ascontiguousarray(w2v.syn1neg[self.gensim_row[self.seen]])  # (M, d) output layer
        del w2v

    @classmethod
    def fit(cls, train: SetArray, n_ids: int) -> "Item2Vec":
        return cls(train, n_ids)

    def query_vectors(self, contexts: np.ndarray) -> np.ndarray:
        """(Q, c) context ids (-1 padded) -> (Q, d) the mean input vector of those with one (0 if none)."""
        rows = np.where(contexts >= 0, self.gensim_row[np.maximum(contexts, 0)], -1)  # (Q, c)
        q, col = np.nonzero(rows >= 0)
        per = np.bincount(q, minlength=len(contexts))  # (Q,) vectors averaged
        m = sp.csr_matrix(((1.0 / per[q]).astype(np.float32), (q, rows[q, col])),
                          shape=(len(contexts), len(self.inputs)))
        return np.asarray(m @ self.inputs, np.float32)

    def rank(self, contexts: np.ndarray, exclude: np.ndarray | None, k: int) -> np.ndarray:
        """Top-k ids (Q, k) for contexts (Q, c), never a context id nor an id of `exclude` (Q, X) (-1
        padded); -1 where fewer than k seen ids are left."""
        contexts = np.asarray(contexts, np.int64).reshape(len(contexts), -1)
        rows, _ = table_topk(self.query_vectors(contexts), self.outputs,
                             excluded_rows(self.row_of, contexts, exclude), k)
        return np.where(rows >= 0, self.seen[np.maximum(rows, 0)], -1)


# the settings `item2vec` tunes (tuning.py), the defaults first: more passes over small sets, and the
# whole set as the window, won on the shared set datasets (docs/results.md)
ITEM2VEC_AXES = [("epochs", [15, 30]), (("window", "shrink_windows"), [(0, False), (5, True)])]


def tuned_item2vec(train: SetArray, n_ids: int) -> Item2Vec:
    """item2vec with its window and epochs chosen on held-out training sets (tuning.py); `.chosen` says
    what was chosen and how."""
    base, chosen = tuned(Item2Vec, Item2VecConfig(), ITEM2VEC_AXES, train, n_ids)
    base.chosen = chosen
    return base
