"""HTTP endpoint of similar items (the cosine of item vectors), an APIRouter that serving/app.py includes
for every id model.

    POST /v1/similar-items   {"ids": ["Jazz", "Blues"], "k": 10, "allow": [...], "deny": [...],
                              "include_seen": false}
                             -> {"results": [{"id", "display", "similar": [{"id", "display", "cosine"}, ...]},
                                 ...]}   one result per id, in order

Each answer is exact: every allowed id's cosine is computed (inference/recommend.py's similar_items).
`allow` keeps only its ids, `deny` drops its ids, and their ids not in the vocabulary are ignored (an
allow-list with none known is a 422); `include_seen` lets a queried id be among its own answers. An
id not in the vocabulary is a 422 naming it (`ids.2`). The item vectors are computed on the first
request (one pass over the input embeddings); requests run in the heavy requests' lane (lanes.py),
since each scores every id.
(No `from __future__ import annotations`: FastAPI must see the request model class itself.)
"""
import math
import threading
from typing import Annotated

from .._extras import require_extra

require_extra("serve", "the HTTP server (superbloom serve)")  # before fastapi: a missing extra names its pip command
from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, ConfigDict, Field


class SimilarId(BaseModel):
    id: str = Field(description="id as stored in the vocabulary")
    display: str = Field(description="URL-decoded id, for people")
    cosine: float | None = Field(description="cosine of the two item vectors; null if not finite")


class SimilarResult(BaseModel):
    id: str = Field(description="the queried id, as stored")
    display: str
    similar: list[SimilarId] = Field(description="most similar first")


class SimilarItemsResponse(BaseModel):
    results: list[SimilarResult] = Field(description="one per queried id, in order")


def similar_items_router(predictor, config, lane) -> APIRouter:
    """The /v1/similar-items route for `predictor` (a loaded id model); config: ServeConfig (max_k,
    max_contexts ids per request, max_list ids per filter); lane: the heavy requests' lanes.Lane."""
    Id = Annotated[str, Field(min_length=1, max_length=config.max_id_chars)]
    IdList = Annotated[list[Id], Field(max_length=config.max_list)]
    vocab = predictor.vocab
    vectors_ready = threading.Lock()  # the first requests compute the item vectors once

    class SimilarItemsRequest(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        ids: Annotated[list[Id], Field(min_length=1, max_length=config.max_contexts)] = Field(
            description="ids whose similar items to return (as stored or URL-decoded)", examples=[["Jazz"]])
        k: int = Field(10, ge=1, le=config.max_k, description="similar ids per queried id")
        allow: IdList | None = Field(None, description="only these ids are returned; ids not in the vocabulary "
                                                       "are ignored")
        deny: IdList | None = Field(None, description="these ids are never returned")
        include_seen: bool = Field(False, description="a queried id may be among its own answers")

    router = APIRouter()

    @router.post("/v1/similar-items", response_model=SimilarItemsResponse,
                 summary="the ids whose item vectors are most similar to each id's (cosine, exact)")
    async def similar_items(req: SimilarItemsRequest):
        for i, x in enumerate(req.ids):  # before the lane: an unknown id costs nothing
            if vocab.get(x) is None:
                raise HTTPException(422, f"ids.{i}: {x!r} is not in the model's vocabulary")
        return await lane.run(_similar, req)

    def _similar(req):
        with vectors_ready:
            predictor.item_vectors()
        try:
            got = predictor.similar_items(req.ids, req.k, allow=req.allow, deny=req.deny,
                                          exclude_seen=not req.include_seen)
        except ValueError as e:  # an allow-list with no known id
            raise HTTPException(422, str(e)) from None
        results = []
        for q, x in enumerate(req.ids):
            own = vocab.get(x)
            results.append({"id": vocab.strings[own], "display": vocab.display(own), "similar": [
                {"id": vocab.strings[j], "display": vocab.display(j), "cosine": c if math.isfinite(c) else None}
                for j, c in zip(got.index[q].tolist(), got.scores[q].astype(float).tolist()) if j >= 0]})
        return {"results": results}

    return router
