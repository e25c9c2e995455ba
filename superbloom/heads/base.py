"""The head interface: one small base class whose default hooks every head inherits.

Generic code (the rank loop, training, validation, evaluation, serving) calls these hooks and never
asks a head what it is (no hasattr / isinstance / name tests outside heads/):

  loss(hidden, targets, rows=None)        the training loss (each head implements it)
  topk(hidden, k, exclude=None, decode=DecodeConfig(), context=None) -> Ranking
                                          each head implements it; `context` (Q, T) int64 ids of each
                                          query's context, -1 padded, oldest first: every caller passes
                                          it, a head that does not score with it ignores it
  topk_allowed(hidden, k, allow, exclude=None, decode=DecodeConfig(), context=None) -> Ranking
                                          top-k among the ids of `allow` (A,) sorted unique int64,
                                          exact wherever topk is (default: widening topk, below);
                                          a head overrides it where scoring only those ids is cheaper
  query_context(batch, elements) -> (U, T)
                                          the context `topk` gets for the target elements (U,) (flat
                                          indices b * n + i) of a query batch (default: the ids of each
                                          one's batch row, batch.context; the bigram hashed hybrid: the
                                          two neighbours of the blank)
  uses_context                            True for a head whose scores depend on the context ids, so
                                          that an objective that cannot give them refuses it early
  fit(sets, ordered=False) -> dict|None   structure fitted on the training sets before a fresh run
                                          (default: nothing); the dict is recorded in config.json
  ranks_before_training() -> bool         True for a head whose fit gave it a part that ranks on its
                                          own (a hybrid's term): train validates and checkpoints the
                                          model before its first step, so it serves at once (default False)
  choose(rank, summarize, select, decays) -> Validation
                                          validation: the head may choose settings on the validation
                                          queries and score its parts alone there (default:
                                          Validation(summarize(rank())), nothing chosen)
  variants() -> {name: Variant}           named variants reported beside the head on the same
                                          examples (default: none; the hybrid: "network alone",
                                          "term alone"); each says its result key, report row and
                                          part, and inside `with` the head ranks as that variant
  ranked_alongside() -> context manager of a dict
                                          the block's rank passes also rank those variants the head
                                          can score from the same pass; the dict then holds their
                                          Rankings (default: none; evaluate ranks the rest one pass each)
  parts_note(best, select) -> str|None   the end of training's line on the head's parts at the
                                          kept checkpoint (`best`: choose's Validation there; default
                                          None; the hybrids: the hybrid, its network alone, its term
                                          alone)
  describe() -> dict                      what a report says about the head (default: its name)
  label() -> str                          the model's row in an evaluation report (default
                                          "superbloom model"; a hybrid names its term and weight)
  term_weight() -> float                  the weight of the head's item-item term in its ranking
                                          (default 0: none)
  fixed_weights() -> int                  weights kept as buffers, fitted in closed form, counted
                                          with the parameters (default 0)
  fixed_buffers                           names of the buffers `fit` fills and training never changes;
                                          a head that has them passes them to storage.fixed.declare_fixed
                                          in __init__: stored once per model folder, not in every
                                          checkpoint (default none)
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn as nn

from .decode_config import DecodeConfig
from .ranking import NEG_INF, Ranking, is_allowed


@dataclass
class Validation:
    """What one validation measured: the model's `scores` (metric -> value), the `settings` its head
    chose there (a hybrid: its term, the term's weight and decay) and what its `parts` scored alone
    (part -> {metric: value}; a hybrid's "network" and "term", as `--part` names them).

    `record()` is the flat JSON object that metrics.jsonl, state.json and BEST keep (a setting as
    item_<name>, a part's metric as <prefix><metric>: the keys of earlier runs' files); `read` reads
    one back, so no other code parses those keys."""
    scores: dict
    settings: dict = field(default_factory=dict)
    parts: dict = field(default_factory=dict)

    SETTING = "item_"
    PARTS = {"network": "pure_", "term": "term_"}  # part -> its key prefix in the record
    LABELS = {"network": "network alone", "term": "term alone"}  # part -> its name in reports

    def record(self) -> dict:
        out = dict(self.scores)
        out.update({self.SETTING + k: x for k, x in self.settings.items()})
        for part, metrics in self.parts.items():
            out.update({self.PARTS[part] + k: x for k, x in metrics.items()})
        return out

    @classmethod
    def read(cls, record: dict) -> "Validation":
        """A record() back (its "step", which the loop adds, left out)."""
        v = cls({})
        for k, x in record.items():
            part = next((p for p, prefix in cls.PARTS.items() if k.startswith(prefix)), None)
            if part is not None:
                v.parts.setdefault(part, {})[k[len(cls.PARTS[part]):]] = x
            elif k.startswith(cls.SETTING):
                v.settings[k[len(cls.SETTING):]] = x
            elif k != "step":
                v.scores[k] = x
        return v

    def watched(self, select: str) -> dict:
        """The record's scores of metric `select`: the model's and each part's alone (training's
        patience waits for one of them to improve: a network can improve under a term that carries it)."""
        out = {select: self.scores[select]} if select in self.scores else {}
        out.update({self.PARTS[p] + select: m[select] for p, m in self.parts.items() if select in m})
        return out


class Variant:
    """A way the model also ranks, reported beside it on the same examples (`variants()`): `key` its
    entry in EvalResult.variants and eval.json, `label` its row in reports, `about` what the report
    says it is, `part` what `--part` calls it (inference/parts.py). Used as the context manager
    inside which the model ranks as this variant."""

    def __init__(self, key: str, label: str, part: str, about: str, context: contextlib.AbstractContextManager):
        self.key, self.label, self.part, self.about, self.context = key, label, part, about, context

    def __enter__(self):
        return self.context.__enter__()

    def __exit__(self, *exc):
        return self.context.__exit__(*exc)


class HeadBase(nn.Module):
    """Default hooks of every output head (see the module docstring)."""

    uses_context: bool = False
    fixed_buffers: tuple[str, ...] = ()

    def topk_allowed(self, hidden, k: int, allow: torch.Tensor, exclude=None, decode: DecodeConfig = DecodeConfig(),
                     context=None) -> Ranking:
        """Top-k among the allowed ids, from the head's own topk with k' = k, 4k, 16k, ... until k'
        holds k allowed ids or every id that can be ranked: the allowed ids of a top-k' are the top
        allowed ids, so the answer is exact (and flagged) wherever that top-k' is. Costs up to a
        top-N for an allow-list the head scores low; heads override it where that is cheaper."""
        q = len(hidden)
        out = Ranking(torch.full((q, k), -1, dtype=torch.long, device=hidden.device),
                      torch.full((q, k), NEG_INF, device=hidden.device),
                      torch.zeros(q, dtype=torch.bool, device=hidden.device),
                      torch.zeros(q, dtype=torch.long, device=hidden.device))
        rows, width = torch.arange(q, device=hidden.device), k
        while rows.numel():
            pick = lambda t: t[rows] if t is not None else None  # noqa: E731
            r = self.topk(hidden[rows], width, exclude=pick(exclude), decode=decode, context=pick(context))
            keep = is_allowed(r.ids, allow) & (r.ids >= 0)  # (q', width)
            done = (keep.sum(1) >= k) | (r.ids[:, -1] < 0)  # k allowed found, or nothing more to rank
            first = torch.argsort((~keep).to(torch.int8), dim=1, stable=True)[:, :k]  # allowed first, in order
            ok = keep.gather(1, first)
            ids = torch.where(ok, r.ids.gather(1, first), -1)
            vals = torch.where(ok, r.scores.gather(1, first), NEG_INF)
            if ids.shape[1] < k:
                ids = torch.cat([ids, ids.new_full((len(ids), k - ids.shape[1]), -1)], 1)
                vals = torch.cat([vals, vals.new_full((len(vals), k - vals.shape[1]), NEG_INF)], 1)
            out.assign(rows[done], Ranking(ids[done], vals[done], r.exact[done], r.beam[done]))
            rows, width = rows[~done], width * 4
        return out

    def query_context(self, batch, elements: torch.Tensor) -> torch.Tensor:
        return batch.context(elements)

    def network_scores(self, hidden: torch.Tensor) -> torch.Tensor | None:
        """(M, m, d) hidden -> (M, N) the network's log p of every id (no item-item term), for a head
        that scores every id; None for one that does not (inference/ensemble.py needs it)."""
        return None

    def export_scores(self, hidden: torch.Tensor) -> torch.Tensor:
        """(M, m, d) hidden -> the scores this head's decoding reads, for an exported network
        (inference/export.py): by default the network's log p of every id (network_scores)."""
        scores = self.network_scores(hidden)
        if scores is None:
            raise ValueError(f"the {type(self).__name__} scores no tensor another runtime could decode; export "
                             "a model with the superbloom, full or hybrid head")
        return scores

    def term_scores(self, context: torch.Tensor) -> torch.Tensor | None:
        """(U, T) context ids, -1 padded, oldest first -> (U, N) the head's chosen item-item term summed
        over the context (its decay applied); None for a head without such a term."""
        return None

    def fit(self, sets, ordered: bool = False) -> dict | None:
        return None

    def ranks_before_training(self) -> bool:
        return False

    def hashing_changed(self, hashing) -> None:
        """Rebuild what the head copied from its hash maps (train adopts new maps in place: BloomHash.adopt);
        the default holds none."""

    def before_training(self) -> None:
        """Rank as the head can before any training step and before a validation chose its settings
        (a hybrid: its term alone, which needs no trained network): fit writes that model first."""

    def choose(self, rank: Callable, summarize: Callable[..., dict], select: str,
               decays: tuple[float, ...] = (1.0,)) -> Validation:
        return Validation(summarize(rank()))

    def variants(self) -> dict[str, Variant]:
        return {}

    def ranked_alongside(self) -> contextlib.AbstractContextManager[dict]:
        """A block whose rank passes also rank some of `variants()` from the same scores (the hybrid:
        its network alone, from the network pass the hybrid makes anyway); when the block ends the
        dict it gives holds name -> Ranking of each, in query order. Default: none (each variant is
        ranked by a pass of its own)."""
        return contextlib.nullcontext({})

    def parts_note(self, best: Validation, select: str, step: int | None = None) -> str | None:
        """A line on what each part of the head scored on the validation sets at the kept (BEST)
        checkpoint (`best`: choose's result there, at `step`), for the end of training; None: a head of
        one part."""
        return None

    def describe(self) -> dict:
        return {"name": self.cfg.name}

    def label(self) -> str:
        return "superbloom model"

    def term_weight(self) -> float:
        return 0.0

    def fixed_weights(self) -> int:
        return 0
