"""Route classes of the server: heavy requests in a bounded lane of their own, 503 when it is full.

A burst of heavy requests (/v1/expand: up to max_steps model calls each; /v1/predict with a list of
contexts; /v1/fill) used to take every thread of the shared pool, and a cheap /v1/similar or /health
waited behind them for tens of seconds. A `Lane` admits at most
`workers + queue` requests of its class at once: `workers` run (sync handlers in the lane's own
threads, not the shared pool), `queue` wait; one more is refused at once with 503 and
`Retry-After`, before any work. Light routes never enter a lane, so they keep the shared pool and the
event loop to themselves.

    lane = Lane("heavy", workers=2, queue=32)
    return await lane.run(work, req)           # a sync handler's body, in the lane's threads
    async with lane.admit():                    # an async handler's body (its work is elsewhere)
        ...
"""
from __future__ import annotations

from contextlib import asynccontextmanager

from .._extras import require_extra

require_extra("serve", "the HTTP server (superbloom serve)")  # before fastapi: a missing extra names its pip command
import anyio  # noqa: E402
from fastapi import HTTPException  # noqa: E402

RETRY_AFTER_SECONDS = 1


class Lane:
    """At most `workers` requests of this class run and `queue` wait; more: 503 + Retry-After."""

    def __init__(self, name: str, workers: int, queue: int):
        if workers < 1 or queue < 0:
            raise ValueError(f"lane {name}: workers must be >= 1 and queue >= 0, got {workers}, {queue}")
        self.name, self.workers, self.queue = name, workers, queue
        self.limiter = anyio.CapacityLimiter(workers)  # the lane's own threads (anyio's pool, its own tokens)
        self.admitted = 0  # running + waiting (the event loop is single-threaded: a plain counter)
        self.refused = 0  # counter for /health

    def _enter(self) -> None:
        if self.admitted >= self.workers + self.queue:
            self.refused += 1
            raise HTTPException(503, f"the server is busy with {self.name} requests ({self.workers} running, "
                                     f"{self.queue} waiting); retry after {RETRY_AFTER_SECONDS} s",
                                headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
        self.admitted += 1

    @asynccontextmanager
    async def admit(self):
        """An async handler's admission: refused when full, else `workers` at a time run its body."""
        self._enter()
        try:
            async with self.limiter:
                yield
        finally:
            self.admitted -= 1

    async def run(self, fn, *args):
        """fn(*args) in one of the lane's threads, once admitted (refused when full)."""
        self._enter()
        try:
            return await anyio.to_thread.run_sync(fn, *args, limiter=self.limiter)
        finally:
            self.admitted -= 1
