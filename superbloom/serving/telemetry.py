"""What the server tells its operator: Prometheus metrics (GET /metrics) and JSON-line access logs.

One ASGI middleware (`Observe`, outermost: the 408/413 of the guards count too) times every HTTP
request and records it twice: in the app's own Prometheus registry (prometheus_client) and, unless
turned off, as one JSON object per line on the logger `superbloom.serving.access` (INFO; the command
line shows it on stderr, _log.py). The batcher reports the size of each model call, and the queue
depth is reported by the batcher as it changes. The metrics (Prometheus' text format):

    superbloom_http_requests_total{method, route, status}        counter: requests answered
    superbloom_http_request_duration_seconds{route}               histogram: time to the last byte
    superbloom_batch_size                                         histogram: queries per model call
    superbloom_queue_depth                                        gauge: queries waiting for the batcher
    superbloom_ready                                              gauge: 1 once warm (GET /ready answers 200)
    superbloom_workers                                            gauge: server processes answering
    superbloom_build_info{version}                                gauge (1): the version serving

`route` is the matched route's path template (/v1/predict, /docs-assets, ...), "other" for a path no
route matches, and `method` one of the methods of HTTP/1.1 (METHODS), "other" for any other token, so a
client cannot grow the label set (5,000 random method tokens add no series). An access log line:

    {"time": "2026-01-01T12:00:00.123Z", "client": "127.0.0.1:51234", "method": "POST",
     "path": "/v1/predict", "route": "/v1/predict", "status": 200, "ms": 3.1, "pid": 4242}

(the path without its query string, which may hold user data; the pid is the server's own, on its
side only: no response names a process). With `serve --workers N` the metrics are one view of every
worker: prometheus_client's multiprocess mode (the folder PROMETHEUS_MULTIPROC_DIR, which launch.py
makes for the workers before they start), so /metrics on any worker answers for all of them: counts
and histograms summed, queue depth and workers summed over the live ones, ready the least of them.
"""
from __future__ import annotations

import json
import logging
import os
import time
from datetime import datetime, timezone

from .._extras import require_extra

require_extra("serve", "the HTTP server (superbloom serve)")  # before prometheus_client: names its pip command
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.routing import Match

from .._version import __version__

access_log = logging.getLogger("superbloom.serving.access")

METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT")  # the method label's values
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)  # queries per model call (ServeConfig.max_batch: 64)


MULTIPROC = "PROMETHEUS_MULTIPROC_DIR"  # set (by launch.py): prometheus_client's multiprocess mode


class Telemetry:
    """The app's Prometheus registry and its metrics (one per app, so two apps in a process never mix);
    in multiprocess mode (MULTIPROC set before prometheus_client was imported: `serve --workers N`)
    the values live in that folder, one file per process, and exposition() reads them all."""

    def __init__(self):
        self.folder = os.environ.get(MULTIPROC)
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.requests = Counter("superbloom_http_requests", "HTTP requests answered, by method, route and status",
                                ["method", "route", "status"], registry=r)
        self.latency = Histogram("superbloom_http_request_duration_seconds",
                                 "seconds from a request's arrival to its response's last byte, by route",
                                 ["route"], registry=r)
        self.batch_size = Histogram("superbloom_batch_size", "queries ranked in one model call (the batcher)",
                                    buckets=BATCH_BUCKETS, registry=r)
        self.queue_depth = Gauge("superbloom_queue_depth", "queries waiting for the batcher", registry=r,
                                 multiprocess_mode="livesum")
        self.ready = Gauge("superbloom_ready", "1 once the model is loaded and warm (GET /ready: 200)", registry=r,
                           multiprocess_mode="livemin")
        Gauge("superbloom_workers", "server processes answering", registry=r, multiprocess_mode="livesum").set(1)
        Gauge("superbloom_build_info", "the version serving (value 1)", ["version"], registry=r,
              multiprocess_mode="max").labels(__version__).set(1)

    def observe_queue(self, depth: int) -> None:
        """The batcher's queue depth, as it changes."""
        self.queue_depth.set(depth)

    def observe_batch(self, size: int) -> None:
        self.batch_size.observe(size)

    def exposition(self) -> tuple[bytes, str]:
        """(the metrics in Prometheus' text format, its content type): this app's registry, or in
        multiprocess mode every worker's (the live gauges of a worker that died are dropped first)."""
        if self.folder is None:
            return generate_latest(self.registry), CONTENT_TYPE_LATEST
        from prometheus_client import multiprocess

        for pid in _dead_pids(self.folder):
            multiprocess.mark_process_dead(pid, self.folder)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, self.folder)
        return generate_latest(registry), CONTENT_TYPE_LATEST


def _dead_pids(folder: str) -> set[int]:
    """The pids of the multiprocess folder's files (NAME_PID.db) whose process no longer runs."""
    pids = set()
    for name in os.listdir(folder):
        stem = name.removesuffix(".db")
        tail = stem.rsplit("_", 1)[-1]
        if name.endswith(".db") and tail.isdigit():
            pids.add(int(tail))
    dead = set()
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            dead.add(pid)
        except PermissionError:  # alive, another user's
            pass
    return dead


def route_of(app, scope) -> str | None:
    """The path template of the route `scope` will go to (a method mismatch too), matched before the app
    runs (a mount rewrites the scope's path; a guard's 408 / 413 never reaches the router); None for a
    path no route matches, or an included router's (whose route the router records in scope["route"])."""
    for candidate in app.router.routes:
        match, child = candidate.matches(scope)
        if match is not Match.NONE:
            return getattr(child.get("route", candidate), "path", None)
    return None


def _client(scope) -> str | None:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else None


class Observe:
    """ASGI middleware: every HTTP request counted, timed and (if `log`) written as an access log line.
    `routes`: the app whose routes name the `route` label."""

    def __init__(self, app, telemetry: Telemetry, routes, log: bool = True):
        self.app, self.telemetry, self.routes, self.log = app, telemetry, routes, log
        self.pid = os.getpid()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start, status = time.perf_counter(), 500  # no response started: what the client gets is a 500
        route = route_of(self.routes, scope)

        async def send_observed(msg):
            nonlocal status
            if msg["type"] == "http.response.start":
                status = msg["status"]
            await send(msg)

        try:
            await self.app(scope, receive, send_observed)
        finally:
            seconds = time.perf_counter() - start
            route = route or getattr(scope.get("route"), "path", None) or "other"
            method = scope["method"] if scope["method"] in METHODS else "other"
            self.telemetry.requests.labels(method, route, str(status)).inc()
            self.telemetry.latency.labels(route).observe(seconds)
            if self.log and access_log.isEnabledFor(logging.INFO):
                now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
                access_log.info(json.dumps({"time": now, "client": _client(scope), "method": scope["method"],
                                            "path": scope["path"], "route": route, "status": status,
                                            "ms": round(seconds * 1000, 2), "pid": self.pid}))
