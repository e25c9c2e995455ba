"""Dynamic word embeddings: any string -> 64 "trits" -> a learned 64 x d projection (blog posts
"Dynamic Word Embeddings" and "Dynamic Contextualized Word Embeddings"; Projection Attention
Networks, EMNLP 2019 D19-1506; Efficient On-Device Models using Neural Projections, ICML 2019).

    token (str) --UTF-8, MD5--> 16 bytes = 128 bits --adjacent pairs--> 64 trits in {-1, 0, 1}
                --(64, d) projection (+ bias)--> embedding (d,)

Nothing is out of vocabulary: a word never seen in training still gets its trits and therefore an
embedding, and the table has 64 * d parameters whatever the vocabulary size (the blog's example:
5,000 words x 32 dims = 160K parameters for a full table, 64 x 32 = 2K here).

Bit order and pairing (stated, since the blog's snippet is ambiguous). The 128 bits are the MD5
digest read as one big-endian integer, most significant bit first: bit i is bit (7 - i % 8) of
digest byte i // 8 (numpy.unpackbits' default "big" order), which is exactly the binary string
`format(int(hexdigest, 16), "0128b")`. Trit k merges bits (2k, 2k+1):

    11 -> 1,   00 -> 0,   01 or 10 -> -1

so trit 0 comes from the two most significant bits of the first digest byte. (The blog's snippet
pads the bit string to 129 characters and pairs positions (0, 1), (2, 3), ... (126, 127) of that,
i.e. it shifts every pair by one bit and drops the last; we pair the 128 digest bits themselves.)
Each trit is 0 with probability 1/4, 1 with 1/4 and -1 with 1/2 over random strings.

`trits(strings)` hashes a batch (one hashlib call per string, unavoidable) and turns all digests
into trits at once: every byte indexes a (256, 4) table of its four trits, built once with
numpy.unpackbits (no Python loop per bit or per string after hashing); `TritVocab` caches the trits
of a vocabulary, so an id model can look them up by id; `DynamicEmbedding` projects trits, or ids
through a registered (N, 64) int8 buffer.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np
import torch
import torch.nn as nn

N_TRITS = 64  # 128 MD5 bits merged in pairs


def digests(strings: Iterable[str]) -> np.ndarray:
    """Strings -> their MD5 digests of the UTF-8 bytes, (N, 16) uint8."""
    blob = b"".join(hashlib.md5(s.encode("utf-8")).digest() for s in strings)
    return np.frombuffer(blob, np.uint8).reshape(-1, 16)


_PAIR = np.array([0, -1, -1, 1], np.int8)  # bit pair (hi, lo) -> trit, indexed by 2 * hi + lo
_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).reshape(256, 4, 2)  # MSB first
_BYTE = _PAIR[2 * _BITS[..., 0] + _BITS[..., 1]]  # (256, 4): the four trits of every byte value


def trits_from_digests(d: np.ndarray) -> np.ndarray:
    """(N, 16) uint8 digests -> (N, 64) int8 trits (bit order in the module docstring)."""
    d = np.asarray(d, np.uint8)
    return _BYTE[d].reshape(d.shape[0], N_TRITS)  # byte b -> trits 4b .. 4b+3


def trits(strings: Iterable[str]) -> np.ndarray:
    """Strings -> (N, 64) int8 trits in {-1, 0, 1}: 11 -> 1, 00 -> 0, 01/10 -> -1."""
    if isinstance(strings, str):
        raise TypeError("trits() takes a sequence of strings, got one str; wrap it: trits([s])")
    return trits_from_digests(digests(strings))


class TritVocab:
    """The trits of a fixed vocabulary, hashed once: id -> (64,) trits; new strings hash on demand.

    `vocab` is the id -> string list of a `vocab.py` vocabulary (or any sequence of strings)."""

    def __init__(self, vocab: Sequence[str]):
        self.strings = list(vocab)
        self.table = trits(self.strings)  # (N, 64) int8

    def __len__(self) -> int:
        return len(self.strings)

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """ids (...) -> (..., 64) int8."""
        return self.table[np.asarray(ids)]

    def extend(self, new: Sequence[str]) -> "TritVocab":
        """A vocabulary with `new` appended (ids len(self) ...), hashing only the new strings."""
        out = TritVocab.__new__(TritVocab)
        out.strings = self.strings + list(new)
        out.table = np.concatenate([self.table, trits(new)])
        return out


class DynamicEmbedding(nn.Module):
    """Trits (..., 64) -> (..., d) by a learned linear projection: 64 * d weights (+ d with bias).

    With `vocab` (a TritVocab, or a (N, 64) trit array) the module also embeds ids (..., ) through a
    registered (N, 64) int8 buffer: `forward(ids)` for integer input, `forward(trits)` for (..., 64)
    trits given as float (e.g. `embed_strings`). The buffer is not persistent (not in the state
    dict): it is rebuilt from the vocabulary, so a saved projection works for any vocabulary."""

    def __init__(self, d: int, vocab: TritVocab | np.ndarray | None = None, bias: bool = False):
        super().__init__()
        self.d = d
        self.proj = nn.Linear(N_TRITS, d, bias=bias)
        # A trit is 0 w.p. 1/4, +-1 otherwise: E[t^2] = 3/4, so std 1/sqrt(64 * 3/4) keeps unit scale.
        nn.init.normal_(self.proj.weight, std=(N_TRITS * 0.75) ** -0.5)
        if bias:
            nn.init.zeros_(self.proj.bias)
        table = vocab.table if isinstance(vocab, TritVocab) else vocab
        self.register_buffer("table", None if table is None else torch.as_tensor(np.asarray(table, np.int8)),
                             persistent=False)  # (N, 64) int8

    def set_vocab(self, vocab: TritVocab | np.ndarray) -> None:
        """Swap in another (e.g. extended) vocabulary; the projection is unchanged."""
        table = vocab.table if isinstance(vocab, TritVocab) else vocab
        self.table = torch.as_tensor(np.asarray(table, np.int8), device=self.proj.weight.device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.is_floating_point(x):  # ids (...) -> trits (..., 64)
            if self.table is None:
                raise ValueError("DynamicEmbedding got integer ids but has no vocabulary; build it with "
                                 "vocab=TritVocab(strings), or pass (..., 64) float trits")
            x = self.table[x]
        elif x.shape[-1] != N_TRITS:
            raise ValueError(f"DynamicEmbedding expects trits of shape (..., {N_TRITS}), got {tuple(x.shape)}")
        return self.proj(x.to(self.proj.weight.dtype))  # (..., d)

    def embed_strings(self, strings: Sequence[str]) -> torch.Tensor:
        """Any strings (in a vocabulary or not) -> (N, d)."""
        return self(torch.from_numpy(trits(strings)).to(self.proj.weight.device, self.proj.weight.dtype))
