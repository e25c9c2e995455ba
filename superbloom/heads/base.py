"""The head interface: one small base class whose default hooks every head inherits.

Generic code (the rank loop, training, validation, evaluation, serving) calls these hooks and never
asks a head what it is (no hasattr / isinstance / name tests outside heads/):

  loss(hidden, targets, rows=None)        the training loss (each head implements it)
  topk(hidden, k, exclude=None, decode=DecodeConfig(), context=None) -> Ranking
                                          each head implements it; `context` (Q, T) int64 ids of each
                                          query's context, -1 padded, oldest first: every caller passes
                                          it, a head that does not score with it ignores it
  uses_context                            True for a head whose scores depend on the context ids, so
                                          that an objective that cannot give them refuses it early
  fit(sets, ordered=False) -> dict|None   structure fitted on the training sets before a fresh run
                                          (default: nothing); the dict is recorded in config.json
  choose(rank, summarize, select, decays) -> dict
                                          validation: the head may choose settings on the validation
                                          queries (default: summarize(rank()), nothing chosen)
  variants() -> {name: context manager}   named variants reported beside the head on the same
                                          examples (default: none; the hybrid: "network alone",
                                          "term alone"); inside `with` the head ranks as that variant
  describe() -> dict                      what a report says about the head (default: its name)
  fixed_weights() -> int                  weights kept as buffers, fitted in closed form, counted
                                          with the parameters (default 0)
"""
from __future__ import annotations

import contextlib
from typing import Callable

import torch.nn as nn


class HeadBase(nn.Module):
    """Default hooks of every output head (see the module docstring)."""

    uses_context: bool = False

    def fit(self, sets, ordered: bool = False) -> dict | None:
        return None

    def choose(self, rank: Callable, summarize: Callable[..., dict], select: str,
               decays: tuple[float, ...] = (1.0,)) -> dict:
        return summarize(rank())

    def variants(self) -> dict[str, contextlib.AbstractContextManager]:
        return {}

    def describe(self) -> dict:
        return {"name": self.cfg.name}

    def fixed_weights(self) -> int:
        return 0
