"""Fuzzing the HTTP API from its own OpenAPI schema with hypothesis: 600+ generated requests over every
operation (near-valid bodies, schema fields with any JSON values, arbitrary JSON, raw bytes, query
strings) and not one 5xx; every 4xx carries a message; the server keeps answering."""
import json

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from superbloom.serving.app import create_app
from superbloom.serving.config import ServeConfig

BUDGET = {"/v1/predict": 250, "/v1/expand": 300, "/v1/entities": 150}  # requests per operation
OTHERS = 25  # per operation without parameters (random query strings)
IDS = ["Copenhagen", "Jazz", "Miles_Davis", "People's_Republic_of_China", "Paris", "Nope", "", "%", "%C3%85"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=20)
ids = st.lists(st.sampled_from(IDS) | st.text(max_size=12), max_size=20)
NEAR_VALID = {  # values a client plausibly sends for each body field, edges included
    "context": ids | st.lists(ids, max_size=4), "seed": ids,
    "allow": st.none() | ids, "deny": st.none() | ids,  # /v1/predict's candidate lists
    "k": st.integers(-3, 60), "steps": st.integers(-3, 12), "random_seed": st.integers(-5, 2 ** 64),
    "temperature": st.floats(-1, 200) | st.sampled_from([float("nan"), float("inf"), 0.0, 1e-300]) | st.integers(-1, 3),
    "exact": st.booleans(), "include_seen": st.booleans() | st.none(), "ids": ids,  # /v1/similar-items' too
    "strategy": st.sampled_from(["argmax", "sample", "ARGMAX", ""]),
    "reject": st.floats(-1, 2) | st.sampled_from([float("nan"), 0.8, 1]),  # /v1/classify (setembed/http.py)
    "method": st.sampled_from(["auto", "knn", "head", "svm"]),
}


def operations(app) -> dict:
    """path -> (method, body properties or None, query parameter names), from the OpenAPI schema."""
    schema = app.openapi()
    ops = {}
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            props = None
            if "requestBody" in op:
                ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].split("/")[-1]
                props = list(schema["components"]["schemas"][ref]["properties"])
            ops[path] = (method.upper(), props, [p["name"] for p in op.get("parameters", [])])
    return ops


@st.composite
def body_request(draw, props):
    kind = draw(st.sampled_from(["near_valid", "near_valid", "near_valid", "fields_any", "any_json", "raw"]))
    if kind == "raw":
        ctype = draw(st.sampled_from(["application/json", "text/plain"]))
        return {"content": draw(st.binary(max_size=200)), "headers": {"content-type": ctype}}
    if kind == "any_json":
        body = draw(json_values)
    elif kind == "fields_any":
        body = {f: draw(json_values) for f in draw(st.lists(st.sampled_from(props + ["extra"]), unique=True))}
    else:  # the ids field always, the others sometimes
        body = {f: draw(NEAR_VALID[f]) for f in props if f in ("context", "seed", "ids") or draw(st.booleans())}
    content = json.dumps(body, allow_nan=True).encode()  # NaN / Infinity literals too
    return {"content": content, "headers": {"content-type": "application/json"}}


def query_request(params):
    names = st.sampled_from(params) if params else st.text(min_size=1, max_size=6)
    values = st.text(max_size=30) | st.integers(-5, 200).map(str) | st.sampled_from(["Cop", "miles d", "%C3%85"])
    return st.dictionaries(names, values, max_size=3).map(lambda q: {"params": q})


@pytest.fixture(scope="module")
def fuzz_client(tiny_predictor):
    app = create_app(tiny_predictor, ServeConfig(max_context=16, max_k=50, max_steps=8, max_body_bytes=2048))
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c, operations(app)


def test_fuzz_every_operation_no_5xx(fuzz_client):
    c, ops = fuzz_client
    assert set(ops) >= {"/v1/predict", "/v1/expand", "/v1/entities", "/v1/model", "/health"}
    statuses: dict[tuple[str, int], int] = {}
    for path, (method, props, params) in ops.items():
        strategy = body_request(props) if props else query_request(params)

        @settings(max_examples=BUDGET.get(path, OTHERS), deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(strategy)
        def one(kwargs):
            r = c.request(method, path, **kwargs)
            statuses[path, r.status_code] = statuses.get((path, r.status_code), 0) + 1
            assert r.status_code < 500, (method, path, kwargs, r.text)
            if r.status_code >= 400:
                assert r.json()["message"], r.text

        one()
    sent = sum(statuses.values())
    assert sent >= 600, statuses
    for path in BUDGET:  # both accepted and rejected requests were generated for every operation
        assert statuses.get((path, 200), 0) >= 10 and sum(n for (p, s), n in statuses.items()
                                                          if p == path and s >= 400) >= 10, statuses
    assert c.get("/health").json()["status"] == "ok"
