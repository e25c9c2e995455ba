"""The bigram term of text: p(w | left neighbour) + p(w | right neighbour), counted from adjacent tokens.

A text model's blank is predicted by its network and, in the hashed-hybrid head with term `bigram`,
by this term: the probability that w follows the blank's left neighbour plus the probability that w
precedes its right neighbour, both counted from the adjacent pairs of the training rows ([UNK] pairs
left out). It is the text protocol's bigram-context baseline (evaluation/text_protocol.py), stored as
one CSR matrix of 2N rows, so that the hashed hybrid's sparse machinery sums it unchanged:

    row a        (a < N)  p(b | a on the left),  the `keep` most likely b of each a
    row N + c             p(b | c on the right), the `keep` most likely b of each c

and a blank's context is the two rows [left, N + right] (-1 where the neighbour is masked, padding or
outside the row: hashed_hybrid.py's query_context). What it adds to a text model: docs/results.md.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from ..text.ngrams import UNK_ID

EPS = (1e-5, 1e-4, 1e-3, 1e-2)  # the term enters as log(1 + term / eps); the validation chooses eps


def adjacent_pairs(rows, n_ids: int) -> sp.csr_matrix:
    """(N, N) counts of token b right after token a within a training row (a SetArray of ordered
    rows), [UNK] pairs left out."""
    ids = np.asarray(rows.ids, np.int64)
    ends = np.zeros(len(ids), bool)
    ends[rows.offsets[1:][rows.lengths > 0] - 1] = True  # the last token of a row has no right neighbour
    a, b = ids[:-1], ids[1:]
    keep = ~ends[:-1] & (a != UNK_ID) & (b != UNK_ID)
    m = sp.csr_matrix((np.ones(int(keep.sum()), np.float32), (a[keep], b[keep])), shape=(n_ids, n_ids))
    m.sum_duplicates()
    return m


def conditional(m: sp.csr_matrix, keep: int) -> sp.csr_matrix:
    """Counts (N, N) -> p(column | row), each row cut to its `keep` most likely columns (the rest of a
    row's mass is too small to reach a top-20 next to them; it keeps the ranking of frequent
    neighbours such as `the` cheap)."""
    tot = np.asarray(m.sum(1)).ravel()
    lengths = np.diff(m.indptr)
    row = np.repeat(np.arange(m.shape[0]), lengths)
    p = m.data / np.repeat(np.maximum(tot, 1), lengths)
    order = np.lexsort((m.indices, -p, row))  # by row, most likely first
    rank = np.arange(len(order)) - m.indptr[row[order]]
    sel = order[rank < keep]
    return sp.csr_matrix((p[sel].astype(np.float32), (row[sel], m.indices[sel])), shape=m.shape)


def bigram_pattern(rows, n_ids: int, keep: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The bigram term of the training rows -> (indptr (2N + 1,) int64, cols int32, values float32):
    rows 0..N-1 p(b | left a), rows N..2N-1 p(b | right c) (module docstring), each sorted by id."""
    after = adjacent_pairs(rows, n_ids)  # [a, b]: b follows a
    both = sp.vstack([conditional(after, keep), conditional(after.T.tocsr(), keep)]).tocsr()
    both.sort_indices()
    return both.indptr.astype(np.int64), both.indices.astype(np.int32), both.data.astype(np.float32)


def neighbour_context(elems, elements, n_ids: int):
    """Each blank's two term rows: elems (B, n) element ids of a batch (special elements < 0), elements
    (U,) flat indices b * n + i of the blanks -> (U, 2) int64 [left id, N + right id], -1 where that
    neighbour is not a known token (masked, padding, outside the row)."""
    n = elems.shape[1]
    row, col = elements // n, elements % n
    left = torch.where(col > 0, elems[row, (col - 1).clamp(min=0)], -1)
    right = torch.where(col < n - 1, elems[row, (col + 1).clamp(max=n - 1)], -1)
    left = torch.where(left >= 0, left, -1)
    right = torch.where(right >= 0, right + n_ids, -1)
    return torch.stack([left, right], 1)
