"""Find_Tools' embeddings from an OpenAI-compatible `/v1/embeddings` endpoint (TEI, vLLM, Ollama).

For operators who run an embedding server already: `gateway.find_tools_endpoint` names its base
URL (`http://127.0.0.1:8080/v1`) and `gateway.find_tools_model` the model it serves. The gateway
asks it from worker threads only (the index build, a search's query), never on the event loop.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx2
import numpy as np
from numpy.typing import NDArray

# Texts per request: servers cap a batch (TEI's default is 32 per client batch, then it splits).
BATCH = 32
TIMEOUT = 30.0


class EndpointError(OSError):
    """The endpoint could not be reached or answered other than with embeddings."""


class EndpointEmbedder:
    """An `Embedder` over HTTP: `POST {url}/embeddings` with `{"model", "input"}`, vectors L2-normalised."""

    def __init__(self, url: str, model: str) -> None:
        self._url = url.rstrip("/") + "/embeddings"
        self._model = model

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One row per text; raises `EndpointError`."""
        rows: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            rows += self._batch(list(texts[start : start + BATCH]))
        vectors = np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return (vectors / np.where(norms == 0, 1, norms)).astype(np.float32)

    def _batch(self, texts: list[str]) -> list[list[float]]:
        try:
            # A connection per request: nothing to close when an index is replaced, and the
            # requests are few (one per build batch, one per search).
            response = httpx2.post(self._url, json={"model": self._model, "input": texts}, timeout=TIMEOUT)
            response.raise_for_status()
            data = response.json()["data"]
            ordered = sorted(data, key=lambda row: row["index"])
            rows = [[float(value) for value in row["embedding"]] for row in ordered]
        except httpx2.HTTPError as error:
            raise EndpointError(f"{self._url}: {error}") from error
        except (ValueError, KeyError, TypeError) as error:
            raise EndpointError(f"{self._url} answered no embeddings: {error!r}") from error
        if len(rows) != len(texts):
            raise EndpointError(f"{self._url} answered {len(rows)} embeddings for {len(texts)} texts")
        return rows
