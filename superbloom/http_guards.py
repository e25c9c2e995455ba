"""HTTP guards of the server, as ASGI middleware and a uvicorn protocol: request-body limits and
deadlines (413 / 408), security headers and HEAD (Hardening, content_security_policy), and a deadline
for the request head (timed_h11). serve.py puts them around its FastAPI app; workers.py uses the same
protocol in each worker process."""

import asyncio
import base64
import hashlib
import re

from fastapi.responses import JSONResponse


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


def timed_h11(head_timeout: float):
    """uvicorn's h11 protocol plus a deadline for the request head. uvicorn times an idle connection
    out only after a response (keep-alive), so a client that connects and sends nothing, or half a
    request line, would otherwise hold its connection (and a file descriptor) forever."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimedH11Protocol(H11Protocol):
        head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport):
            super().connection_made(transport)
            self.head_timer = self.loop.call_later(head_timeout, self.head_timed_out)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            waiting = self.conn.their_state is h11.IDLE and not self.transport.is_closing()
            if not waiting and self.head_timer is not None:
                self.head_timer.cancel()
                self.head_timer = None
            elif waiting and self.head_timer is None:  # a partial head after a keep-alive response
                self.head_timer = self.loop.call_later(head_timeout, self.head_timed_out)

        def head_timed_out(self) -> None:
            self.head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

        def connection_lost(self, exc) -> None:
            if self.head_timer is not None:
                self.head_timer.cancel()
            super().connection_lost(exc)

    return TimedH11Protocol
