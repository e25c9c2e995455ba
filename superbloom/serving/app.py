"""The HTTP app: a trained model behind a small JSON API and a web page (FastAPI; serve.py runs it on uvicorn).

    superbloom serve runs/wiki/model --port 8000      # then open http://127.0.0.1:8000/ (API docs: /docs)

    POST /v1/predict   {"context": ["Copenhagen"], "k": 10, "exact": false}
                       optional "allow": [ids] (only these are returned; exact among them) and
                       "deny": [ids] (never returned); their ids not in the vocabulary are ignored.
                       "context": [[...], [...]] (a list of contexts) answers a list, in order;
                       "include_seen": true lets a context's own ids be returned (re-purchase)
    POST /v1/similar-items {"ids": ["Jazz"], "k": 10, "allow", "deny", "include_seen"}: the ids whose
                       item vectors are most similar (cosine, exact; similar_route.py)
    POST /v1/expand    {"seed": ["Copenhagen"], "steps": 10, "strategy": "argmax", "temperature": 1.0,
                        "random_seed": 0, "allow": [...], "deny": [...]}
    POST /v1/fill      {"text": "Miles Davis is a jazz musician, he is similar to [MASK] .", "k": 10}   (text models)
    GET  /v1/entities?prefix=Cop&limit=10                  autocomplete on display names
    GET  /v1/model     configuration, number of ids and of tokens, parameters, training data summary
                       (file-system paths reduced to their last component: no directory is disclosed)
    POST /v1/similar, /v1/classify   set embeddings (setembed/http.py; serve --embed EMBED_DIR)
    GET  /health      liveness, with batching counters
    GET  /live        200 while the process runs
    GET  /ready       200 once the model is loaded and has answered a warm-up query, 503 before
    GET  /metrics     Prometheus metrics: requests by route and status, latency, batch sizes, queue depth
                      (telemetry.py, which also writes the JSON-line access log)

The model is loaded once. Requests never run the model on the event loop: one worker thread
(`Batcher`, batcher.py) ranks everything queued since its previous batch in one call, so under load
requests are batched and an idle server adds no waiting; expansions run in the heavy requests' lane
(lanes.py: with lists of contexts and fills, bounded, 503 + Retry-After when full, so they cannot
starve the light routes) and each of their steps joins those batches. Library use: `create_app(predictor, ServeConfig())` (ServeConfig:
serve_config.py); serve.py is the launcher (one process or N workers) and the only module here that imports
this one.

Bad input is a 4xx whose JSON has a `message` naming the field (and FastAPI's `detail` list);
request bodies over `max_body_bytes` are a 413, bodies not received within `body_timeout` seconds a
408 (the connection is then closed); a connection that has not sent a complete request head within
`head_timeout` seconds is closed, an idle keep-alive one after `keep_alive_timeout`. HEAD works on
every GET route. Every response carries `X-Content-Type-Options: nosniff`, a frame policy and a
content-security policy that allows the page's and /docs' own inline script and style by their
SHA-256 hashes, and nothing from elsewhere.
"""

import asyncio
import importlib.resources
import logging
import math
import ntpath
import posixpath
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Annotated, Literal

import numpy as np

from .._extras import require_extra

require_extra("serve", "the HTTP server (superbloom serve)")  # before fastapi: a missing extra names its pip command
from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag
from starlette.exceptions import HTTPException as StarletteHTTPException

from .._bounds import ArgumentError
from .._version import __version__
from .autocomplete import PrefixIndex
from .batcher import Batcher
from ..heads.beam import DecodeConfig
from ..inference.expand import ExpandConfig, expand
from .guards import BodyLimit, Hardening, RequestStarted, content_security_policy, error_response
from ..inference.predictor import Predictor
from .config import ServeConfig
from .lanes import Lane
from ..setembed.http import router as setembed_router
from .telemetry import Observe, Telemetry

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- request and response bodies

UNION_TAGS = ("one context", "contexts")  # the two forms of /v1/predict's context (left out of error messages)


def _context_form(v) -> str:
    """Which form a request's `context` is: a list of ids, or a list of lists of ids."""
    return UNION_TAGS[1] if isinstance(v, list) and v and isinstance(v[0], list) else UNION_TAGS[0]


def request_models(cfg: ServeConfig):
    """Request bodies with the limits of `cfg` (so a 422 names the field and the limit)."""
    Id = Annotated[str, Field(min_length=1, max_length=cfg.max_id_chars)]
    Ids = Annotated[list[Id], Field(min_length=1, max_length=cfg.max_context)]
    K = Annotated[int, Field(ge=1, le=cfg.max_k, description="number of ids to return")]
    Contexts = Annotated[list[Ids], Field(min_length=1, max_length=cfg.max_contexts)]
    IdList = Annotated[list[Id], Field(max_length=cfg.max_list)]
    strict = ConfigDict(extra="forbid", strict=True)

    class PredictRequest(BaseModel):
        model_config = strict
        context: Annotated[Annotated[Ids, Tag(UNION_TAGS[0])] | Annotated[Contexts, Tag(UNION_TAGS[1])],
                           Discriminator(_context_form)] = Field(
            description="ids of the set (as stored or URL-decoded), or a list of such sets (the answer is then a "
                        "list, in order)", examples=[["Copenhagen", "Paris"]])
        k: K = 10
        exact: bool = Field(False, description="widen the beam until the top-k is certified exact")
        allow: IdList | None = Field(None, description="only these ids are returned (exact decoding is exact "
                                                       "among them); ids not in the vocabulary are ignored")
        deny: IdList | None = Field(None, description="these ids are never returned")
        include_seen: bool = Field(False, description="the context's own ids may be returned (re-purchase)")

    class ExpandRequest(BaseModel):
        model_config = strict
        seed: Ids = Field(description="ids of the set to grow", examples=[["Copenhagen"]])
        steps: int = Field(10, ge=1, le=cfg.max_steps, description="ids to add, one at a time")
        strategy: Literal["argmax", "sample"] = "argmax"
        temperature: float = Field(1.0, gt=0, le=100, allow_inf_nan=False,
                                   description="sample: softmax(score / temperature) over the top k")
        random_seed: int = Field(0, ge=0, le=2 ** 63 - 1)
        k: Annotated[int, Field(ge=1, le=cfg.max_k, description="candidates ranked per step")] = 10
        exact: bool = False
        allow: IdList | None = Field(None, description="only these ids are added; ids not in the vocabulary are "
                                                       "ignored")
        deny: IdList | None = Field(None, description="these ids are never added")

    return PredictRequest, ExpandRequest


class Item(BaseModel):
    id: str = Field(description="id as stored in the vocabulary")
    display: str = Field(description="URL-decoded id, for people")
    score: float | None = Field(description="gamma score (sum of log-probabilities); null if not finite")


class PredictResponse(BaseModel):
    predictions: list[Item]
    exact: bool = Field(description="the top-k is certified exact (Algorithm 1's bound)")
    beam: int
    context: list[str] = Field(description="known context ids, as stored (a set model's: each once)")
    unknown: list[str] = Field(description="context ids not in the vocabulary (ignored)")
    repeated: int = Field(description="known context ids given again, counted once (a set model's; a sequence "
                                      "model keeps repeats)")


class ExpandedItem(Item):
    exact: bool


class ExpandResponse(BaseModel):
    seed: list[str]
    unknown: list[str]
    repeated: int = Field(description="seed ids given again, counted once")
    added: list[ExpandedItem]


class Entity(BaseModel):
    id: str
    display: str
    count: int = Field(description="occurrences in the training sets")


# ---------------------------------------------------------------- the app


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _message(errors) -> str:
    parts = []
    for e in errors:
        loc = e["loc"][1:] if e["loc"][:1] == ("body",) else e["loc"]  # body fields by name alone
        loc = [x for x in loc if x not in UNION_TAGS]  # context's form: the message names the field alone
        if e["loc"] == ("body",):
            parts.append(f"request body: {e['msg']} (expected a JSON object, Content-Type: application/json)")
        elif e["type"] == "json_invalid":
            parts.append(f"request body is not valid JSON (at character {e['loc'][-1]}: "
                         f"{e.get('ctx', {}).get('error', '')})")
        else:
            parts.append(f"{'.'.join(map(str, loc))}: {e['msg']}")
    return "; ".join(parts)


def create_app(predictor: Predictor, config: ServeConfig = ServeConfig(), access_log: bool = True) -> FastAPI:
    """The FastAPI app serving `predictor`. Builds the lookup and autocomplete indexes now; at startup
    (the lifespan) one warm-up query runs in the background, and /ready answers 200 once it is done.
    access_log: one JSON line per request on the logger superbloom.serving.access (telemetry.py)."""
    vocab = predictor.vocab
    vocab.index, vocab.aliases  # noqa: B018 - build the lazy lookup tables before the first request
    prefixes = PrefixIndex(vocab)
    telemetry = Telemetry()
    batcher = Batcher(predictor, config.max_batch, config.max_batch_ids, on_batch=telemetry.observe_batch,
                      on_queue=telemetry.observe_queue)
    heavy = Lane("heavy", config.heavy_workers, config.heavy_queue)  # expand, list predict, fill: bounded (lanes.py)
    PredictRequest, ExpandRequest = request_models(config)
    page = (importlib.resources.files("superbloom") / "static" / "index.html").read_text("utf-8")

    async def warm_up():
        """One query of the most frequent id through the batcher: the first model call's one-off costs
        (allocations, lazy tables) paid before /ready says so."""
        try:
            top = np.asarray([int(np.argmax(vocab.counts))], np.int64)  # (1,)
            await asyncio.wrap_future(batcher.submit(top, 1, DecodeConfig()))
        except Exception:  # noqa: BLE001 - logged; /ready stays 503
            log.exception("the warm-up query failed: /ready stays 503")
            return
        app.state.ready = True
        telemetry.ready.set(1)

    @asynccontextmanager
    async def lifespan(app):
        warming = asyncio.create_task(warm_up())
        yield
        warming.cancel()
        batcher.close()

    app = FastAPI(title="superbloom", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Set completion and expansion over a huge vocabulary of ids (Superbloom: "
                              "Bloom filter meets Transformer). Every error has a `message`.")
    docs_page = _offline_docs(app)
    app.state.batcher, app.state.predictor, app.state.config = batcher, predictor, config
    app.state.ready, app.state.telemetry = False, telemetry
    app.state.heavy = heavy
    app.add_middleware(BodyLimit, limit=config.max_body_bytes, timeout=config.body_timeout)
    app.add_middleware(Hardening, csp=content_security_policy(page, docs_page))
    app.add_middleware(Observe, telemetry=telemetry, routes=app, log=access_log)
    app.add_middleware(RequestStarted)  # added last: outermost (the request head's deadline ends here: guards.py)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        return error_response(422, _message(exc.errors()), errors)  # no echo of the input: it may not encode

    @app.exception_handler(ArgumentError)
    async def bad_argument(request: Request, exc: ArgumentError):  # a size the model cannot serve (expand's steps)
        return error_response(422, str(exc), [{"loc": ["body", exc.argument], "msg": str(exc), "type": "value_error"}])

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 400:  # FastAPI could not parse the body (bad UTF-8, JSON nested too deep)
            return error_response(400, f"request body: {exc.detail} (expected a UTF-8 JSON object)")
        return error_response(exc.status_code, str(exc.detail), headers=exc.headers)  # 405 keeps its Allow

    def known_or_422(ids: list[str], name: str) -> tuple[np.ndarray, list[str], int]:
        """A context as the model reads it (Predictor.read_context: a set's repeats once) -> (known ids,
        unknown ids, repeats); none known is a 422 naming `name`."""
        known, unknown, repeated = predictor.read_context(ids, name)
        if len(known) == 0:
            shown = ", ".join(unknown[:5]) + (", ..." if len(unknown) > 5 else "")
            raise HTTPException(422, f"{name}: none of the {len(unknown)} ids is in the model's vocabulary "
                                     f"(unknown: {shown})")
        return known, unknown, repeated

    def item(i: int, score: float) -> dict:
        return {"id": vocab.strings[i], "display": vocab.display(i), "score": _finite(score)}

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index():
        return page

    def id_list(ids: list[str] | None, name: str) -> np.ndarray | None:
        """An allow- or deny-list -> its known ids, sorted unique; an allow-list with none is a 422."""
        if ids is None:
            return None
        known = known_or_422(ids, name)[0] if name == "allow" else vocab.lookup(ids)[0]
        return np.unique(np.asarray(known, np.int64))

    @app.post("/v1/predict", response_model=PredictResponse | list[PredictResponse],
              summary="top-k ids for a context, or for each of a list of contexts")
    async def predict(req: PredictRequest):
        if not isinstance(req.context[0], list):
            return await _predict(req, many=False)
        async with heavy.admit():  # a list of contexts is heavy: bounded, 503 when the lane is full
            return await _predict(req, many=True)

    async def _predict(req, many: bool):
        contexts = req.context if many else [req.context]
        knowns = [known_or_422(c, f"context.{i}" if many else "context") for i, c in enumerate(contexts)]
        allow, deny = id_list(req.allow, "allow"), id_list(req.deny, "deny")
        decode = DecodeConfig(exact=req.exact)
        futures = [asyncio.wrap_future(batcher.answer(known, req.k, decode, allow, deny, req.include_seen))
                   for known, _, _ in knowns]  # plain Python answers: no tensor on the event loop (batcher.py)
        answers = []
        for (known, unknown, repeated), a in zip(knowns, await asyncio.gather(*futures)):
            preds = [item(i, s) for i, s in zip(a.ids, a.scores) if i >= 0]
            answers.append({"predictions": preds, "exact": a.exact, "beam": a.beam,
                            "context": vocab.decode(known.tolist()), "unknown": unknown, "repeated": repeated})
        return answers if many else answers[0]

    @app.post("/v1/expand", response_model=ExpandResponse, summary="grow a set one predicted id at a time")
    async def expand_set(req: ExpandRequest):  # in the heavy lane's threads; its steps join the batches
        known_or_422(req.seed, "seed")
        if req.allow is not None:
            known_or_422(req.allow, "allow")
        return await heavy.run(_expand, req)

    def _expand(req):
        cfg = ExpandConfig(req.steps, req.strategy, req.temperature, req.k, req.random_seed,
                           DecodeConfig(exact=req.exact))
        out = expand(batcher, req.seed, cfg, req.allow, req.deny)
        added = [dict(item(vocab.get(a.id), a.score), exact=a.exact) for a in out.added]
        return {"seed": out.seed, "unknown": out.unknown, "repeated": out.repeated, "added": added}

    @app.get("/v1/entities", response_model=list[Entity], summary="autocomplete: ids whose display name "
             "starts with a prefix (case-insensitive, '_' = ' '), most frequent first")
    async def entities(prefix: Annotated[str, Query(max_length=config.max_id_chars)] = "",
                       limit: Annotated[int, Query(ge=1, le=100)] = 10):
        return [{"id": vocab.strings[i], "display": vocab.display(i), "count": int(vocab.counts[i])}
                for i in prefixes.search(prefix, limit).tolist()]

    @app.get("/v1/model", summary="configuration, number of ids and of tokens, parameter count, training data summary")
    async def model_info():
        c = predictor.config
        return _without_paths({
            "n_ids": len(vocab), "n_tokens": predictor.hashing.n_tokens, "parameters": predictor.n_parameters,
            "checkpoint": c.get("checkpoint"), "version": __version__, "part": predictor.part,
            "hash": c["hash"], "model": c["model"], "head": c["head"], "train": c.get("train"),
            "data": _data_summary(c.get("data", {})), "serving": asdict(config)})

    if "text" in predictor.config.get("data", {}):  # a text model: POST /v1/fill (text/routes.py)
        from .fill_route import fill_router
        app.include_router(fill_router(predictor, config, heavy))
    from .similar_route import similar_items_router
    app.include_router(similar_items_router(predictor, config, heavy))  # /v1/similar-items: item vectors
    app.include_router(setembed_router(config))  # /v1/similar, /v1/classify: app.state.embedder (serve --embed)

    @app.get("/health", summary="liveness, with batching counters")
    async def health():
        return {"status": "ok", "n_ids": len(vocab), "queued": batcher.queue.qsize(),
                "batches": batcher.batches, "queries": batcher.queries}

    @app.get("/live", summary="liveness: 200 while the process runs")
    async def live():
        return {"status": "live"}

    @app.get("/ready", summary="readiness: 200 once the model is loaded and warm, 503 before",
             responses={503: {"description": "not warm yet"}})
    async def ready():
        if app.state.ready:
            return {"status": "ready"}
        return JSONResponse({"status": "starting", "message": "the model is warming up"}, 503,
                            headers={"Retry-After": "1"})

    @app.get("/metrics", summary="Prometheus metrics (text format): requests, latency, batch sizes, queue depth",
             response_class=Response)
    async def metrics():
        body, content_type = telemetry.exposition()
        return Response(body, media_type=content_type)

    return app


def _offline_docs(app: FastAPI) -> str:
    """/docs with Swagger UI 5's assets served from the installed fastapi-offline package, not a CDN
    -> its HTML (made once: the content-security policy allows its inline script by hash)."""
    from pathlib import Path

    import fastapi_offline
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.staticfiles import StaticFiles

    assets = Path(fastapi_offline.__file__).parent / "static"
    app.mount("/docs-assets", StaticFiles(directory=assets), name="docs-assets")
    html = get_swagger_ui_html(openapi_url=app.openapi_url, title="superbloom API",
                               swagger_js_url="/docs-assets/swagger-ui-bundle.js",
                               swagger_css_url="/docs-assets/swagger-ui.css",
                               swagger_favicon_url="/docs-assets/favicon.png").body.decode()

    @app.get("/docs", include_in_schema=False)
    async def docs():
        return HTMLResponse(html)

    return html


PATH_FIELDS = ("data", "out", "input", "inputs")  # config.json's path fields (train.data, train.out, data.input)


def _without_paths(obj, key: str = ""):
    """A JSON value with every file-system path reduced to its last component (the server
    must not disclose its directories): the strings of PATH_FIELDS, and any absolute path elsewhere."""
    if isinstance(obj, dict):
        return {k: _without_paths(v, k) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_without_paths(v, key) for v in obj]
    if isinstance(obj, str) and (key in PATH_FIELDS or posixpath.isabs(obj) or ntpath.isabs(obj)
                                 or obj.startswith("~")):
        return ntpath.basename(posixpath.basename(obj.rstrip("/\\")))
    return obj


def _data_summary(meta: dict) -> dict:
    keys = ("input", "format", "sets", "ids", "links", "train", "test", "test_fraction", "seed",
            "test_ids_unseen_in_train", "duplicates_removed", "text")
    return {k: meta[k] for k in keys if k in meta}

