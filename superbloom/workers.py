"""serve --workers N: N server processes answering on one port, sharing one copy of the weights (issue 14).

    superbloom serve runs/synth/model --workers 2

uvicorn's process manager binds the socket once in a supervisor process (which loads no model),
spawns N worker processes that inherit it and restarts a worker that dies. Each worker builds the
app of serve.py, loading the model with its weights memory-mapped (mapped.py), so the N workers
share the weights' pages instead of holding N copies; what stays per worker is the vocabulary's
lookup tables, the decoding tables of the hash (int64 copies of hashing.safetensors' maps) and
torch itself.

How requests are distributed: per CONNECTION, by the kernel. All workers call accept() on the one
listening socket and the kernel hands each new connection to one waiting worker; every request of a
keep-alive connection then goes to that worker, and within a worker concurrent requests are batched
by its `Batcher` as with one process. So N workers help with N or more concurrent connections (a
load balancer, many clients), not with a single keep-alive client. Each response carries
`X-Superbloom-Worker: PID` to show which process answered.

The spawned workers get the settings through the environment variable SUPERBLOOM_SERVE (JSON): uvicorn
spawns them fresh (no fork of a process holding torch threads) and re-imports the app by name.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict

ENV = "SUPERBLOOM_SERVE"


def serve_workers(model_dir: str, host: str, port: int, config, threads: int, access_log: bool, device: str,
                  workers: int) -> None:
    """Run uvicorn with `workers` processes, each serving `model_dir` (see the module docstring)."""
    import uvicorn

    from .checkpoint import require_inference_checkpoint

    require_inference_checkpoint(model_dir)  # fail here, once, not in every worker
    os.environ[ENV] = json.dumps({"model": str(model_dir), "threads": threads, "device": device,
                                  "config": asdict(config)})
    uvicorn.run(f"{__name__}:app_from_env", factory=True, host=host, port=port, workers=workers,
                access_log=access_log, log_level="info", timeout_keep_alive=config.keep_alive_timeout,
                http=f"{__name__}:TimedH11Protocol")


def _settings() -> dict:
    if ENV not in os.environ:
        raise RuntimeError(f"{ENV} is not set: this app factory is for `superbloom serve --workers N`")
    return json.loads(os.environ[ENV])


def app_from_env():
    """uvicorn's app factory in each worker: the model loaded (weights mapped) and serve.py's app."""
    from .predictor import Predictor
    from .serve import ServeConfig, create_app

    s = _settings()
    app = create_app(Predictor.load(s["model"], s["threads"], s["device"]), ServeConfig(**s["config"]))
    app.add_middleware(WorkerHeader)
    return app


class WorkerHeader:
    """ASGI middleware: every HTTP response says which worker process answered (X-Superbloom-Worker)."""

    def __init__(self, app):
        self.app, self.pid = app, str(os.getpid()).encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_tagged(msg):
            if msg["type"] == "http.response.start":
                msg = dict(msg, headers=list(msg.get("headers", [])) + [(b"x-superbloom-worker", self.pid)])
            await send(msg)

        await self.app(scope, receive, send_tagged)


def __getattr__(name: str):
    """`TimedH11Protocol`: serve.py's h11 protocol with the configured head timeout, made on import in
    each worker (uvicorn pickles its config for the spawned workers; a class made in a function cannot be)."""
    if name == "TimedH11Protocol":
        import socket

        from .http_guards import timed_h11

        class NoDelayH11Protocol(timed_h11(_settings()["config"]["head_timeout"])):
            """TCP_NODELAY on every connection. asyncio sets it only on sockets whose `proto` is
            IPPROTO_TCP, and the listening socket the workers get from uvicorn's supervisor has proto
            0, so without this a response's head and body writes meet Nagle's algorithm and the
            client's delayed ACK: ~40 ms per keep-alive request (measured: 48 ms vs 7 ms)."""

            def connection_made(self, transport):
                sock = transport.get_extra_info("socket")
                if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                    try:
                        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    except OSError:
                        pass
                super().connection_made(transport)

        return NoDelayH11Protocol
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
