"""The server's telemetry (serving/telemetry.py): /metrics parses as Prometheus text and counts the
requests made, their latency, the batch sizes and the queue depth; /live and /ready (503 until the
warm-up query ran); one JSON access-log line per request; serve --log-level through the command line."""
import json
import logging
import os
import time

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

import superbloom as sb
from superbloom.serving.app import create_app
from superbloom.serving.config import ServeConfig

from conftest import _free_port, serving


def families(client) -> dict:
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=")
    return {f.name: f for f in text_string_to_metric_families(r.text)}


def sample(fams, family, name, **labels):
    """The value of sample `name` of `family` whose labels include `labels` (0.0 if none)."""
    return sum(s.value for s in fams[family].samples if s.name == name and labels.items() <= s.labels.items())


def wait_ready(client):
    for _ in range(200):
        if client.get("/ready").status_code == 200:
            return
        time.sleep(0.05)
    pytest.fail("/ready never answered 200")


def test_metrics_count_the_requests_made(tiny_predictor):
    with TestClient(create_app(tiny_predictor, ServeConfig(max_context=16))) as c:
        wait_ready(c)
        before = families(c)
        for ids in (["Jazz"], ["Paris", "London"], ["Copenhagen"]):
            assert c.post("/v1/predict", json={"context": ids, "k": 3}).status_code == 200
        assert c.post("/v1/predict", json={"context": [["Jazz"], ["Paris"]], "k": 2}).status_code == 200
        assert c.post("/v1/predict", json={"context": ["Jazz"], "k": 0}).status_code == 422
        assert c.get("/no/such/page").status_code == 404
        assert c.get("/v1/entities", params={"prefix": "Cop"}).status_code == 200
        after = families(c)
    counted = lambda fams, **lab: sample(fams, "superbloom_http_requests", "superbloom_http_requests_total", **lab)  # noqa: E731
    delta = lambda **lab: counted(after, **lab) - counted(before, **lab)  # noqa: E731
    assert delta(method="POST", route="/v1/predict", status="200") == 4
    assert delta(method="POST", route="/v1/predict", status="422") == 1
    assert delta(route="other", status="404") == 1  # an unknown path does not become a label of its own
    assert delta(route="/v1/entities", status="200") == 1
    assert delta(route="/metrics", status="200") == 1  # the first scrape (a scrape counts once it is answered)
    hist = "superbloom_http_request_duration_seconds"
    assert sample(after, hist, hist + "_count", route="/v1/predict") == 5
    assert sample(after, hist, hist + "_sum", route="/v1/predict") > 0
    # the warm-up query, then 5 queries (1 + 1 + 1 + 2): one model call each, the list's 2 in one or two
    batches = sample(after, "superbloom_batch_size", "superbloom_batch_size_count")
    queries = sample(after, "superbloom_batch_size", "superbloom_batch_size_sum")
    assert queries == 6 and 5 <= batches <= 6
    assert sample(after, "superbloom_queue_depth", "superbloom_queue_depth") == 0
    assert sample(after, "superbloom_ready", "superbloom_ready") == 1
    assert sample(after, "superbloom_workers", "superbloom_workers") == 1
    assert [s.labels["version"] for s in after["superbloom_build_info"].samples] == [sb.__version__]
    assert "pid" not in json.dumps([s.labels for f in after.values() for s in f.samples])  # no process is named


def test_route_labels_are_templates_whoever_answers(tiny_predictor):
    """A HEAD (answered as GET), a 413 of the body guard (before routing), a mount, an included router's
    route (405): each under its route's template."""
    with TestClient(create_app(tiny_predictor, ServeConfig(max_body_bytes=1000))) as c:
        assert c.head("/v1/model").status_code == 200
        assert c.post("/v1/predict", content=b"x" * 2000).status_code == 413
        assert c.get("/docs-assets/swagger-ui.css").status_code == 200
        assert c.get("/v1/similar").status_code == 405
        fams = families(c)
    counted = lambda **lab: sample(fams, "superbloom_http_requests", "superbloom_http_requests_total", **lab)  # noqa: E731
    assert counted(method="HEAD", route="/v1/model", status="200") == 1
    assert counted(method="POST", route="/v1/predict", status="413") == 1
    assert counted(method="GET", route="/docs-assets", status="200") == 1
    assert counted(method="GET", route="/v1/similar", status="405") == 1
    assert counted(route="other") == 0


def test_ready_is_503_until_the_warm_up_query_ran(tiny_predictor):
    app = create_app(tiny_predictor)
    c = TestClient(app)  # no `with`: the lifespan (the warm-up) does not run
    assert c.get("/live").status_code == 200
    r = c.get("/ready")
    assert r.status_code == 503 and r.headers["retry-after"] == "1" and "warming up" in r.json()["message"]
    with TestClient(app) as c:
        wait_ready(c)
        assert c.get("/ready").json() == {"status": "ready"} and c.get("/live").status_code == 200
        assert c.head("/ready").status_code == 200


def test_one_json_access_log_line_per_request(tiny_predictor, caplog):
    with TestClient(create_app(tiny_predictor)) as c, caplog.at_level(logging.INFO, "superbloom.serving.access"):
        assert c.post("/v1/predict", json={"context": ["Jazz"], "k": 2}).status_code == 200
        assert c.get("/v1/entities?prefix=secret").status_code == 200
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "superbloom.serving.access"]
    assert [(x["method"], x["path"], x["route"], x["status"]) for x in lines] == [
        ("POST", "/v1/predict", "/v1/predict", 200), ("GET", "/v1/entities", "/v1/entities", 200)]
    assert all(x["ms"] >= 0 and x["time"].endswith("Z") and isinstance(x["pid"], int) for x in lines)
    assert "secret" not in caplog.text  # the query string is not logged


def test_no_access_log(tiny_predictor, caplog):
    with TestClient(create_app(tiny_predictor, access_log=False)) as c, caplog.at_level(logging.INFO):
        assert c.get("/live").status_code == 200
    assert not [r for r in caplog.records if r.name == "superbloom.serving.access"]


@pytest.mark.parametrize("level, logged", [("info", True), ("warning", False)])
def test_serve_log_level_through_the_command_line(tiny_model, tmp_path, level, logged):
    """A real `superbloom serve` process: the JSON access lines on stderr at info, none at warning;
    /metrics over HTTP."""
    port, log = _free_port(), tmp_path / "server.log"
    with serving(["-m", "superbloom", "serve", str(tiny_model), "--port", str(port), "--log-level", level],
                 log, port) as url:
        assert httpx.post(url + "/v1/predict", json={"context": ["Jazz"], "k": 2}).status_code == 200
        text = httpx.get(url + "/metrics").text
    assert 'superbloom_http_requests_total{method="POST",route="/v1/predict",status="200"} 1.0' in text
    access = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert bool([a for a in access if a["route"] == "/v1/predict" and a["status"] == 200]) is logged
    assert ("Uvicorn running on" in log.read_text()) is logged  # uvicorn's own info lines follow the level too


@pytest.mark.slow
def test_workers_report_one_view_of_their_metrics_and_name_no_pid(tiny_model, tmp_path):
    """serve --workers 2: /metrics on whichever worker takes the connection counts every worker's
    requests (prometheus_client's multiprocess mode), superbloom_workers is 2, no response names a
    process, and each worker writes JSON access lines (its logging is configured in the worker process);
    the metrics folder is gone when the server stops."""
    port, log = _free_port(), tmp_path / "server.log"
    with serving(["-m", "superbloom", "serve", str(tiny_model), "--port", str(port), "--workers", "2"], log,
                 port) as url:
        n = 0
        for _ in range(200):  # a new connection each, until the access log shows both workers answering
            r = httpx.post(url + "/v1/predict", json={"context": ["Jazz"], "k": 2})
            assert r.status_code == 200 and not [h for h in r.headers if "worker" in h.lower()]
            n += 1
            if n % 10 == 0 and len(_access_pids(log)) == 2:
                break
        for _ in range(10):  # any worker's /metrics: the same totals
            fams = {f.name: f for f in text_string_to_metric_families(httpx.get(url + "/metrics").text)}
            assert sample(fams, "superbloom_http_requests", "superbloom_http_requests_total",
                          route="/v1/predict", status="200") == n
            assert sample(fams, "superbloom_workers", "superbloom_workers") == 2
            assert "pid" not in httpx.get(url + "/metrics").text
        folders = [line for line in open(f"/proc/{_server_pid(log, port)}/environ", "rb").read().split(b"\0")
                   if line.startswith(b"PROMETHEUS_MULTIPROC_DIR=")] if _server_pid(log, port) else []
    assert len(_access_pids(log)) == 2
    for folder in folders:  # removed by the supervisor when it stops
        assert not os.path.exists(folder.split(b"=", 1)[1].decode())


def _access_pids(log) -> set[int]:
    return {json.loads(line)["pid"] for line in log.read_text().splitlines() if line.startswith('{"time"')}


def _server_pid(log, port):
    """The first worker's pid (its environment holds the metrics folder), from the access log."""
    pids = sorted(_access_pids(log))
    return pids[0] if pids else None
