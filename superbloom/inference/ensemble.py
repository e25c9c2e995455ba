"""Several trained models of the same ids ranked as one (issue 33: a seed ensemble as the hybrid's network).

    import superbloom as sb
    ens = sb.Ensemble.load(["runs/m0", "runs/m1", "runs/m2"])   # the same data, other seeds or recipes
    ens.choose_mix(val_contexts, val_targets)                     # the term's weight, on held-out examples
    ens.predict(["Jazz", "Miles_Davis"], k=10)                    # predict, predict_many, recommend, rank

score(j | context) = mean over the members of their network's log p_j (a product of experts: the mean
of the log-probabilities ranks as the product of the probabilities) + mix x the item-item term of the
first member with one (a hybrid head's chosen term and decay: heads/hybrid.py), summed over the context.
Every id is scored, so every answer is exact. The members must be models of one vocabulary whose heads
score every id (full, mixture, hybrid: HeadBase.network_scores); each reads the context through its own
hashing and encoder. `mix` defaults to the median of the hybrid members' own validated weights (0
without a hybrid member: the networks alone); `choose_mix` picks it from MIXES on held-out examples,
as the hybrid's validation does for one network.

Measured (benchmarks/results/quality.md, "Six networks beside EASE"): six networks + EASE lift
hybrid - term alone above 0 on Wikispeedia and Toys, where one network's hybrid ties its term.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from .predictor import Predictor
from ..heads.beam import DecodeConfig
from ..heads.config import MIXES
from ..heads.hybrid import term_alone
from ..heads.ranking import NEG_INF, Ranking, chunked_topk, exact_ranking, is_allowed
from ..model.sequence_batches import ordered_query_batch


class Ensemble(Predictor):
    """Predictor's predict / predict_many / recommend / rank over several models (module docstring)."""

    def __init__(self, members: Sequence[Predictor], mix: float | None = None, names: Sequence[str] = ()):
        if not members:
            raise ValueError("an ensemble needs at least one model")
        first = members[0]
        sample = np.linspace(0, len(first.vocab) - 1, min(1000, len(first.vocab))).astype(int).tolist()
        for i, m in enumerate(members[1:], 1):
            if len(m.vocab) != len(first.vocab) or any(m.vocab.strings[j] != first.vocab.strings[j] for j in sample):
                raise ValueError(f"model {names[i] if names else i}: its vocabulary ({len(m.vocab):,} ids) is not "
                                 f"the first model's ({len(first.vocab):,}); an ensemble's models share their ids")
        for i, m in enumerate(members):
            if m.model.head.network_scores(torch.zeros(1, 1, m.model.encoder.cfg.d, device=device_of(m))) is None:
                raise ValueError(f"model {names[i] if names else i}: its head ({m.config['head']['name']}) does "
                                 "not score every id; an ensemble needs full, mixture or hybrid heads")
        super().__init__(first.model, first.hashing, first.vocab, dict(first.config))
        self.members = list(members)
        self.term_alone = False  # variants(): the term's ranking alone
        probe = torch.full((1, 1), -1, dtype=torch.long)
        with_term = [m for m in members if m.model.head.term_scores(probe.to(device_of(m))) is not None]
        self.term_member = with_term[0] if with_term else None
        self.term_head = with_term[0].model.head if with_term else None
        self.term_device = device_of(with_term[0]) if with_term else None
        own = [float(m.model.head.describe().get("item_mix", 0.0)) for m in members]
        own = [w for w in own if w > 0]
        self.mix = float(mix) if mix is not None else (float(np.median(own)) if own and self.term_head else 0.0)
        if self.mix and self.term_head is None:
            raise ValueError(f"mix {self.mix:g}: no model of the ensemble has an item-item term (a hybrid head)")

    @classmethod
    def load(cls, model_dirs: Sequence[str | Path], mix: float | None = None, threads: int = 0,
             device: str = "auto", mmap: bool = True) -> "Ensemble":
        """The models of `model_dirs` (each as sb.load reads it) as one ensemble."""
        return cls([Predictor.load(d, threads, device, mmap) for d in model_dirs], mix, [str(d) for d in model_dirs])

    def info(self) -> dict:
        out = super().info()
        out.update(kind="ensemble", parameters=sum(m.n_parameters for m in self.members),
                   members=len(self.members), item_mix=self.mix)
        return out

    def variants(self) -> dict:
        """With a term weight: the networks alone (mix 0) and the term alone, on the same examples (evaluate)."""
        return {"network alone": self._as(0.0, False), "term alone": self._as(self.mix, True)} if self.mix else {}

    def describe_head(self) -> dict:
        return {"name": "ensemble", "members": len(self.members), "item_mix": self.mix,
                "term": self.term_head.describe() if self.term_head is not None else None}

    @contextlib.contextmanager
    def _as(self, mix: float, term_alone: bool):
        saved = self.mix, self.term_alone
        self.mix, self.term_alone = mix, term_alone
        try:
            yield self
        finally:
            self.mix, self.term_alone = saved

    @torch.no_grad()
    def scores(self, contexts: np.ndarray, mix: float | None = None) -> torch.Tensor:
        """(Q, c) context ids (-1 padded, oldest first) -> (Q, N) the ensemble's scores (module docstring)."""
        ctx = np.asarray(contexts, dtype=np.int64)
        parts = []
        for m in self.members:
            model = m.model.eval()
            qb = ordered_query_batch(ctx, m.hashing, model.encoder.cfg).to(device_of(m))
            parts.append(model.head.network_scores(model.target_hidden(qb)).float().cpu())
        out = torch.stack(parts).mean(0)
        w = self.mix if mix is None else mix
        if w:
            out += w * self.term_head.term_scores(torch.from_numpy(ctx).to(self.term_device)).float().cpu()
        return out

    @torch.no_grad()
    def rank(self, contexts: np.ndarray, k: int, decode: DecodeConfig = DecodeConfig(), batch_size: int = 256,
             progress: bool = False, exclude: np.ndarray | None = None, allow: np.ndarray | None = None,
             mix: float | None = None) -> Ranking:
        """Exact top-k ids for contexts (Q, c), never an id of exclude (Q, X) (None: the contexts), only
        ids of allow (A,) when given; `mix` overrides the ensemble's weight for this call."""
        if self.term_alone:  # the term member's own "term alone" ranking (heads/hybrid.py: ties by the smaller id)
            with term_alone(self.term_member.model.head):
                return self.term_member.rank(contexts, k, decode, batch_size, progress, exclude, allow)
        exclude = contexts if exclude is None else exclude
        allowed = None if allow is None else torch.from_numpy(np.unique(np.asarray(allow, np.int64)))
        n, parts = len(self.vocab), []
        for a in tqdm(range(0, len(contexts), batch_size), desc="ranking", disable=not progress, leave=False):
            s = self.scores(contexts[a:a + batch_size], mix)
            if allowed is not None:
                s = s.masked_fill(~is_allowed(torch.arange(n), allowed), NEG_INF)
            ex = torch.from_numpy(np.asarray(exclude[a:a + batch_size], np.int64))
            vals, ids = chunked_topk(lambda i, j: s[i:j], len(s), n, k, ex if ex.shape[1] else None, like=s)
            parts.append(exact_ranking(vals, ids, k, decode.score, torch.full((len(s),), n)))
        return Ranking.concat(parts) if parts else Ranking.empty(k)

    def choose_mix(self, contexts: np.ndarray, targets: np.ndarray, mixes: Sequence[float] = MIXES,
                   k: int = 10) -> dict[float, float]:
        """Set `mix` to the weight of `mixes` with the largest recall@k of `targets` (Q,) given `contexts`
        (Q, c) (held-out examples, never the test ones; ties: the smaller weight) -> {mix: recall@k}."""
        if self.term_head is None:
            raise ValueError("choose_mix: no model of the ensemble has an item-item term (a hybrid head)")
        targets = np.asarray(targets, np.int64)
        got = {float(w): float((self.rank(contexts, k, mix=w).ids.numpy() == targets[:, None]).any(1).mean())
               for w in mixes}
        self.mix = max(got, key=lambda w: (got[w], -w))
        return got


def device_of(member: Predictor) -> torch.device:
    return next(member.model.parameters()).device
