"""Several trained models of the same ids ranked as one (a seed ensemble as the hybrid's network).

    import superbloom as sb
    ens = sb.Ensemble.load(["runs/m0", "runs/m1", "runs/m2"])   # the same data, other seeds or recipes
    ens.choose_mix(val_contexts, val_targets)                     # the term's weight, on held-out examples
    ens.predict(["Jazz", "Miles_Davis"], k=10)                    # predict, predict_many, recommend, rank

score(j | context) = mean over the members of their network's log p_j (a product of experts: the mean
of the log-probabilities ranks as the product of the probabilities) + mix x the item-item term of the
first member with one (a hybrid head's chosen term and decay: heads/hybrid.py), summed over the context.
Every id is scored, so every answer is exact. The members must be models of one vocabulary whose heads
score every id (full, hybrid: HeadBase.network_scores); each reads the context through its own
hashing and encoder. `mix` defaults to the median of the hybrid members' own validated weights (0
without a hybrid member: the networks alone); `choose_mix` picks it from MIXES on held-out examples,
as the hybrid's validation does for one network. What an ensemble adds over one network is on the
results page (docs/results.md).
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from .._log import progress_bar

from .. import _bounds as check
from .predictor import Predictor
from .rank import bounded_k, certified, query_contexts
from ..storage.loading import LoadError, expect_kind, read_config
from ..heads.beam import DecodeConfig
from ..heads.config import MIXES
from ..heads.parts import network_only, term_alone, term_only
from ..heads.ranking import NEG_INF, Ranking, chunked_topk, exact_ranking, is_allowed
from ..model.sequence_batches import ordered_query_batch


class Ensemble(Predictor):
    """Predictor's predict / predict_many / recommend / rank over several models (module docstring)."""

    def __init__(self, members: Sequence[Predictor], mix: float | None = None, names: Sequence[str] = ()):
        if not members:
            raise ValueError("an ensemble needs at least one model")
        # an ensemble among the members (a folder of `train --members` given to --with) adds its own members;
        # its chosen weight counts with the hybrids' own ones for the default
        own = [m.mix if isinstance(m, Ensemble) else m.model.head.term_weight() for m in members]
        if names:
            names = [n for m, n in zip(members, names) for _ in (m.members if isinstance(m, Ensemble) else [m])]
        members = [x for m in members for x in (m.members if isinstance(m, Ensemble) else [m])]
        first = members[0]
        sample = np.linspace(0, len(first.vocab) - 1, min(1000, len(first.vocab))).astype(int).tolist()
        for i, m in enumerate(members[1:], 1):
            if len(m.vocab) != len(first.vocab) or any(m.vocab.strings[j] != first.vocab.strings[j] for j in sample):
                raise ValueError(f"model {names[i] if names else i}: its vocabulary ({len(m.vocab):,} ids) is not "
                                 f"the first model's ({len(first.vocab):,}); an ensemble's models share their ids")
        for i, m in enumerate(members):
            if m.model.head.network_scores(torch.zeros(1, 1, m.model.encoder.cfg.d, device=device_of(m))) is None:
                raise ValueError(f"model {names[i] if names else i}: its head ({m.config['head']['name']}) does "
                                 "not score every id; an ensemble needs full or hybrid heads")
        super().__init__(first.model, first.hashing, first.vocab, dict(first.config))
        self.members = list(members)
        self.term_alone = False  # variants(): the term's ranking alone
        probe = torch.full((1, 1), -1, dtype=torch.long)
        with_term = [m for m in members if m.model.head.term_scores(probe.to(device_of(m))) is not None]
        self.term_member = with_term[0] if with_term else None  # whose term (and its device) the ensemble adds
        own = [min(w, MIXES[-1]) for w in own if w > 0]  # a member kept at its term alone counts as the largest weight
        self.mix = float(mix) if mix is not None else (float(np.median(own)) if own and with_term else 0.0)
        if self.mix and self.term_member is None:
            raise ValueError(f"mix {self.mix:g}: no model of the ensemble has an item-item term (a hybrid head)")

    @classmethod
    def load(cls, model_dirs: Sequence[str | Path], mix: float | None = None,
             device: str = "auto", mmap: bool = True) -> "Ensemble":
        """The models of `model_dirs` (each as sb.load reads it) as one ensemble."""
        if isinstance(model_dirs, (str, bytes)) or not hasattr(model_dirs, "__iter__"):
            raise check.ArgumentError("model_dirs", f"expected a list of model folders, got {check.shown(model_dirs)}")
        return cls([Predictor.load(d, device, mmap) for d in model_dirs], mix, [str(d) for d in model_dirs])

    @classmethod
    def load_dir(cls, ens_dir: str | Path, device: str = "auto", mmap: bool = True) -> "Ensemble":
        """An ensemble folder (training/members.py, `train --members`): config.json's "members" (folders
        inside it) at its "item_mix"."""
        path = expect_kind(check.path("ens_dir", ens_dir), "ensemble")
        config = read_config(path, {"members": list})
        where = path / "config.json"
        mix = config.get("item_mix", 0.0)
        if isinstance(mix, bool) or not isinstance(mix, (int, float)) or mix < 0:
            raise LoadError(f"{where}: field 'item_mix' is {mix!r}; expected a number >= 0")
        names = config["members"]
        if not names or not all(isinstance(m, str) and m and "/" not in m and m not in (".", "..") for m in names):
            raise LoadError(f"{where}: field 'members' is {names!r}; expected the names of the member folders in "
                            f"{path}")
        out = cls([Predictor.load(path / m, device, mmap) for m in names], float(mix),
                  [str(path / m) for m in names])
        out.path = path
        return out

    def save(self, out: str | Path) -> Path:
        """The ensemble as a folder at `out` (storage/share.py): its own folder copied, or for one assembled
        in memory (Ensemble.load, --with) its members' folders as member-0, member-1, ... at its weight."""
        from ..storage.share import copy_model, copy_members

        check.path("out", out)
        if self.path is not None:
            return copy_model(self.path, out, "ensemble")
        if any(m.path is None for m in self.members):
            raise ValueError("save: a member of this ensemble was not loaded from a folder")
        return copy_members([m.path for m in self.members], out, {"kind": "ensemble", "item_mix": self.mix})

    @property
    def n_parameters(self) -> int:
        return sum(m.n_parameters for m in self.members)

    def info(self) -> dict:
        out = super().info()
        out.update(kind="ensemble", parameters=self.n_parameters,
                   members=len(self.members), item_mix=self.mix)
        return out

    def variants(self) -> dict:
        """With a term weight: the networks alone (mix 0) and the term alone, on the same examples (evaluate);
        at weight 0 (the ensemble is its networks alone) the term alone, where a member has a term."""
        if not self.mix:
            return {"term alone": term_only(self._as(0.0, True))} if self.term_member is not None else {}
        return {"network alone": network_only(self._as(0.0, False)),
                "term alone": term_only(self._as(self.mix, True))}

    def label(self) -> str:
        if not self.variants():
            return "superbloom model"
        term = self.term_member.model.head.describe() if self.term_member is not None else {}
        return f"ensemble of {len(self.members)} ({term.get('item_term', 'term')} x {self.mix:g})"

    def ranked_alongside(self):
        """Each variant is ranked by a pass of its own (Predictor.ranked_alongside's dict stays empty)."""
        return contextlib.nullcontext({})

    def describe_head(self) -> dict:
        return {"name": "ensemble", "members": len(self.members), "item_mix": self.mix,
                "term": self.term_member.model.head.describe() if self.term_member is not None else None}

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
        w = self.mix if mix is None else mix
        net, term = self._parts(contexts, w)
        return net if term is None else net + w * term

    def _parts(self, contexts: np.ndarray, mix: float) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(Q, c) contexts -> the members' mean network log p (Q, N) and, if mix, the term (Q, N), on the CPU."""
        ctx = np.asarray(contexts, dtype=np.int64)
        net = None
        for m in self.members:  # a running sum: one (Q, N) block at a time, not one per member
            model = m.model.eval()
            qb = ordered_query_batch(query_contexts(ctx, model.encoder.cfg), m.hashing, model.encoder.cfg)
            qb = qb.to(device_of(m))
            lp = model.head.network_scores(model.target_hidden(qb)).float().cpu()
            net = lp if net is None else net.add_(lp)
        net.div_(len(self.members))
        if not mix:
            return net, None
        t = self.term_member
        ctx = query_contexts(ctx, t.model.encoder.cfg)  # the term sums over the context's distinct ids
        return net, t.model.head.term_scores(torch.from_numpy(ctx).to(device_of(t))).float().cpu()

    def _batches(self, contexts, exclude, allow, batch_size: int, progress: bool, mix: float):
        """Per batch of contexts: (its network and term scores, the exclusion ids (b, X) or None), with
        the ids outside `allow` already at -inf in the network's scores."""
        exclude = contexts if exclude is None else exclude
        allowed = None if allow is None else torch.from_numpy(np.unique(np.asarray(allow, np.int64)))
        for a in progress_bar(range(0, len(contexts), batch_size), desc="ranking", progress=progress,
                              leave=False):
            net, term = self._parts(contexts[a:a + batch_size], mix)
            if allowed is not None:
                net.masked_fill_(~is_allowed(torch.arange(net.shape[1]), allowed), NEG_INF)
            ex = torch.from_numpy(np.asarray(exclude[a:a + batch_size], np.int64))
            yield net, term, (ex if ex.shape[1] else None)

    @staticmethod
    def _top(s: torch.Tensor, k: int, ex, decode: DecodeConfig) -> Ranking:
        k = bounded_k(k, s.shape[1])
        vals, ids = chunked_topk(lambda i, j: s[i:j], len(s), s.shape[1], k, ex, like=s)
        return certified(exact_ranking(vals, ids, k, decode.score, torch.full((len(s),), s.shape[1])))

    @torch.no_grad()
    def rank(self, contexts: np.ndarray, k: int, decode: DecodeConfig = DecodeConfig(), batch_size: int = 256,
             progress: bool = False, exclude: np.ndarray | None = None, allow: np.ndarray | None = None,
             mix: float | None = None) -> Ranking:
        """Exact top-k ids for contexts (Q, c), never an id of exclude (Q, X) (None: the contexts), only
        ids of allow (A,) when given; `mix` overrides the ensemble's weight for this call."""
        contexts, k, exclude, allow = self.check_rank(contexts, k, decode, batch_size, exclude, allow)
        if mix is not None:
            mix = check.number("mix", mix, 0.0)
        if self.term_alone:  # the term member's own "term alone" ranking (heads/hybrid.py: ties by the smaller id)
            with term_alone(self.term_member.model.head):
                return self.term_member.rank(contexts, k, decode, batch_size, progress, exclude, allow)
        w = self.mix if mix is None else mix
        parts = [self._top(net if term is None else net.add_(term, alpha=w), k, ex, decode)
                 for net, term, ex in self._batches(contexts, exclude, allow, batch_size, progress, w)]
        return Ranking.concat(parts) if parts else Ranking.empty(k)

    @torch.no_grad()
    def choose_mix(self, contexts: np.ndarray, targets: np.ndarray, mixes: Sequence[float] = MIXES,
                   k: int = 10, batch_size: int = 256, exclude: np.ndarray | None = None) -> dict[float, float]:
        """Set `mix` to the weight of `mixes` with the largest recall@k of `targets` (Q,) given `contexts`
        (Q, c) (held-out examples, never the test ones; ties: the smaller weight), never ranking an id of
        `exclude` (Q, X) (None: the contexts) -> {mix: recall@k}. One network pass per batch serves every
        weight."""
        if self.term_member is None:
            raise ValueError("choose_mix: no model of the ensemble has an item-item term (a hybrid head)")
        targets = torch.from_numpy(np.asarray(targets, np.int64))
        hits = {float(w): 0 for w in mixes}
        done = 0
        for net, term, ex in self._batches(contexts, exclude, None, batch_size, False, 1.0):
            t = targets[done:done + len(net)]
            for w in hits:
                ids = self._top(net + w * term, k, ex, DecodeConfig()).ids
                hits[w] += int((ids == t[:, None]).any(1).sum())
            done += len(net)
        got = {w: h / max(1, len(targets)) for w, h in hits.items()}
        self.mix = max(got, key=lambda w: (got[w], -w))
        return got


def device_of(member: Predictor) -> torch.device:
    return next(member.model.parameters()).device
