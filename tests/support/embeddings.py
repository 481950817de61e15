"""A small OpenAI-compatible embeddings server for tests: `POST /v1/embeddings` over real HTTP.

No TEI, vLLM or Ollama can run here (their models would be fetched from a hub), so the server
serves the model the gateway bundles, in the OpenAI response format those servers share.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway.skills.semantic import Embedder
from tests.support.harness import loopback_listener, serving


class Outage:
    """Whether the server answers 503 to every request."""

    def __init__(self) -> None:
        self.down = False


@asynccontextmanager
async def embeddings_server(model: Embedder, served: str) -> AsyncIterator[tuple[str, list[str], Outage]]:
    """Serve `model` as the model named `served`; yields the base URL (`.../v1`), every text asked,
    and the switch that makes it answer 503 from then on."""
    asked: list[str] = []
    outage = Outage()

    async def embeddings(request: Request) -> JSONResponse:
        if outage.down:
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=503)
        body = await request.json()
        if body.get("model") != served:
            return JSONResponse({"error": {"message": f"model {body.get('model')!r} not found"}}, status_code=404)
        texts = [body["input"]] if isinstance(body["input"], str) else list(body["input"])
        asked.extend(texts)
        vectors = await anyio.to_thread.run_sync(model.embed, texts)
        data = [{"object": "embedding", "index": n, "embedding": row.tolist()} for n, row in enumerate(vectors)]
        usage = {"prompt_tokens": 0, "total_tokens": 0}
        return JSONResponse({"object": "list", "data": data, "model": served, "usage": usage})

    app = Starlette(routes=[Route("/v1/embeddings", embeddings, methods=["POST"])])
    with loopback_listener() as (listener, port):
        async with serving(app, listener, lifespan="off"):
            yield f"http://127.0.0.1:{port}/v1", asked, outage
