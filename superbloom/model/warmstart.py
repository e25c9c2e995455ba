"""How a new model's token embedding starts: random (the paper) or from co-occurrence factors.

    auto          the default: cooccurrence for the masked set model and the next-item objective up to
                  COOC_INIT_MAX_IDS ids, else normal
    normal        N(0, 0.02) rows, as BERT and the paper
    cooccurrence  each id's row of a rank-d factorisation of the cosine co-occurrence matrix of the
                  training sets (coherent.cooccurrence_embeddings, the same factors the coherent
                  hash maps of appendix C are built from); a hashed token gets the normalised sum
                  of the rows of the ids in its bucket. Rows are scaled to the norm of the random
                  rows, so the rest of the model sees the scale it was initialised for.

Why: on sparse purchase sets (Beauty, 2-19 occurrences
for half the items) an item seen 5 times has barely moved from its random start after a few epochs,
so the tied softmax ranks it below every popular item; a start that already places every id near
the ids it co-occurs with gives the rare ids a sensible position from step 0. The embedding is
tied to the output layer (sec. 3.2), so this also starts the output rows.

Applied once, to a fresh run (a resumed run has its weights); ids absent from the training sets
(a zero factor row) and the special tokens keep their random rows.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from ..hashing.coherent import cooccurrence_embeddings
from ..data.dataset import SetArray
from ..hashing.bloom import BloomHash

# 'auto' uses the co-occurrence start up to this many ids: the factorisation holds a few (N, d + 16)
# float64 blocks (500K ids, d = 128: ~0.6 GB each); beyond, the random start
COOC_INIT_MAX_IDS = 500_000
SUM_ROWS = 1 << 20  # ids per chunk when the factor rows are summed into their hash buckets


def cooccurrence_init(embedding: nn.Embedding, hashing: BloomHash, sets: SetArray, n_ids: int,
                      seed: int = 0) -> dict:
    """Overwrite the id tokens' rows of `embedding` (n_tokens, d) in place -> a summary for the log."""
    weight = embedding.weight
    d = weight.shape[1]
    factors = cooccurrence_embeddings(sets, n_ids, rank=d, seed=seed)  # (N, r <= d) unit rows (or zero)
    if factors.shape[1] < d:  # fewer ids / sets than d: pad with zero columns
        factors = np.pad(factors, ((0, 0), (0, d - factors.shape[1])))
    acc = torch.zeros((hashing.n_tokens, d), dtype=torch.float64)  # (T, d) bucket sums
    for i in range(0, n_ids, SUM_ROWS):  # row chunks: at millions of ids a float64 (N, d) copy is gigabytes
        ids = np.arange(i, min(i + SUM_ROWS, n_ids))
        tokens = torch.from_numpy(hashing.tokens(ids).astype(np.int64))  # (n, m)
        rows_f = torch.from_numpy(factors[ids]).double()
        for j in range(tokens.shape[1]):
            acc.index_add_(0, tokens[:, j], rows_f)
    acc = acc.numpy()
    norm = np.linalg.norm(acc, axis=1)
    rows = np.flatnonzero(norm > 1e-12)  # tokens with at least one co-occurring id
    with torch.no_grad():
        scale = float(weight.norm(dim=1).mean())  # the random rows' typical norm
        new = torch.from_numpy(acc[rows] / norm[rows, None] * scale).to(weight.dtype)
        weight[torch.from_numpy(rows).to(weight.device)] = new.to(weight.device)
    return {"init": "cooccurrence", "rank": int(min(d, factors.shape[1])), "tokens_set": int(len(rows)),
            "tokens": int(hashing.n_tokens)}


def resolve_init(name: str, n_ids: int, auto: str = "normal") -> str:
    """The init to apply: `name`, or for 'auto' the objective's own choice `auto`
    (objectives.ObjectiveEntry.auto_init: 'cooccurrence' for the masked set model and next-item, 'normal'
    for the others, which nothing measured with the co-occurrence start), 'cooccurrence' only up to
    COOC_INIT_MAX_IDS ids."""
    if name != "auto":
        return name
    return "normal" if auto == "cooccurrence" and n_ids > COOC_INIT_MAX_IDS else auto


def initialise(name: str, model: nn.Module, hashing: BloomHash, sets: SetArray, n_ids: int, seed: int) -> dict | None:
    """Apply init `name` to a freshly built model (INITS). -> summary, or None for the random start."""
    if name not in INITS or INITS[name] is None:
        raise ValueError(f"unknown init {name!r}; choose one of {', '.join(sorted(INITS))}")
    return INITS[name](model, hashing, sets, n_ids, seed)


def _token_embedding(model: nn.Module) -> nn.Embedding:
    emb = getattr(getattr(model, "encoder", None), "embed", None)
    if not isinstance(emb, nn.Embedding):
        raise ValueError("init 'cooccurrence' needs a model whose input is a hashed token table "
                         f"(model.encoder.embed), got {type(emb).__name__}")
    return emb


INITS = {
    "auto": None,  # resolve_init: the objective's choice (cooccurrence for the masked set model up to
    # COOC_INIT_MAX_IDS ids), else normal
    "normal": lambda model, hashing, sets, n_ids, seed: None,
    "cooccurrence": lambda model, hashing, sets, n_ids, seed: cooccurrence_init(_token_embedding(model), hashing,
                                                                                sets, n_ids, seed),
}
