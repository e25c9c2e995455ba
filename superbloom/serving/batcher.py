"""Request batching of the server: one worker thread (`Batcher`) ranks every query queued since its
previous batch in one `predictor.rank` call per (k, decode, allow-list) group and length-sorted chunk, so under
load requests are batched and an idle server adds no waiting. serving/app.py submits every
prediction to it; expansions use it as their model, so each of their steps joins those batches.
"""
import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from ..heads.beam import DecodeConfig
from ..inference.predictor import Predictor
from ..heads.ranking import Ranking


@dataclass
class _Query:
    context: np.ndarray  # (c,) int64 known ids
    k: int
    decode: DecodeConfig
    future: Future
    deny: np.ndarray  # (D,) int64 ids never returned, besides the context
    allow: np.ndarray | None  # (A,) sorted int64: the only ids returned (None: all)
    include_seen: bool = False  # the context's own ids may be returned
    plain: bool = False  # answered with an Answer (Python values), not a one-row Ranking


@dataclass
class Answer:
    """One query's ranking as plain Python values (Batcher.answer), made in the batcher's thread."""
    ids: list[int]  # best first; -1 where fewer than k ids could be ranked
    scores: list[float]
    exact: bool
    beam: int


class Batcher:
    """One worker thread ranks every query queued since its last batch with one `predictor.rank` call
    per (k, decode) group and length-sorted chunk. Also a drop-in `model` for `expand.expand`."""

    def __init__(self, predictor: Predictor, max_batch: int = 64, max_batch_ids: int = 1 << 14,
                 on_batch: Callable[[int], None] | None = None, on_queue: Callable[[int], None] | None = None):
        self.predictor, self.vocab = predictor, predictor.vocab
        self.max_batch, self.max_batch_ids = max_batch, max_batch_ids
        self.on_batch = on_batch  # called with the number of queries of each model call (telemetry.py)
        self.on_queue = on_queue  # called with the queue's depth when it changes (telemetry.py)
        self.queue: queue.Queue[_Query | None] = queue.Queue()
        self.batches = self.queries = 0  # counters for /health
        self.thread = threading.Thread(target=self._loop, name="superbloom-batcher", daemon=True)
        self.thread.start()

    def submit(self, context: np.ndarray, k: int, decode: DecodeConfig, allow: np.ndarray | None = None,
               deny: np.ndarray | None = None, include_seen: bool = False, plain: bool = False) -> Future:
        """Queue one context (known int ids), with an optional allow-list (sorted unique ids) and deny-list,
        its own ids excluded unless include_seen; the future's result is a one-row Ranking (plain: an
        Answer, see `answer`)."""
        fut: Future = Future()
        deny = np.zeros(0, np.int64) if deny is None else np.asarray(deny, np.int64)
        self.queue.put(_Query(np.asarray(context, np.int64), k, decode, fut, deny, allow, include_seen, plain))
        if self.on_queue is not None:
            self.on_queue(self.queue.qsize())
        return fut

    def answer(self, context: np.ndarray, k: int, decode: DecodeConfig, allow: np.ndarray | None = None,
               deny: np.ndarray | None = None, include_seen: bool = False) -> Future:
        """`submit`, the future's result an Answer: the event loop that awaits it touches no tensor (a
        torch call there releases the GIL and must take it back from this thread, busy with the next
        batch), and the batch's rows become Python lists once, not one tensor selection per query."""
        return self.submit(context, k, decode, allow, deny, include_seen, plain=True)

    def read_context(self, ids, name: str = "ids"):
        """The predictor's (expand.expand reads its seed as the model reads a context)."""
        return self.predictor.read_context(ids, name)

    def rank(self, contexts: np.ndarray, k: int, decode: DecodeConfig = DecodeConfig(),
             exclude: np.ndarray | None = None, allow: np.ndarray | None = None) -> Ranking:
        """Blocking, like Predictor.rank: (Q, c) ids, -1 padded -> Ranking; exclude (Q, X) replaces the
        contexts as the ids never returned (None: the contexts), allow (A,) sorted: the only ids returned."""
        futs = []
        for q, row in enumerate(np.asarray(contexts)):
            if exclude is None:
                futs.append(self.submit(row[row >= 0], k, decode, allow))
            else:  # the exclusions as a deny-list, the context itself not excluded on top of them
                ex = np.asarray(exclude[q], np.int64)
                futs.append(self.submit(row[row >= 0], k, decode, allow, ex[ex >= 0], include_seen=True))
        return Ranking.concat([f.result() for f in futs])

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join(timeout=10)

    def _loop(self) -> None:
        while (first := self.queue.get()) is not None:
            batch = [first]
            while len(batch) < self.max_batch:
                try:
                    q = self.queue.get_nowait()
                except queue.Empty:
                    break
                if q is None:
                    self.queue.put(None)  # stop after this batch
                    break
                batch.append(q)
            if self.on_queue is not None:
                self.on_queue(self.queue.qsize())
            self._run(batch)

    def _run(self, batch: list[_Query]) -> None:
        groups: dict[tuple, list[_Query]] = {}
        for q in batch:
            allow_key = None if q.allow is None else q.allow.tobytes()
            groups.setdefault((q.k, q.decode, allow_key), []).append(q)
        for (k, decode, _), qs in groups.items():
            qs.sort(key=lambda q: len(q.context))
            for chunk in self._chunks(qs):
                self._rank_chunk(chunk, k, decode, qs[0].allow)

    def _chunks(self, qs: list[_Query]):
        """Length-sorted queries -> chunks of at most max_batch_ids padded ids."""
        start = 0
        for i in range(1, len(qs) + 1):
            if i == len(qs) or (i + 1 - start) * max(1, len(qs[i].context)) > self.max_batch_ids:
                yield qs[start:i]
                start = i

    def _rank_chunk(self, qs: list[_Query], k: int, decode: DecodeConfig, allow: np.ndarray | None = None) -> None:
        qs = [q for q in qs if q.future.set_running_or_notify_cancel()]
        if not qs:
            return
        mat = np.full((len(qs), max(len(q.context) for q in qs)), -1, np.int64)
        for i, q in enumerate(qs):
            mat[i, :len(q.context)] = q.context
        exclude = None
        if any(len(q.deny) or q.include_seen for q in qs):  # (Q, c + D): each query's context and deny-list
            exclude = np.full((len(qs), mat.shape[1] + max(len(q.deny) for q in qs)), -1, np.int64)
            for i, q in enumerate(qs):
                seen = 0 if q.include_seen else len(q.context)
                exclude[i, :seen] = q.context[:seen]
                exclude[i, seen:seen + len(q.deny)] = q.deny
        try:
            lists = {n: v for n, v in (("exclude", exclude), ("allow", allow)) if v is not None}
            r = self.predictor.rank(mat, k, decode, **lists)  # a plain query calls rank(mat, k, decode)
        except Exception as e:  # noqa: BLE001 - handed to the waiting requests, the worker lives on
            for q in qs:
                q.future.set_exception(e)
            return
        self.batches, self.queries = self.batches + 1, self.queries + len(qs)
        if self.on_batch is not None:
            self.on_batch(len(qs))
        rows = None  # the batch's answers as Python lists, made once if a query wants an Answer
        for i, q in enumerate(qs):
            if q.plain:
                rows = rows or (r.ids.tolist(), r.scores.tolist(), r.exact.tolist(), r.beam.tolist())
                q.future.set_result(Answer(rows[0][i], rows[1][i], bool(rows[2][i]), int(rows[3][i])))
            else:
                q.future.set_result(r.select(torch.tensor([i])))
