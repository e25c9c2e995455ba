"""Serving under hostile use (issue 32, class 6): one strictness for every route, heavy requests in a
bounded lane of their own (503 + Retry-After when it is full, light routes unaffected), and startup
errors (port in use, a bad --host) as one line with exit 2."""
import socket
import threading

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from fastapi import HTTPException
from fastapi.testclient import TestClient

from superbloom.cli import main
from superbloom.serving.app import create_app
from superbloom.serving.config import ServeConfig
from superbloom.serving.lanes import Lane

# (route, a valid body without k): every route with a `k` must refuse a boolean or a string for it
ROUTES_WITH_K = [("/v1/predict", {"context": ["Jazz"]}), ("/v1/expand", {"seed": ["Jazz"], "steps": 1}),
                 ("/v1/predict", {"context": [["Jazz"], ["Copenhagen"]]})]


@pytest.fixture(scope="module")
def client(tiny_predictor):
    with TestClient(create_app(tiny_predictor, ServeConfig(heavy_workers=1, heavy_queue=1))) as c:
        yield c


@pytest.mark.parametrize("route,body", ROUTES_WITH_K, ids=["predict", "expand", "predict-list"])
@pytest.mark.parametrize("k", [True, "5", 5.0, "ten", None])
def test_every_route_is_strict_about_k(client, route, body, k):
    r = client.post(route, json={**body, "k": k})
    assert r.status_code == 422, r.text
    assert r.json()["message"].startswith("k:"), r.json()["message"]


@pytest.mark.parametrize("route,body", ROUTES_WITH_K, ids=["predict", "expand", "predict-list"])
def test_a_valid_k_is_served(client, route, body):
    assert client.post(route, json={**body, "k": 5}).status_code == 200


def test_a_full_heavy_lane_is_503_with_retry_after_and_light_routes_still_answer(client):
    lane = client.app.state.heavy
    lane.admitted = lane.workers + lane.queue  # as if that many heavy requests were running and waiting
    try:
        for route, body in ROUTES_WITH_K[1:]:  # expand, a list of contexts
            r = client.post(route, json=body)
            assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
            assert "busy with heavy requests" in r.json()["message"]
        assert client.post("/v1/predict", json={"context": ["Jazz"], "k": 3}).status_code == 200  # light
        assert client.get("/health").status_code == 200
        assert client.get("/v1/entities", params={"prefix": "Ja"}).status_code == 200
    finally:
        lane.admitted = 0
    assert client.post("/v1/expand", json={"seed": ["Jazz"], "steps": 1}).status_code == 200
    assert lane.admitted == 0  # every admission released


def test_lane_runs_workers_queues_the_rest_and_refuses_beyond():
    """Real threads: one running and one waiting in a lane of 1 + 1; a third is refused at once, while
    work in the shared thread pool (the light routes') still runs."""
    release = threading.Event()
    lane = Lane("heavy", workers=1, queue=1)
    done = []

    async def heavy():
        done.append(await lane.run(release.wait, 30))

    async def scenario():
        async with anyio.create_task_group() as tg:
            tg.start_soon(heavy)
            tg.start_soon(heavy)
            await wait_all_tasks_blocked()
            assert lane.admitted == 2
            with pytest.raises(HTTPException) as refused:
                await lane.run(release.wait, 30)
            assert refused.value.status_code == 503 and refused.value.headers == {"Retry-After": "1"}
            with anyio.fail_after(10):  # the shared pool is free: a light request is not starved
                assert await anyio.to_thread.run_sync(lambda: 42) == 42
            release.set()
        assert done == [True, True] and lane.admitted == 0 and lane.refused == 1

    anyio.run(scenario)


def test_lane_settings_are_checked():
    with pytest.raises(ValueError, match="heavy_workers"):
        ServeConfig(heavy_workers=0)
    with pytest.raises(ValueError, match="workers must be >= 1"):
        Lane("x", 0, 1)


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_port_in_use_is_one_line_and_exit_2(tiny_model, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert main(["serve", str(tiny_model), "--port", str(port)]) == 2
    line = _one_error_line(capsys)
    assert f"--port {port}" in line and "already in use" in line


@pytest.mark.parametrize("host", ["no-such-host.invalid", "::1::", "256.1.1.1"])
def test_bad_host_is_one_line_and_exit_2(tiny_model, capsys, host):
    assert main(["serve", str(tiny_model), "--host", host, "--port", "0"]) == 2
    assert f"--host {host!r}" in _one_error_line(capsys)


def test_serve_queue_flags_are_checked(capsys):
    with pytest.raises(SystemExit) as e:
        main(["serve", "m", "--heavy-queue", "-1"])
    assert e.value.code == 2
    assert "argument --heavy-queue" in _one_error_line(capsys)
