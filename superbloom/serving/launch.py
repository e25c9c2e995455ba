"""The server launcher: `superbloom serve` in one process or in N worker processes on one port.

    superbloom serve runs/wiki/model --port 8000        # then open http://127.0.0.1:8000/ (API docs: /docs)
    superbloom serve runs/synth/model --workers 2       # N processes sharing one copy of the weights

The app itself (routes, batching, guards) is serving/app.py; this module imports it, never the
reverse, and only inside the functions that serve, so importing this module does not import torch.

One process: the model is loaded here (errors are raised before the server starts) and its app is
run by uvicorn with its own limits and timeouts (keep-alive, the request head's size, open
connections: `uvicorn_limits`) and guards.HeadDeadline's deadline for the request head. Before
it serves, what loading left alive is frozen out of the garbage collector's full passes
(`freeze_heap`), in each worker too.

N workers: uvicorn's process manager binds the socket once in a supervisor process (which loads no
model), spawns N worker processes that inherit it and restarts a worker that dies. Each worker builds
the same app (`app_from_env`), loading the model with its weights memory-mapped (mapped.py), so the N
workers share the weights' pages instead of holding N copies; what stays per worker is the
vocabulary's lookup tables, the decoding tables of the hash (int64 copies of hashing.safetensors'
maps) and torch itself. Requests are distributed per CONNECTION, by the kernel: all workers call
accept() on the one listening socket and the kernel hands each new connection to one waiting worker;
every request of a keep-alive connection then goes to that worker, and within a worker concurrent
requests are batched as with one process. So N workers help with N or more concurrent connections (a
load balancer, many clients), not with a single keep-alive client. No response says which process
answered (the access log, on the server's side, does: its "pid"). The workers get the settings
through the environment variable SUPERBLOOM_SERVE (JSON): uvicorn spawns them fresh (no fork of a
process holding torch threads) and imports the app factory and the protocol class below by name.

Observability (telemetry.py): GET /metrics, /live, /ready and a JSON-line access log per request on
stderr (uvicorn's own access log is off). With N workers the metrics are one view of them all: the
supervisor makes a private folder for prometheus_client's multiprocess mode (PROMETHEUS_MULTIPROC_DIR,
set before the workers start, removed when the server stops), each worker writes its metrics there,
and /metrics on any worker answers for all of them (counts and histograms summed).
"""
from __future__ import annotations

import errno
import functools
import json
import os
import shutil
import socket
import tempfile
from dataclasses import asdict

from .config import ServeConfig

ENV = "SUPERBLOOM_SERVE"
MULTIPROC = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's multiprocess folder (telemetry.py)

__all__ = ["ENV", "ServeConfig", "WorkerProtocol", "app_from_env", "check_address", "serve", "uvicorn_limits"]


def uvicorn_limits(config: ServeConfig) -> dict:
    """uvicorn's own limits and timeouts, from `config`: an idle keep-alive connection's lifetime, the
    largest request head it parses (h11's incomplete-event limit: a longer head is a 400) and the open
    connections and requests beyond which it answers 503."""
    return {"timeout_keep_alive": config.keep_alive_timeout, "h11_max_incomplete_event_size": config.max_head_bytes,
            "limit_concurrency": config.max_connections}


def serve(model_dir: str, host: str = "127.0.0.1", port: int = 8000, config: ServeConfig = ServeConfig(),
          threads: int = 1, access_log: bool = True, device: str = "auto", embed: str | None = None,
          workers: int = 1, log_level: str = "info", part: str = "whole") -> None:
    """Load the model (on `device`) and serve it with uvicorn until interrupted. threads: torch CPU
    threads (0: torch's default, one per core). embed: a set-embedding directory for /v1/similar,
    /v1/classify. workers > 1: that many processes on the one port (see the module docstring).
    access_log: the JSON-line access log (telemetry.py; uvicorn's own is off). log_level: uvicorn's
    loggers' level, and in each worker process the `superbloom` logger's (_log.py; in one process the
    caller, e.g. the command line, configures it). part: what ranks, the whole model or a part of a hybrid
    (inference/parts.py: "network", "term")."""
    import uvicorn

    from .guards import with_head_timeout

    check_address(host, port)  # one line and exit 2 before the model loads, not uvicorn's six lines and exit 3
    if workers > 1:
        if embed:
            raise ValueError("serve --embed runs in one process for now; drop --workers or --embed")
        return _serve_workers(model_dir, host, port, config, threads, access_log, device, workers, log_level, part)

    from ..inference.loader import load
    from ..model.device import set_threads
    from .app import create_app

    set_threads(threads)  # the server's process: its one thread setting
    app = create_app(load(model_dir, device, part=part), config, access_log=access_log)
    if embed:
        from ..setembed.embedder import load_embedder
        app.state.embedder = load_embedder(embed, device)
    freeze_heap()
    uvicorn.run(app, host=host, port=port, access_log=False, log_level=log_level,
                http=with_head_timeout(config.head_timeout), **uvicorn_limits(config))


def check_address(host: str, port: int) -> None:
    """ValueError naming --host or --port when the server could not listen there: a host name that does
    not resolve, an address not of this machine, a port in use or not ours to bind. A test bind, closed
    at once (uvicorn binds the same way, SO_REUSEADDR on)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError, ValueError) as e:
        raise ValueError(f"--host {host!r}: not an address or a host name this machine resolves "
                         f"({getattr(e, 'strerror', None) or e})") from None
    family, kind, proto, _, address = infos[0]
    try:
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(address)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise ValueError(f"--port {port}: {host}:{port} is already in use (another server?); "
                             "choose another --port") from None
        if e.errno in (errno.EACCES, errno.EPERM):
            raise ValueError(f"--port {port}: not allowed to listen on {host}:{port} ({e.strerror}); "
                             "ports below 1024 need privileges") from None
        raise ValueError(f"--host {host}: cannot listen on {host}:{port} ({e.strerror})") from None


def _serve_workers(model_dir: str, host: str, port: int, config: ServeConfig, threads: int, access_log: bool,
                   device: str, workers: int, log_level: str, part: str = "whole") -> None:
    """uvicorn's supervisor with `workers` processes, each running `app_from_env`."""
    import uvicorn

    from ..storage.checkpoint import require_inference_checkpoint

    require_inference_checkpoint(model_dir)  # fail here, once, not in every worker
    os.environ[ENV] = json.dumps({"model": str(model_dir), "threads": threads, "device": device,
                                  "config": asdict(config), "access_log": access_log, "log_level": log_level,
                                  "part": part})
    metrics = tempfile.mkdtemp(prefix="superbloom-metrics-")  # ours alone: removed when the server stops
    os.environ[MULTIPROC] = metrics
    try:
        uvicorn.run(f"{__name__}:app_from_env", factory=True, host=host, port=port, workers=workers,
                    access_log=False, log_level=log_level, http=WorkerProtocol,  # pickled by name for the workers
                    **uvicorn_limits(config))
    finally:
        del os.environ[MULTIPROC]
        shutil.rmtree(metrics, ignore_errors=True)


@functools.cache
def _settings() -> dict:
    if ENV not in os.environ:
        raise RuntimeError(f"{ENV} is not set: this app factory is for `superbloom serve --workers N`")
    return json.loads(os.environ[ENV])


def app_from_env():
    """uvicorn's app factory in each worker: the model loaded (weights mapped) and serving.app's app."""
    from .._log import configure
    from ..inference.loader import load
    from ..model.device import set_threads
    from .app import create_app

    s = _settings()
    configure(s.get("log_level", "info"))  # a fresh process: the access log and the library's messages on stderr
    set_threads(s["threads"])  # a fresh process: the thread setting serve was given
    app = create_app(load(s["model"], s["device"], part=s.get("part", "whole")), ServeConfig(**s["config"]),
                     access_log=s.get("access_log", True))
    freeze_heap()
    return app


def freeze_heap() -> None:
    """Collect the garbage of loading, then move every object alive (the model, the vocabulary, torch,
    the app) out of the garbage collector's reach (gc.freeze): otherwise each full
    collection while serving walks them all, holding the GIL, and every request in flight waits."""
    import gc

    gc.collect()
    gc.freeze()


def WorkerProtocol(**kwargs):  # noqa: N802 - what uvicorn calls as the protocol "class"
    """The connection protocol of each worker (uvicorn's config reaches the workers pickled, this factory
    by its name; uvicorn calls it as its protocol class): guards.HeadDeadline with the request-head
    deadline of the settings in SUPERBLOOM_SERVE."""
    from .guards import HeadDeadline

    return HeadDeadline(**kwargs, head_timeout=_settings()["config"]["head_timeout"])
