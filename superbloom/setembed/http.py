"""HTTP endpoints of a set embedding, as a FastAPI router that serving/app.py's create_app includes:

    POST /v1/similar   {"context": ["Jazz", "Miles_Davis"], "k": 10}
                       -> {"similar": [{"set", "display", "score"}, ...], "context", "unknown"}
    POST /v1/classify  {"context": ["Jazz", "Miles_Davis"], "reject": 0.8, "method": "auto", "k": 10}
                       -> {"label" (null if rejected), "rejected", "confidence", "method", "scores", ...}

The answers have the shape of `superbloom similar --json` / `classify --json`. The embedder is
`app.state.embedder` (serve --embed EMBED_DIR loads one; library use: set it on the app that
create_app returns). Without one, both answer 404 naming the flag. A set with no known id is a
422 naming the field, as /v1/predict; so is `method: head` for a model without a classifier head
and any classification by a model trained without labels. Embedding one set is a small forward
pass: the handlers are plain functions that FastAPI runs in its thread pool.
"""

from typing import Annotated, Literal

from .._extras import require_extra

require_extra("serve", "the HTTP server (superbloom serve)")  # before fastapi: a missing extra names its pip command
from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from .embedder import Embedder, classify_json, similar_json


class SimilarItem(BaseModel):
    set: str = Field(description="training set key, as stored")
    display: str = Field(description="URL-decoded key with spaces, for people")
    score: float = Field(description="cosine of the two set vectors")


class SimilarResponse(BaseModel):
    similar: list[SimilarItem]
    context: list[str] = Field(description="known ids, as stored")
    unknown: list[str] = Field(description="ids not in the vocabulary (ignored)")


class LabelScore(BaseModel):
    label: str
    score: float = Field(description="vote share (knn) or softmax probability (head)")


class ClassifyResponse(BaseModel):
    label: str | None = Field(description="the predicted label; null when rejected")
    rejected: bool = Field(description="confidence under `reject`")
    confidence: float
    method: Literal["knn", "head"]
    scores: list[LabelScore] = Field(description="the most likely labels, best first")
    context: list[str]
    unknown: list[str]


def router(config) -> APIRouter:
    """The set-embedding routes with the request limits of a serve_config.ServeConfig."""
    Id = Annotated[str, Field(min_length=1, max_length=config.max_id_chars)]
    Ids = Annotated[list[Id], Field(min_length=1, max_length=config.max_context,
                                    description="ids of the set (as stored or URL-decoded)",
                                    examples=[["Jazz", "Miles_Davis"]])]
    strict = ConfigDict(extra="forbid", strict=True)

    class SimilarRequest(BaseModel):
        model_config = strict
        context: Ids
        k: int = Field(10, ge=1, le=config.max_k, description="training sets to return")

    class ClassifyRequest(BaseModel):
        model_config = strict
        context: Ids
        reject: float = Field(0.0, ge=0.0, le=1.0, allow_inf_nan=False,
                              description="reject a prediction whose confidence is under this (the blog: 0.8)")
        method: Literal["auto", "knn", "head"] = "auto"
        k: int = Field(10, ge=1, le=config.max_k, description="knn: neighbours that vote")

    r = APIRouter(tags=["set embeddings"])

    def embedder(request: Request) -> Embedder:
        emb = getattr(request.app.state, "embedder", None)
        if emb is None:
            raise HTTPException(404, "no set-embedding model is loaded: start the server with "
                                     "`superbloom serve MODEL --embed EMBED_DIR` (a directory written by embed-train)")
        return emb

    @r.post("/v1/similar", response_model=SimilarResponse, summary="the training sets nearest to a set (cosine)")
    def similar(req: SimilarRequest, request: Request):
        emb = embedder(request)
        try:
            return similar_json(emb.similar(req.context, req.k))
        except ValueError as e:
            raise HTTPException(422, f"context: {e}")

    @r.post("/v1/classify", response_model=ClassifyResponse, summary="the label of a set, rejected under a confidence")
    def classify(req: ClassifyRequest, request: Request):
        emb = embedder(request)
        try:
            return classify_json(emb.classify(req.context, req.reject, req.method, req.k))
        except ValueError as e:
            raise HTTPException(422, f"context: {e}" if "vocabulary" in str(e) else str(e))

    return r
