"""HTTP guards of the server, as ASGI middleware and uvicorn protocols: request-body limits and
deadlines (413 / 408), security headers and HEAD (Hardening, content_security_policy), a deadline
for the request head (TimedH11Protocol, timed_h11), TCP_NODELAY on sockets inherited from uvicorn's
supervisor (NoDelayH11Protocol) and the answering worker's pid (WorkerHeader). serving/app.py puts the
middleware around its FastAPI app; serve.py hands the protocols to uvicorn."""

import asyncio
import base64
import hashlib
import os
import re
import socket

from .._extras import require_extra

require_extra("serve", "the HTTP server (superbloom serve)")  # before fastapi: a missing extra names its pip command
import h11
from fastapi.responses import JSONResponse
from uvicorn.protocols.http.h11_impl import H11Protocol


def error_response(status: int, message: str, detail=None, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"message": message, "detail": detail if detail is not None else message}, status,
                        headers=headers)


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes is answered 413 before the app reads it, one
    not received within `timeout` seconds (a stalled or trickling client) 408, closing the connection."""

    def __init__(self, app, limit: int, timeout: float = 10.0):
        self.app, self.limit, self.timeout = app, limit, timeout

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        too_big = error_response(413, f"request body over the limit of {self.limit} bytes")
        declared = dict(scope["headers"]).get(b"content-length", b"").decode("latin-1")
        if declared.isdigit() and int(declared) > self.limit:
            return await too_big(scope, receive, send)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        messages, size = [], 0
        while True:  # buffer the (small) body, counting bytes whatever Content-Length said
            try:
                msg = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                of = f" of {declared}" if declared.isdigit() else ""
                late = error_response(408, f"request body not received within {self.timeout:g} s (got {size} bytes{of})",
                              headers={"Connection": "close"})
                return await late(scope, receive, send)
            messages.append(msg)
            size += len(msg.get("body", b""))
            if size > self.limit:
                return await too_big(scope, receive, send)
            if msg["type"] != "http.request" or not msg.get("more_body"):
                break

        async def replay():
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


def _sha256_sources(html: str, tag: str) -> list[str]:
    """CSP source expressions ('sha256-...') for the inline <tag> elements of `html` (those without src)."""
    blocks = re.findall(rf"<{tag}>(.*?)</{tag}>", html, flags=re.S)
    return [f"'sha256-{base64.b64encode(hashlib.sha256(b.encode()).digest()).decode()}'" for b in blocks]


def content_security_policy(*pages: str) -> str:
    """Same-origin only; inline scripts and styles only those of `pages`, by hash; no framing."""
    scripts = " ".join(h for p in pages for h in _sha256_sources(p, "script"))
    styles = " ".join(h for p in pages for h in _sha256_sources(p, "style"))
    return (f"default-src 'none'; script-src 'self' {scripts}; style-src 'self' {styles}; img-src 'self' data:; "
            "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


class Hardening:
    """ASGI middleware, outermost: HEAD is answered as GET without the body (FastAPI's GET routes alone
    answer 405), and every response, errors included, gets the security headers."""

    def __init__(self, app, csp: str):
        self.app = app
        self.headers = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
                        (b"content-security-policy", csp.encode()), (b"referrer-policy", b"no-referrer")]

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        head = scope["method"] == "HEAD"
        started = False

        async def send_hardened(msg):
            nonlocal started
            if msg["type"] == "http.response.start":
                started = True
                names = {k.lower() for k, _ in msg.get("headers", [])}
                msg = {**msg, "headers": [*msg.get("headers", []), *(h for h in self.headers if h[0] not in names)]}
            elif msg["type"] == "http.response.body" and head:
                msg = {**msg, "body": b""}
            await send(msg)

        try:
            await self.app({**scope, "method": "GET"} if head else scope, receive, send_hardened)
        except Exception:
            if not started:  # the 500 that uvicorn would send, with the headers
                await error_response(500, "internal server error")(scope, receive, send_hardened)
            raise


class TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol plus a deadline for the request head. uvicorn times an idle connection
    out only after a response (keep-alive), so a client that connects and sends nothing, or half a
    request line, would otherwise hold its connection (and a file descriptor) forever. The deadline is
    the class's `head_timeout` (timed_h11 makes a subclass with a given one)."""

    head_timeout: float = 10.0  # seconds
    head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport):
        super().connection_made(transport)
        self.head_timer = self.loop.call_later(self.head_timeout, self.head_timed_out)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        waiting = self.conn.their_state is h11.IDLE and not self.transport.is_closing()
        if not waiting and self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None
        elif waiting and self.head_timer is None:  # a partial head after a keep-alive response
            self.head_timer = self.loop.call_later(self.head_timeout, self.head_timed_out)

    def head_timed_out(self) -> None:
        self.head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()

    def connection_lost(self, exc) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
        super().connection_lost(exc)


def timed_h11(head_timeout: float) -> type[TimedH11Protocol]:
    """TimedH11Protocol with a deadline of `head_timeout` seconds for the request head."""
    return type("TimedH11Protocol", (TimedH11Protocol,), {"head_timeout": head_timeout})


class NoDelayH11Protocol(TimedH11Protocol):
    """TCP_NODELAY on every connection. asyncio sets it only on sockets whose `proto` is IPPROTO_TCP,
    and the listening socket the workers get from uvicorn's supervisor has proto 0, so without this a
    response's head and body writes meet Nagle's algorithm and the client's delayed ACK: ~40 ms per
    keep-alive request (measured: 48 ms vs 7 ms)."""

    def connection_made(self, transport):
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        super().connection_made(transport)


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
