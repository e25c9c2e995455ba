"""The server against slow and odd clients: a request body that never finishes is a 408 and the
connection closes (within `body_timeout`), idle keep-alive connections close, HEAD answers like GET,
and every response carries nosniff, a frame policy and a content-security policy."""
import base64
import hashlib
import json
import re
import socket
import time

import httpx
import pytest
from conftest import _free_port, serving
from fastapi.testclient import TestClient

from superbloom.serving.app import create_app
from superbloom.serving.config import ServeConfig

TIMEOUT = 1.0  # body_timeout, keep_alive_timeout and head_timeout of the server under test (seconds)
SERVE = ("import sys; from superbloom.serving.launch import ServeConfig, serve; serve(sys.argv[1], port=int(sys.argv[2]), "
         f"config=ServeConfig(body_timeout={TIMEOUT}, keep_alive_timeout={TIMEOUT}, head_timeout={TIMEOUT}), "
         "access_log=False)")


@pytest.fixture(scope="module")
def url(tiny_model, tmp_path_factory):
    """`serve()` (uvicorn, as `superbloom serve` runs it) with short timeouts, in a subprocess."""
    port = _free_port()
    with serving(["-c", SERVE, str(tiny_model), str(port)], tmp_path_factory.mktemp("serve") / "server.log",
                 port) as base:
        yield base


def raw(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)), timeout=10 * TIMEOUT)
    return s


def read_until_closed(s: socket.socket) -> bytes:
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return data


HEADERS = (b"POST /v1/predict HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
           b"Content-Length: 100\r\n\r\n")


def test_unfinished_body_is_a_408_and_the_connection_closes(url):
    with raw(url) as s:
        t0 = time.monotonic()
        s.sendall(HEADERS + b'{"context"')  # 10 of the 100 bytes announced, then nothing
        reply = read_until_closed(s)  # returns once the server closes the connection
        elapsed = time.monotonic() - t0
    assert 0.8 * TIMEOUT < elapsed < TIMEOUT + 5, elapsed
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), reply
    assert b"connection: close" in head.lower() and b"x-content-type-options: nosniff" in head.lower()
    assert json.loads(body)["message"] == f"request body not received within {TIMEOUT:g} s (got 10 bytes of 100)"


def test_trickling_body_is_timed_out_as_a_whole(url):
    with raw(url) as s:
        t0 = time.monotonic()
        s.sendall(HEADERS)
        reply = b""
        for _ in range(int(4 * TIMEOUT / 0.2)):  # one byte every 0.2 s: each wait is short, the whole is not
            try:
                s.sendall(b" ")
            except OSError:  # closed by the server
                break
            time.sleep(0.2)
            s.setblocking(False)
            try:
                reply += s.recv(65536)
            except BlockingIOError:
                pass
            s.setblocking(True)
            if reply:
                break
        elapsed = time.monotonic() - t0
    assert reply.startswith(b"HTTP/1.1 408"), reply
    assert elapsed < TIMEOUT + 3, elapsed


def test_idle_keep_alive_connection_is_closed(url):
    with raw(url) as s:
        t0 = time.monotonic()
        s.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        reply = read_until_closed(s)  # nothing more is sent: the server closes after keep_alive_timeout
        elapsed = time.monotonic() - t0
    assert reply.startswith(b"HTTP/1.1 200") and reply.count(b"HTTP/1.1") == 1
    assert 0.8 * TIMEOUT < elapsed < TIMEOUT + 5, elapsed


@pytest.mark.parametrize("sent", [b"", b"GET /health HTTP/1.1\r\nHost: local", b"GET /he"])
def test_connection_without_a_complete_request_head_is_closed(url, sent):
    with raw(url) as s:
        t0 = time.monotonic()
        s.sendall(sent)
        assert read_until_closed(s) == b""
        elapsed = time.monotonic() - t0
    assert 0.8 * TIMEOUT < elapsed < TIMEOUT + 5, elapsed


def test_partial_head_after_a_keep_alive_response_is_closed(url):
    """The half request arrives after the response: it cancels uvicorn's keep-alive timer, and then
    only the head deadline closes the connection."""
    with raw(url) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        reply = b""
        while b'"status":"ok"' not in reply:
            reply += s.recv(65536)
        time.sleep(0.3 * TIMEOUT)
        t0 = time.monotonic()
        s.sendall(b"GET /health HTTP/1.1\r\nHo")
        assert read_until_closed(s) == b""
        elapsed = time.monotonic() - t0
    assert 0.8 * TIMEOUT < elapsed < TIMEOUT + 5, elapsed


def test_slow_but_steady_requests_are_served(url):
    """Keep-alive: three requests on one connection, each sent in pieces within the deadlines."""
    with raw(url) as s:
        for _ in range(3):
            for piece in (b"GET /health HTTP/1.1\r\n", b"Host: localhost\r\n", b"\r\n"):
                s.sendall(piece)
                time.sleep(0.2 * TIMEOUT)
            reply = s.recv(65536)
            assert reply.startswith(b"HTTP/1.1 200"), reply
            if b'"status":"ok"' not in reply:
                s.recv(65536)


def test_a_complete_body_is_still_served(url):
    r = httpx.post(url + "/v1/predict", json={"context": ["Copenhagen"], "k": 3})
    assert r.status_code == 200 and len(r.json()["predictions"]) == 3


@pytest.mark.parametrize("path", ["/", "/health", "/v1/model", "/v1/entities?prefix=cop&limit=3", "/docs",
                                  "/openapi.json", "/docs-assets/swagger-ui.css", "/no-such-page"])
def test_head_answers_like_get(url, path):
    get, head = httpx.get(url + path), httpx.head(url + path)
    assert head.status_code == get.status_code != 405
    assert head.content == b""
    for name in ("content-type", "content-length", "content-security-policy", "x-frame-options"):
        assert head.headers.get(name) == get.headers.get(name), name
    assert int(head.headers["content-length"]) == len(get.content)


def test_head_on_a_post_route_is_405(url):
    r = httpx.head(url + "/v1/predict")
    assert r.status_code == 405 and r.headers["allow"] == "POST" and r.content == b""


def check_security_headers(r: httpx.Response):
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["x-frame-options"] == "DENY"
    csp = dict(d.strip().split(" ", 1) for d in r.headers["content-security-policy"].split(";"))
    assert csp["default-src"] == "'none'" and csp["frame-ancestors"] == "'none'"
    assert "unsafe" not in r.headers["content-security-policy"]
    return csp


@pytest.mark.parametrize("method,path,body,status", [
    ("GET", "/", None, 200), ("GET", "/health", None, 200), ("GET", "/docs", None, 200),
    ("GET", "/docs-assets/swagger-ui-bundle.js", None, 200), ("GET", "/nope", None, 404),
    ("POST", "/v1/predict", {"context": []}, 422), ("POST", "/v1/predict", {"context": ["x" * 2_000_000]}, 413),
    ("GET", "/v1/predict", None, 405), ("POST", "/v1/predict", "{", 422),
])
def test_every_response_has_the_security_headers(url, method, path, body, status):
    content = body if isinstance(body, str) else None
    r = httpx.request(method, url + path, json=None if content else body, content=content,
                      headers={"Content-Type": "application/json"} if body is not None else None)
    assert r.status_code == status
    check_security_headers(r)


def inline_hashes(html: str, tag: str) -> set[str]:
    blocks = re.findall(rf"<{tag}>(.*?)</{tag}>", html, flags=re.S)
    return {"'sha256-" + base64.b64encode(hashlib.sha256(b.encode()).digest()).decode() + "'" for b in blocks}


def test_csp_allows_exactly_the_inline_script_and_style_of_the_page_and_docs(url):
    page, docs = httpx.get(url + "/"), httpx.get(url + "/docs")
    csp = check_security_headers(page)
    scripts, styles = set(csp["script-src"].split()), set(csp["style-src"].split())
    want_scripts = inline_hashes(page.text, "script") | inline_hashes(docs.text, "script")
    assert len(inline_hashes(page.text, "script")) == 1 and len(inline_hashes(docs.text, "script")) == 1
    assert scripts == {"'self'"} | want_scripts
    assert styles == {"'self'"} | inline_hashes(page.text, "style") | inline_hashes(docs.text, "style")
    assert csp["connect-src"] == "'self'"


def test_a_500_also_has_the_headers(tiny_predictor):
    app = create_app(tiny_predictor, ServeConfig())

    class Broken:
        def rank(self, *args):
            raise RuntimeError("boom")

    app.state.batcher.predictor = Broken()
    with TestClient(app, raise_server_exceptions=False) as client:
        r = client.post("/v1/predict", json={"context": ["Copenhagen"]})
    assert r.status_code == 500 and r.json()["message"] == "internal server error"
    check_security_headers(r)


def test_timeouts_are_validated():
    with pytest.raises(ValueError, match="body_timeout"):
        ServeConfig(body_timeout=0)
    with pytest.raises(ValueError, match="keep_alive_timeout"):
        ServeConfig(keep_alive_timeout=float("nan"))
