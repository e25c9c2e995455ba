"""The set embeddings' losses: pure functions of tensors (plus the memory bank that NCA reads), each
tested against its direct formula in tests/test_losses.py.

- `alignment`, `uniformity` (Wang & Isola, "Understanding Contrastive Representation Learning
  through Alignment and Uniformity on the Hypersphere", ICML 2020) with the blog's views
  (`split_views`: "Simple Unsupervised Learning of Contextualized Bag-of-Word Representations":
  shuffle a set, split it at len // 2 into a left and a right half). No negative samples.
- `nca_loss`: Neighbourhood Component Analysis with leave-one-out (Goldberger et al. 2004; the
  blog's "Learning Local Neighborhoods With NCA"): a query's loss is -log of the softmax mass it
  puts on neighbours that share a label, itself excluded. Candidates are the other rows of the
  batch *and* a `MemoryBank` of momentum-updated embeddings of all training sets (Wu, Efros & Yu,
  "Improving Generalization via Scalable Neighborhood Component Analysis", ECCV 2018); bank rows
  are constants (no gradient), and the batch's own rows are excluded from the bank part.

Similarities are cosines of L2-normalised vectors divided by a temperature (Wu et al. use 0.05).
For unit vectors -||a - b||^2 = 2 a.b - 2, so the blog's softmax over negative squared distances
is the same family (its temperature is half of this one). Label smoothing (the softmax objective)
is heads/losses.py's.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD = -1  # padding id of a (B, n) batch of sets


# ------------------------------------------------------------------- alignment and uniformity


def alignment(x: torch.Tensor, y: torch.Tensor, alpha: float = 2.0) -> torch.Tensor:
    """Mean over pairs of ||x_i - y_i||^alpha of the L2-normalised rows. x, y: (B, d) -> scalar.

    alpha = 2 is the blog's `((H[:, 0] - H[:, 1])**2).sum(dim=1).mean()`."""
    if x.shape != y.shape or x.dim() != 2:
        raise ValueError(f"alignment needs two (B, d) tensors of one shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    x, y = F.normalize(x, dim=1), F.normalize(y, dim=1)
    return (x - y).norm(dim=1).pow(alpha).mean()


def uniformity(x: torch.Tensor, t: float = 2.0) -> torch.Tensor:
    """log mean over distinct pairs i < j of exp(-t ||x_i - x_j||^2), rows L2-normalised.
    x: (B, d) with B >= 2 -> scalar in [-4t, 0] (0: all rows equal, i.e. collapsed).

    Computed as logsumexp - log(pairs) from the Gram matrix (||a - b||^2 = 2 - 2 a.b for unit
    rows), which is stable where exp underflows and has a gradient where torch.pdist's double
    backward does not."""
    if x.dim() != 2 or x.shape[0] < 2:
        raise ValueError(f"uniformity needs a (B, d) tensor with B >= 2 rows, got {tuple(x.shape)}")
    x = F.normalize(x, dim=1)
    i, j = torch.triu_indices(len(x), len(x), offset=1, device=x.device)  # (2, P) distinct pairs
    sq = (2.0 - 2.0 * (x[i] * x[j]).sum(1)).clamp_min(0.0)  # (P,) squared distances
    return torch.logsumexp(-t * sq, dim=0) - math.log(len(sq))


class Views(NamedTuple):
    left: torch.Tensor  # (B, a) ids, PAD-padded: the first len // 2 ids of the shuffled set
    right: torch.Tensor  # (B, b) ids, PAD-padded: the other len - len // 2 ids
    valid: torch.Tensor  # (B,) bool: both halves non-empty (the set has >= 2 ids)


def split_views(sets: torch.Tensor, generator: torch.Generator | None = None) -> Views:
    """The blog's two views of a set: shuffle each set and split it at len // 2.

    sets: (B, n) int ids, PAD (-1) padding anywhere in a row. Vectorised: one random key per
    slot (padding keys +inf so it sorts last), one argsort per batch, two gathers. A set of one id
    has an empty left half (valid False): drop those rows before encoding, a fully padded set has
    no embedding."""
    if sets.dim() != 2:
        raise ValueError(f"sets must be (B, n) ids padded with {PAD}, got shape {tuple(sets.shape)}")
    real = sets != PAD  # (B, n)
    keys = torch.rand(sets.shape, generator=generator, device=sets.device).masked_fill(~real, float("inf"))
    shuffled = sets.gather(1, keys.argsort(dim=1))  # (B, n): real ids in random order, then padding
    size = real.sum(1)  # (B,)
    half = size // 2  # (B,) left size; right size = size - half
    wl, wr = int(half.max()) if len(sets) else 0, int((size - half).max()) if len(sets) else 0
    col_l = torch.arange(wl, device=sets.device)  # (a,)
    left = shuffled[:, :wl].masked_fill(col_l[None, :] >= half[:, None], PAD)  # (B, a)
    col_r = torch.arange(wr, device=sets.device)  # (b,)
    src = (half[:, None] + col_r[None, :]).clamp(max=max(sets.shape[1] - 1, 0))  # (B, b)
    right = shuffled.gather(1, src).masked_fill(col_r[None, :] >= (size - half)[:, None], PAD)  # (B, b)
    return Views(left, right, size >= 2)


# ------------------------------------------------------------------------------------- NCA


class MemoryBank(nn.Module):
    """L2-normalised embeddings of all N training sets and their labels (Wu et al. 2018, sec. 3.2).

    vectors (N, d) float and labels (N, L) bool (multi-hot: several labels per set allowed) are
    buffers, so they move with `.to(device)` and are saved in the state dict. `update` is the
    paper's momentum step v <- normalise(m v + (1 - m) f) for the rows of a batch.

    The step is *deferred*: `update` queues the new rows and `flush` writes them, which
    `nca_log_mass` does before it reads the bank (and a state dict, before it is saved). So an
    objective can compute its loss and update the bank in one forward call, then the loop calls
    backward: the bank the loss read is still the one autograd saved (an in-place write before
    backward would fail, and a copy of an N x d bank per step would cost N x d)."""

    def __init__(self, vectors: torch.Tensor, labels: torch.Tensor, momentum: float = 0.5):
        super().__init__()
        if vectors.dim() != 2 or labels.dim() != 2 or len(vectors) != len(labels):
            raise ValueError(f"bank needs vectors (N, d) and labels (N, L) with one N, got "
                             f"{tuple(vectors.shape)} and {tuple(labels.shape)}")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        self.momentum = momentum
        self.register_buffer("vectors", F.normalize(vectors.detach().float(), dim=1))
        self.register_buffer("labels", labels.bool())
        self._pending: list[tuple[torch.Tensor, torch.Tensor]] = []

    @classmethod
    def random(cls, labels: torch.Tensor, d: int, momentum: float = 0.5,
               generator: torch.Generator | None = None) -> "MemoryBank":
        """A bank of random unit vectors (the paper's start), one per row of labels (N, L)."""
        return cls(torch.randn(len(labels), d, generator=generator), labels, momentum)

    def __len__(self) -> int:
        return len(self.vectors)

    @torch.no_grad()
    def update(self, index: torch.Tensor, new: torch.Tensor) -> None:
        """Queue the momentum step for index (B,) distinct bank rows with new (B, d) embeddings
        (detached); applied by the next `flush`."""
        index = index.to(self.vectors.device)
        if len(torch.unique(index)) != len(index):
            raise ValueError("MemoryBank.update: index holds repeated rows; give each set once per batch")
        if new.shape != (len(index), self.vectors.shape[1]):
            raise ValueError(f"MemoryBank.update: new must be (B, d) = {(len(index), self.vectors.shape[1])}, "
                             f"got {tuple(new.shape)}")
        self._pending.append((index, new.detach().to(self.vectors).clone()))

    @torch.no_grad()
    def flush(self) -> None:
        """Apply the queued updates in order (call after the backward of the loss that read the bank)."""
        for index, new in self._pending:
            mixed = self.momentum * self.vectors[index] + (1.0 - self.momentum) * new
            self.vectors[index] = F.normalize(mixed, dim=1)
        self._pending.clear()

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        self.flush()
        super()._save_to_state_dict(destination, prefix, keep_vars)


def _positive_log_mass(scores: torch.Tensor, positive: torch.Tensor) -> torch.Tensor:
    """scores (B, C) logits, -inf where a candidate is excluded; positive (B, C) bool ->
    (B,) log of the softmax mass on the positive candidates (-inf where a row has none)."""
    return torch.logsumexp(scores.masked_fill(~positive, float("-inf")), dim=1) - torch.logsumexp(scores, dim=1)


def nca_log_mass(z: torch.Tensor, labels: torch.Tensor, bank: MemoryBank | None = None,
                 index: torch.Tensor | None = None, temperature: float = 0.05) -> torch.Tensor:
    """Per query, the log of the leave-one-out probability mass on same-label neighbours.

    z (B, d) embeddings of the batch (normalised here), labels (B, L) bool multi-hot. Candidates:
    the other batch rows (gradient flows both ways) and, if given, every bank row except the
    batch's own (`index` (B,) their bank rows), as constants. A neighbour is positive if it shares
    any label with the query. -> (B,), -inf for a query without any positive candidate."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    z = F.normalize(z, dim=1)
    labels = labels.bool()
    lab = labels.float()
    b = len(z)
    scores = (z @ z.T) / temperature  # (B, B)
    scores = scores.masked_fill(torch.eye(b, dtype=torch.bool, device=z.device), float("-inf"))  # self out
    positive = (lab @ lab.T) > 0  # (B, B)
    if bank is not None:
        if index is None:
            raise ValueError("nca_log_mass with a bank needs index: the bank rows of the batch's sets")
        bank.flush()  # the previous step's queued updates (its backward is done)
        bank_scores = (z @ bank.vectors.T) / temperature  # (B, N), no gradient into the bank
        own = torch.zeros(len(bank), dtype=torch.bool, device=z.device)
        own[index.to(z.device)] = True
        bank_scores = bank_scores.masked_fill(own[None, :], float("-inf"))
        scores = torch.cat([scores, bank_scores], dim=1)  # (B, B + N)
        positive = torch.cat([positive, (lab @ bank.labels.float().T) > 0], dim=1)
    return _positive_log_mass(scores, positive)


def nca_loss(z: torch.Tensor, labels: torch.Tensor, bank: MemoryBank | None = None,
             index: torch.Tensor | None = None, temperature: float = 0.05) -> torch.Tensor:
    """Mean of -log(positive mass) over the queries that have a positive candidate (a query whose
    labels no other candidate shares has no defined loss and is left out). Scalar; 0 with a graph
    if no query has a positive."""
    log_mass = nca_log_mass(z, labels, bank, index, temperature)
    ok = torch.isfinite(log_mass)
    if not bool(ok.any()):
        return z.sum() * 0.0
    return -log_mass[ok].mean()
