"""The set-embedding model: the set encoder (model.py's SetEncoder over hashed ids) pooled into one
L2-normalised vector per set by `AttentionPool` (the blog's "attention with a learnable token"),
plus what its objectives need: a linear classifier head (softmax objective) and a memory bank of
every training set's vector (NCA, Wu et al. 2018).

    model = SetEmbedder(ModelConfig(d=64, layers=1), EmbedConfig(objective="nca"), hashing,
                        n_labels=15, bank_labels=labels)       # labels (N, L) bool of the bank rows
    z = model.embed(*set_tokens(elems, hashing))                # elems (B, n) ids, -1 padded -> (B, d)

Long sets at inference (`embed_sets`): a set of more than `max_len` ids is cut into near-equal
chunks of at most `max_len` ids, each chunk is embedded, and the set's vector is the normalised
mean of its chunk vectors. Attention costs O(n^2) per set, so a 5,000-word article would otherwise
cost 2,500x a 100-word one; training sees segments of `segment` ids anyway. Sets are batched in
length order so a batch carries little padding. Padding never changes a vector (masked with -inf
in the encoder and in the pool; tests/test_setembed_model.py).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from ..data.dataset import SetArray
from ..model.embeddings import DynamicIdInput, build_embedding
from ..hashing.bloom import PAD_ELEM, BloomHash
from .losses import MemoryBank
from ..model.encoder import ModelConfig, SetEncoder
from .objectives import objective
from .pool import AttentionPool
from .config import OBJECTIVES, SUPERVISED, EmbedConfig  # noqa: F401 (re-exported: callers import them here)


def set_tokens(elems: np.ndarray, hashing: BloomHash) -> tuple[torch.Tensor, torch.Tensor]:
    """elems (B, n) ids, -1 padded -> (tokens (B, n*m) int64, pad (B, n*m) bool)."""
    elems = np.asarray(elems, np.int64)
    tokens = hashing.encode(elems)  # (B, n*m), element-major
    pad = np.repeat(elems == PAD_ELEM, hashing.m, axis=1)  # (B, n*m)
    return torch.from_numpy(tokens), torch.from_numpy(pad)


class SetEmbedder(nn.Module):
    """Encoder + attention pool -> unit vector per set; a classifier (softmax objective) and a memory
    bank (nca objective) when the objective needs them (so they are in its checkpoints)."""

    def __init__(self, model_cfg: ModelConfig, cfg: EmbedConfig, hashing: BloomHash, n_labels: int = 0,
                 bank_labels: torch.Tensor | None = None, vocab=None):
        super().__init__()
        if model_cfg.positions:
            raise ValueError("a set embedding reads sets: position embeddings (positions > 0) are not supported")
        if model_cfg.d % cfg.pool_heads:
            raise ValueError(f"d={model_cfg.d} must be divisible by pool_heads={cfg.pool_heads}")
        self.model_cfg, self.cfg = model_cfg, cfg
        if model_cfg.dynamic and vocab is None:
            raise ValueError("this set embedding has the dynamic input (model.dynamic): build it with the id strings")
        dynamic = DynamicIdInput(hashing, vocab, model_cfg.d) if model_cfg.dynamic else None
        self.encoder = SetEncoder(model_cfg, build_embedding(model_cfg.embedding, hashing, model_cfg.d), hashing.m,
                                  dynamic)
        self.pool = AttentionPool(model_cfg.d, cfg.pool_heads)
        needs = objective(cfg.objective)
        self.classifier = nn.Linear(model_cfg.d, n_labels) if needs.classifier else None
        if needs.bank:
            if bank_labels is None:
                raise ValueError(f"the {cfg.objective} objective needs the labels of the memory bank's sets")
            self.bank = MemoryBank(torch.zeros(len(bank_labels), model_cfg.d), bank_labels, cfg.momentum)
        else:
            self.bank = None

    @property
    def d(self) -> int:
        return self.model_cfg.d

    def embed(self, tokens: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        """tokens, pad (B, T) -> (B, d) unit vectors. No row may be fully padded."""
        return self.pool(self.encoder(tokens, pad), pad)

    def logits(self, z: torch.Tensor) -> torch.Tensor:
        """(B, d) unit vectors -> (B, L) class logits (softmax objective)."""
        if self.classifier is None:
            raise ValueError(f"a model trained with the {self.cfg.objective} objective has no classifier head")
        return self.cfg.logit_scale * self.classifier(z)


def chunk_rows(lengths: np.ndarray, max_len: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut sets of the given lengths into near-equal chunks of <= max_len ids.

    -> (owner (C,) set of each chunk, start (C,) offset of the chunk within its set, size (C,)).
    A set of length 0 gets no chunk."""
    lengths = np.asarray(lengths, np.int64)
    n_chunks = np.where(lengths > 0, -(-lengths // max_len), 0)  # ceil
    owner = np.repeat(np.arange(len(lengths)), n_chunks)  # (C,)
    first = np.repeat(np.cumsum(n_chunks) - n_chunks, n_chunks)
    j = np.arange(len(owner)) - first  # chunk index within its set
    k, ln = n_chunks[owner], lengths[owner]
    start = (j * ln) // k
    size = ((j + 1) * ln) // k - start
    return owner, start, size


@torch.no_grad()
def embed_sets(model: SetEmbedder, hashing: BloomHash, sets: SetArray, rows: np.ndarray | None = None,
               max_len: int | None = None, batch_ids: int = 1 << 13) -> np.ndarray:
    """Vectors (R, d) float32 of the sets `rows` (default: all) of `sets`, in eval mode, on the
    model's device. Ids < 0 (unseen in training) are skipped; a set with no id left gets a zero
    vector (callers that need a vector for it must check). Batches hold about `batch_ids` ids."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    max_len = max_len or model.cfg.max_len
    rows = np.arange(len(sets)) if rows is None else np.asarray(rows, np.int64)
    ids = np.asarray(sets.ids)
    starts, lengths = np.asarray(sets.offsets)[rows], sets.lengths[rows]
    owner, start, size = chunk_rows(lengths, max_len)  # chunks over the selected rows
    out = np.zeros((len(rows), model.d), np.float32)
    sums = torch.zeros(len(rows), model.d, device=device)
    order = np.argsort(size, kind="stable")
    a = 0
    while a < len(order):
        guess = max(1, batch_ids // max(1, int(size[order[a]])))  # chunks of the shortest size that fit
        widest = int(size[order[min(len(order), a + guess) - 1]])  # sizes ascend: the batch's longest
        take = max(1, batch_ids // max(1, widest))
        c = order[a:a + take]
        w = int(size[c].max())
        col = np.arange(w)
        valid = col[None, :] < size[c, None]  # (b, w)
        flat = np.where(valid, starts[owner[c], None] + start[c, None] + col[None, :], 0)
        elems = np.where(valid, ids[flat], PAD_ELEM).astype(np.int64)  # (b, w); unseen ids are -1 = padding
        has = (elems >= 0).any(1)
        if has.any():
            tokens, pad = set_tokens(elems[has], hashing)
            z = model.embed(tokens.to(device), pad.to(device))  # (b', d)
            sums.index_add_(0, torch.from_numpy(owner[c][has]).to(device), z)
        a += take
    norms = sums.norm(dim=1, keepdim=True)
    out[:] = (sums / norms.clamp_min(1e-12)).cpu().numpy()
    model.train(was_training)
    return out
