"""The HTTP service in process (fastapi.testclient): every endpoint, every kind of bad input (4xx
with a message naming the field, never a 5xx), batching, and `superbloom serve` as a real server."""
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

import superbloom as sb
from superbloom.serving.autocomplete import PrefixIndex
from superbloom.serving.batcher import Batcher
from superbloom.heads.beam import DecodeConfig
from superbloom.inference.expand import ExpandConfig, expand
from superbloom.serving.app import create_app
from superbloom.serving.config import ServeConfig

LIMITS = ServeConfig(max_context=8, max_k=50, max_steps=20, max_body_bytes=4096)


@pytest.fixture(scope="module")
def client(tiny_predictor):
    with TestClient(create_app(tiny_predictor, LIMITS)) as c:
        yield c


def post(client, path, body):
    r = client.post(path, json=body)
    return r.status_code, r.json()


# ---------------------------------------------------------------- endpoints


def test_predict_matches_the_library(client, tiny_predictor):
    status, out = post(client, "/v1/predict", {"context": ["Copenhagen", "Not_A_Page", "Paris"], "k": 7})
    assert status == 200
    ref = tiny_predictor.predict(["Copenhagen", "Paris"], k=7)
    assert [p["id"] for p in out["predictions"]] == [i for i, _ in ref.items]
    assert [p["score"] for p in out["predictions"]] == pytest.approx([s for _, s in ref.items], abs=1e-5)
    assert out["unknown"] == ["Not_A_Page"] and out["context"] == ["Copenhagen", "Paris"]
    assert out["exact"] == ref.exact and out["beam"] == ref.beam == 7
    assert not {"Copenhagen", "Paris"} & {p["id"] for p in out["predictions"]}


def test_predict_exact_is_certified_and_display_names_are_decoded(client, tiny_predictor):
    status, out = post(client, "/v1/predict", {"context": ["People's_Republic_of_China"], "k": 5, "exact": True})
    assert status == 200 and out["exact"] is True
    assert out["context"] == ["People%27s_Republic_of_China"]
    ref = tiny_predictor.predict(["People's_Republic_of_China"], k=5, decode=DecodeConfig(exhaustive=True))
    assert [p["id"] for p in out["predictions"]] == [i for i, _ in ref.items]
    for p in out["predictions"]:
        assert p["display"] == tiny_predictor.vocab.display(tiny_predictor.vocab.get(p["id"]))


def test_expand_matches_the_library(client, tiny_predictor):
    body = {"seed": ["Jazz", "Nope"], "steps": 4, "strategy": "sample", "temperature": 3.0, "random_seed": 11}
    status, out = post(client, "/v1/expand", body)
    assert status == 200 and out["seed"] == ["Jazz"] and out["unknown"] == ["Nope"]
    ref = expand(tiny_predictor, ["Jazz"], ExpandConfig(4, "sample", 3.0, 10, 11))
    assert [a["id"] for a in out["added"]] == [a.id for a in ref.added]
    assert post(client, "/v1/expand", body)[1] == out  # seeded
    status, out = post(client, "/v1/expand", {"seed": ["Jazz"], "steps": 3})
    assert status == 200 and [a["id"] for a in out["added"]] == [a.id for a in expand(tiny_predictor, ["Jazz"],
                                                                                          ExpandConfig(3)).added]
    assert all(set(a) == {"id", "display", "score", "exact"} for a in out["added"])


def test_entities_autocomplete(client, tiny_predictor):
    out = client.get("/v1/entities", params={"prefix": "cop", "limit": 3}).json()
    assert 1 <= len(out) <= 3 and all(e["display"].casefold().startswith("cop") for e in out)
    assert "Copenhagen" in [e["id"] for e in client.get("/v1/entities?prefix=Copenh").json()]
    counts = [e["count"] for e in client.get("/v1/entities?prefix=a&limit=50").json()]
    assert len(counts) == 50 and counts == sorted(counts, reverse=True)
    assert [e["id"] for e in client.get("/v1/entities?prefix=miles davis").json()] == ["Miles_Davis"]
    people = client.get("/v1/entities", params={"prefix": "People's Rep"}).json()
    assert {"id": "People%27s_Republic_of_China", "display": "People's_Republic_of_China"}.items() <= people[0].items()
    top = client.get("/v1/entities?limit=5").json()  # no prefix: the most frequent ids
    assert [e["id"] for e in top] == tiny_predictor.vocab.strings[:5]
    assert client.get("/v1/entities?prefix=zzzzqqq").json() == []


def test_prefix_index_matches_a_scan():
    from superbloom.data.vocab import Vocab

    words = ["b_x", "A%20b", "ab", "Abc", "abd", "b", "%C3%85land", "ä", "a"]
    vocab = Vocab(words, np.arange(len(words))[::-1].copy())
    index = PrefixIndex(vocab)
    index.SCAN = 3  # also the scan path for long ranges
    for prefix in ["", "a", "A B", "ab", "abc", "b", "b x", "å", "Å", "z"]:
        expect = [i for i, w in enumerate(words)
                  if vocab.display(i).replace("_", " ").lower().startswith(prefix.lower())]
        assert index.search(prefix, 100).tolist() == expect
        assert index.search(prefix, 2).tolist() == expect[:2]


def test_model_health_docs_and_page(client, tiny_predictor):
    info = client.get("/v1/model").json()
    assert info["n_ids"] == len(tiny_predictor.vocab) == 4093
    assert info["n_tokens"] == tiny_predictor.hashing.n_tokens and info["version"] == sb.__version__
    assert info["parameters"] == tiny_predictor.n_parameters
    assert info["data"]["links"] == 119_882 and info["data"]["train"]["sets"] > 0
    assert info["hash"]["alpha"] == 8 and info["model"]["layers"] == 1 and info["serving"]["max_context"] == 8
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["n_ids"] == 4093
    docs = client.get("/docs")
    assert docs.status_code == 200 and "https://" not in docs.text  # Swagger UI served locally: works offline
    assert client.get("/docs-assets/swagger-ui-bundle.js").status_code == 200
    assert client.get("/docs-assets/swagger-ui.css").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/predict", "/v1/expand", "/v1/entities", "/v1/model", "/health"} <= set(paths)
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "/v1/predict" in page.text and "/v1/entities" in page.text
    for external in ("http://", "https://", "src=\"//", "href=\"//", "@import"):
        assert external not in page.text  # self-contained: works offline


# ---------------------------------------------------------------- bad input

BAD = [  # (path, body, status, text the message must contain)
    ("/v1/predict", {"context": ["Nope", "Nada"]}, 422, "context: none of the 2 ids"),
    ("/v1/predict", {"context": []}, 422, "context: List should have at least 1 item"),
    ("/v1/predict", {"context": ["Jazz"] * 9}, 422, "context: List should have at most 8 items"),
    ("/v1/predict", {"context": ["Jazz"], "k": 0}, 422, "k: Input should be greater than or equal to 1"),
    ("/v1/predict", {"context": ["Jazz"], "k": 51}, 422, "k: Input should be less than or equal to 50"),
    ("/v1/predict", {"context": ["Jazz"], "k": "5"}, 422, "k: Input should be a valid integer"),
    ("/v1/predict", {"context": ["Jazz"], "k": 2.5}, 422, "k: Input should be a valid integer"),
    ("/v1/predict", {"context": ["Jazz"], "exact": "yes"}, 422, "exact: Input should be a valid boolean"),
    ("/v1/predict", {"context": "Jazz"}, 422, "context: Input should be a valid list"),
    ("/v1/predict", {"context": ["Jazz", 3]}, 422, "context.1: Input should be a valid string"),
    ("/v1/predict", {"context": ["Jazz", ""]}, 422, "context.1: String should have at least 1 character"),
    ("/v1/predict", {"contxt": ["Jazz"]}, 422, "contxt: Extra inputs are not permitted"),
    ("/v1/predict", {}, 422, "context: Field required"),
    ("/v1/predict", ["Jazz"], 422, "request body: Input should be a valid dictionary"),
    ("/v1/predict", None, 422, "request body"),
    ("/v1/expand", {"seed": ["Nope"]}, 422, "seed: none of the 1 ids"),
    ("/v1/expand", {"seed": []}, 422, "seed: List should have at least 1 item"),
    ("/v1/expand", {"seed": ["Jazz"], "steps": 0}, 422, "steps: Input should be greater than or equal to 1"),
    ("/v1/expand", {"seed": ["Jazz"], "steps": 21}, 422, "steps: Input should be less than or equal to 20"),
    ("/v1/expand", {"seed": ["Jazz"], "strategy": "beam"}, 422, "strategy: Input should be 'argmax' or 'sample'"),
    ("/v1/expand", {"seed": ["Jazz"], "temperature": 0}, 422, "temperature: Input should be greater than 0"),
    ("/v1/expand", {"seed": ["Jazz"], "temperature": -1.0}, 422, "temperature: Input should be greater than 0"),
    ("/v1/expand", {"seed": ["Jazz"], "random_seed": -1}, 422, "random_seed: Input should be greater than"),
    ("/v1/expand", {"seed": ["Jazz"], "random_seed": 2 ** 70}, 422, "random_seed: Input should be less than"),
    ("/v1/expand", {"seed": ["Jazz"], "k": 0}, 422, "k: Input should be greater than or equal to 1"),
]


@pytest.mark.parametrize("path, body, status, message", BAD, ids=[m for *_, m in BAD])
def test_bad_bodies_are_4xx_naming_the_field(client, path, body, status, message):
    got, out = post(client, path, body)
    assert got == status and message in out["message"], out


@pytest.mark.parametrize("raw, content_type, message", [
    (b'{"context": ["Jazz"', "application/json", "request body is not valid JSON"),
    (b'{"context": ["Jazz"], "k": NaN}', "application/json", "k: Input should be a valid integer"),
    (b'{"seed": ["Jazz"], "temperature": Infinity}', "application/json", "temperature"),
    (b'{"context": ["\\ud800"]}', "application/json", "context.0"),
    (b'{"context": ["\xff\xfe"]}', "application/json", "expected a UTF-8 JSON object"),
    (b'{"context": ["Jazz"]}', "text/plain", "expected a JSON object, Content-Type: application/json"),
    (b"[" * 3000, "application/json", "request body"),
])
def test_malformed_bodies_are_4xx(client, raw, content_type, message):
    path = "/v1/expand" if b"seed" in raw else "/v1/predict"
    r = client.post(path, content=raw, headers={"content-type": content_type})
    assert 400 <= r.status_code < 500 and message in r.json()["message"], r.text


def test_body_size_limit(client):
    body = json.dumps({"context": ["x" * 5000]}).encode()
    r = client.post("/v1/predict", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "over the limit of 4096 bytes" in r.json()["message"]

    def chunks():  # no Content-Length: the limit counts the bytes that arrive
        for _ in range(10):
            yield b" " * 1000

    r = client.post("/v1/predict", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert client.post("/v1/predict", json={"context": ["Jazz"]}).status_code == 200  # still serving


@pytest.mark.parametrize("query, message", [
    ("limit=0", "limit: Input should be greater than or equal to 1"),
    ("limit=101", "limit: Input should be less than or equal to 100"),
    ("limit=ten", "limit: Input should be a valid integer"),
    ("prefix=" + "a" * 1001, "prefix: String should have at most 1000 characters"),
])
def test_bad_queries(client, query, message):
    r = client.get("/v1/entities?" + query)
    assert r.status_code == 422 and message in r.json()["message"]


def test_unknown_routes_and_methods(client):
    assert client.get("/v2/predict").status_code == 404
    r = client.get("/v1/predict")
    assert r.status_code == 405 and r.json()["message"] == "Method Not Allowed"


# ---------------------------------------------------------------- batching and concurrency


def test_batcher_batches_concurrent_queries_and_equals_one_by_one(tiny_predictor):
    rng = np.random.default_rng(0)
    contexts = [rng.choice(len(tiny_predictor.vocab), size=rng.integers(1, 12), replace=False) for _ in range(40)]
    batcher = Batcher(tiny_predictor, max_batch=64, max_batch_ids=64)
    try:
        futures = [batcher.submit(c, 5, DecodeConfig()) for c in contexts]
        futures += [batcher.submit(c, 3, DecodeConfig(exact=True)) for c in contexts[:5]]  # other groups
        results = [f.result(timeout=60) for f in futures]
    finally:
        batcher.close()
    assert batcher.queries == 45 and batcher.batches < 45  # queued queries shared model calls
    for c, r in zip(contexts + contexts[:5], results):
        ref = tiny_predictor.rank(c[None], r.ids.shape[1], DecodeConfig(exact=r.ids.shape[1] == 3))
        assert torch.equal(r.ids, ref.ids) and torch.allclose(r.scores, ref.scores, atol=1e-5)


def test_batcher_answer_is_the_ranking_as_python_values_in_one_batch_with_rankings(tiny_predictor):
    """answer() (the app's: no tensor on the event loop) gives submit()'s ranking as lists, and both
    kinds of query share the batches."""
    rng = np.random.default_rng(1)
    contexts = [rng.choice(len(tiny_predictor.vocab), size=rng.integers(1, 12), replace=False) for _ in range(30)]
    batcher = Batcher(tiny_predictor, max_batch=64)
    try:
        futures = [(batcher.answer if i % 2 else batcher.submit)(c, 5, DecodeConfig()) for i, c in enumerate(contexts)]
        results = [f.result(timeout=60) for f in futures]
    finally:
        batcher.close()
    assert batcher.queries == 30
    for i, (c, r) in enumerate(zip(contexts, results)):
        ref = tiny_predictor.rank(c[None], 5, DecodeConfig())
        if i % 2:
            assert isinstance(r.ids, list) and all(type(x) is int for x in r.ids) and all(type(x) is float for x in r.scores)
            assert r.ids == ref.ids[0].tolist() and np.allclose(r.scores, ref.scores[0].numpy(), atol=1e-5)
            assert (r.exact, r.beam) == (bool(ref.exact[0]), int(ref.beam[0]))
        else:
            assert torch.equal(r.ids, ref.ids)


def test_a_failing_batch_fails_its_requests_only(tiny_predictor):
    class Flaky:
        vocab, calls = tiny_predictor.vocab, 0

        def rank(self, mat, k, decode):
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise RuntimeError("boom")
            return tiny_predictor.rank(mat, k, decode)

    batcher = Batcher(Flaky())
    try:
        with pytest.raises(RuntimeError, match="boom"):
            batcher.submit(np.array([1, 2]), 3, DecodeConfig()).result(timeout=60)
        assert batcher.submit(np.array([1, 2]), 3, DecodeConfig()).result(timeout=60).ids.shape == (1, 3)
    finally:
        batcher.close()


def test_requests_do_not_wait_for_a_running_batch(tiny_predictor):
    """While the model is busy (held here by a gate), the event loop still answers other requests."""
    app = create_app(tiny_predictor, LIMITS)
    batcher, gate, entered = app.state.batcher, threading.Event(), threading.Event()

    class Gated:
        vocab = tiny_predictor.vocab

        def rank(self, mat, k, decode):
            entered.set()
            gate.wait(60)
            return tiny_predictor.rank(mat, k, decode)

    batcher.predictor = Gated()
    with TestClient(app) as c, ThreadPoolExecutor(4) as pool:
        slow = [pool.submit(c.post, "/v1/predict", json={"context": ["Jazz"], "k": 3}) for _ in range(3)]
        assert entered.wait(60)
        assert c.get("/health").json()["status"] == "ok"  # answered while the batch is held
        assert [e["id"] for e in c.get("/v1/entities?prefix=Copenh").json()] == ["Copenhagen"]
        assert not any(f.done() for f in slow)
        gate.set()
        assert [f.result(60).status_code for f in slow] == [200, 200, 200]


def test_cli_serve_answers_concurrent_requests(server, tiny_predictor):
    contexts = [["Copenhagen"], ["Jazz", "Miles_Davis"], ["Paris", "Nope"], ["Europe"]] * 8
    with httpx.Client(base_url=server, timeout=60) as http, ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda c: http.post("/v1/predict", json={"context": c, "k": 4}), contexts))
        assert [r.status_code for r in answers] == [200] * len(contexts)
        for c, r in zip(contexts, answers):
            assert [p["id"] for p in r.json()["predictions"]] == [i for i, _ in tiny_predictor.predict(c, k=4).items]
        r = http.post("/v1/predict", json={"context": ["Jazz"] * 17})
        assert r.status_code == 422 and "at most 16 items" in r.json()["message"]
        assert http.get("/health").json()["queries"] >= len(contexts)


def test_freeze_heap_takes_the_loaded_objects_out_of_full_collections():
    """serve freezes what loading left alive: a full collection while serving no longer walks it."""
    import gc

    from superbloom.serving.launch import freeze_heap

    before = gc.get_freeze_count()
    kept = [[i] for i in range(10_000)]  # alive, tracked by the collector
    try:
        freeze_heap()
        assert gc.get_freeze_count() >= before + len(kept)
        assert gc.get_count()[0] < 100  # the collection ran first: the garbage of loading is not frozen
        tracked = {id(o) for o in gc.get_objects()}
        assert not any(id(x) in tracked for x in kept[:100])  # out of every generation
    finally:
        gc.unfreeze()
