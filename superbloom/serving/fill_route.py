"""HTTP endpoint of the text model (appendix E's fill-in-the-blank), an APIRouter that serving/app.py includes
when the served model is a text model (trained on a prepare-text dataset).

    POST /v1/fill   {"text": "Miles Davis is a jazz musician, he is similar to [MASK] .", "k": 10, "exact": false}
                    -> {"text", "tokens", "unknown", "blanks": [{"position", "exact", "beam",
                        "fillers": [{"token", "display", "score"}, ...]}, ...]}

A text without [MASK], an empty text, or one longer than the model reads is a 422 whose `message`
says so. Fills run in the heavy requests' lane (lanes.py), one model call at a time (inference/fill.py's lock).
(No `from __future__ import annotations`: FastAPI must see the request model class itself.)
"""
from .._extras import require_extra

require_extra("serve", "the HTTP server (superbloom serve)")  # before fastapi: a missing extra names its pip command
from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, ConfigDict, Field

from ..heads.beam import DecodeConfig
from ..inference.fill import Filler

MAX_TEXT_CHARS = 20_000


def fill_router(predictor, config, lane) -> APIRouter:
    """The /v1/fill route for `predictor` (a loaded text model); config: serve_config.ServeConfig (max_k);
    lane: the heavy requests' lanes.Lane it runs in."""
    filler = Filler.from_predictor(predictor, "the served model")
    router = APIRouter()

    class FillRequest(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)  # as every route: no "5" or true for k
        text: str = Field(max_length=MAX_TEXT_CHARS, description="a sentence with one or more [MASK] blanks")
        k: int = Field(10, ge=1, le=config.max_k, description="tokens per blank")
        exact: bool = Field(False, description="widen the beam until each blank's top-k is certified exact")

    @router.post("/v1/fill", summary="fill in the blanks ([MASK]) of a sentence (text models)")
    async def fill(req: FillRequest):  # in the heavy lane's threads (503 when it is full)
        return await lane.run(_fill, req)

    def _fill(req):
        try:
            r = filler.fill(req.text, req.k, DecodeConfig(exact=req.exact))
        except ValueError as e:  # no [MASK], empty, too long
            raise HTTPException(422, f"text: {e}") from None
        return r.to_json()

    return router
