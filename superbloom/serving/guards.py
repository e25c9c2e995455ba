"""HTTP guards of the server: ASGI middleware for request-body limits and deadlines (413 / 408),
security headers and HEAD (Hardening, content_security_policy); and the connection protocol uvicorn
runs (HeadDeadline): uvicorn's own HTTP protocol, called through asyncio's Protocol interface, with
a deadline for the request head (which uvicorn lacks) and TCP_NODELAY. uvicorn's own limits and
timeouts do the rest (the head's size, idle keep-alive connections, open connections: launch.py).
serving/app.py puts the middleware around its FastAPI app; launch.py hands the protocol to uvicorn."""

import asyncio
import base64
import functools
import hashlib
import re
import socket

from .._extras import require_extra

require_extra("serve", "the HTTP server (superbloom serve)")  # before fastapi: a missing extra names its pip command
from fastapi.responses import JSONResponse
from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string


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


class HeadDeadline(asyncio.Protocol):
    """The connection protocol uvicorn runs (`uvicorn.run(http=...)`): uvicorn's own HTTP protocol,
    held and called through the asyncio.Protocol interface only (no subclass of its internals), plus
    what uvicorn lacks: a deadline for the request head and TCP_NODELAY.

    uvicorn times an idle connection out only after a response (keep-alive), so a client that connects
    and sends nothing, or half a request line, would hold its connection (and a file descriptor)
    forever. Here a connection's first byte, or the first byte after a response, starts a deadline of
    `head_timeout` seconds; the request's arrival at the app (RequestStarted, the outermost ASGI
    middleware, which finds this protocol by the client's address) cancels it. The request body has
    BodyLimit's deadline; an idle connection after a response, uvicorn's keep-alive timeout.

    TCP_NODELAY: asyncio sets it only on sockets whose `proto` is IPPROTO_TCP, and the listening socket
    the workers get from uvicorn's supervisor has proto 0, so without it a response's head and body
    writes meet Nagle's algorithm and the client's delayed ACK: ~40 ms per keep-alive request
    (measured: 48 ms vs 7 ms)."""

    head_timeout: float = 10.0  # seconds (with_head_timeout makes a factory with another)

    def __init__(self, config, server_state, app_state, _loop=None, head_timeout: float | None = None):
        inner = import_from_string(HTTP_PROTOCOLS[INNER_PROTOCOL])
        self.inner = inner(config=config, server_state=server_state, app_state=app_state, _loop=_loop)
        self.loop = _loop or asyncio.get_event_loop()
        if head_timeout is not None:
            self.head_timeout = head_timeout
        self.transport = self.peer = self.timer = None
        self.busy = False  # a request has reached the app and its response is not complete

    # asyncio.Protocol, forwarded to uvicorn's protocol
    def connection_made(self, transport):
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self.peer = _peer(transport.get_extra_info("peername"))
        if self.peer is not None:
            OPEN[self.peer] = self
        self._arm()
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self.busy and self.timer is None:  # the first byte of a request head: its deadline starts
            self._arm()
        self.inner.data_received(data)

    def eof_received(self):
        return self.inner.eof_received()

    def connection_lost(self, exc) -> None:
        self._cancel()
        if self.peer is not None and OPEN.get(self.peer) is self:
            del OPEN[self.peer]
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    # the request's progress, told by RequestStarted
    def request_started(self) -> None:
        self.busy = True
        self._cancel()

    def response_done(self) -> None:
        self.busy = False  # the next byte starts the next head's deadline; until then, uvicorn's keep-alive

    def _arm(self) -> None:
        self._cancel()
        self.timer = self.loop.call_later(self.head_timeout, self._timed_out)

    def _cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _timed_out(self) -> None:
        self.timer = None
        if not self.busy and self.transport is not None and not self.transport.is_closing():
            self.transport.close()


INNER_PROTOCOL = "h11"  # uvicorn's HTTP protocol that HeadDeadline runs (uvicorn's --http names)
OPEN: dict[tuple, HeadDeadline] = {}  # client address -> its connection's protocol, in this process


def _peer(name) -> tuple | None:
    return tuple(name[:2]) if isinstance(name, (tuple, list)) and len(name) >= 2 else None


def with_head_timeout(head_timeout: float):
    """A protocol factory for uvicorn.run(http=...): HeadDeadline with `head_timeout` seconds."""
    return functools.partial(HeadDeadline, head_timeout=head_timeout)


class RequestStarted:
    """ASGI middleware, outermost: tells the connection's HeadDeadline that its request head is complete
    (the app is called with it) and when the response is done, so that the head deadline never runs
    while a request is being read or answered."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        guard = OPEN.get(_peer(scope.get("client"))) if scope["type"] == "http" else None
        if guard is None:
            return await self.app(scope, receive, send)
        guard.request_started()
        try:
            await self.app(scope, receive, send)
        finally:
            guard.response_done()
