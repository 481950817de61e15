"""Tool search: a field-weighted BM25 index (BM25F) over the catalog, with task queries diversified.

Each tool is indexed in five fields: its name, its description, its parameters (names and
descriptions), its server's name and the skills that carry it (names and descriptions). A
term's frequency in each field is weighted and normalised by that field's own length before
BM25's saturation, so a word in a tool's name counts more than the same word in a long skill
description. Everything but the query's terms is computed when the index is built,
once per catalog change.

A query is ranked as a whole, whatever its punctuation: splitting task-like queries into steps
and keeping each step's best tool lost recall on both benchmarks of benchmarks/tool_search.py
(docs/decisions/0131-find-tools-query-as-a-whole.md); a task's steps are best asked one call
each. An optional semantic ranker (`SemanticRanker`) is fused with the lexical ranking: a
weighted sum of each ranker's standard scores (docs/decisions/0132-find-tools-standard-score-fusion.md).
Words that a tenth of the tools share ("get", "create", "file") count half: they say little
about which tool is meant.
No cap per server: on the benchmark a task often needs several tools of one server, and every
cap tried lost recall.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.skills.tokens import terms

# BM25's term-frequency saturation.
K1 = 1.2
# Field weights and length normalisation, tuned on the tuning split of benchmarks/tool_search.py
# (LiveMCPBench); docs/skills.md has the figures.
WEIGHTS = {"name": 3.0, "description": 1.0, "parameters": 0.6, "server": 0.5, "skills": 0.5}
LENGTH_NORM = {"name": 0.5, "description": 0.75, "parameters": 0.75, "server": 0.75, "skills": 0.75}
# Generic words: a term found in more than this share of the tools ("get", "file", "create",
# "write") says little about which one is meant, yet BM25's IDF still lets it lift every tool
# naming it above those the query's rarer words match; such terms count this much less. Tuned on
# the tuning split of benchmarks/tool_search.py (shares 3-10%, factors 0-0.5 tried;
# docs/decisions/0130-find-tools-model-memory-and-ranking.md).
GENERIC_SHARE = 0.1
GENERIC_FACTOR = 0.5
# The semantic ranking's share in the fusion (the lexical one has the rest): tuned on the tuning
# splits of benchmarks/tool_search.py (0.4-0.8 tried; 0.6-0.7 level, docs/decisions/0132).
SEMANTIC_WEIGHT = 0.65
# Tools the semantic ranker puts forward beside those words match: per answer place, at least.
SEMANTIC_DEPTH = 5
SEMANTIC_DEPTH_MIN = 50


@dataclass(frozen=True, slots=True)
class SearchItem:
    """One searchable tool: its exposed name and the text of each field it is found by.

    `server` is the name of the server offering the tool. The gateway keeps no description of
    upstream servers; where an operator describes one, it is in the skills carrying its tools.
    """

    name: str
    description: str = ""
    skills: str = ""
    parameters: str = ""
    server: str = ""

    def fields(self) -> dict[str, str]:
        """The text of each field, by the names `WEIGHTS` uses."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "server": self.server,
            "skills": self.skills,
        }


@dataclass(frozen=True, slots=True)
class Hit:
    """A tool that matched a query, with its score (higher is better; comparable within one answer)."""

    name: str
    description: str
    score: float


class SemanticRanker(Protocol):
    """The seam for a ranker by meaning (embeddings), fused with the lexical ranking.

    It is built over the same items, in the same order, as the `ToolIndex` it joins, once per
    catalog change. `rank` returns the item numbers it puts forward, best first, at most `limit`
    of them, and every item's standard score (its similarity to the query less the mean over all
    items, in standard deviations), in item order. It must load its model from a local path:
    nothing may be downloaded while the gateway runs.
    """

    def prepare(self, queries: Sequence[str]) -> None:
        """Get ready to rank `queries` (embed them); called in a worker thread before `rank`."""

    def rank(self, query: str, limit: int) -> tuple[Sequence[int], Sequence[float]]: ...


def parameter_text(schema: Mapping[str, Any]) -> str:
    """The names and descriptions of a JSON Schema's top-level properties, as searchable text."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return ""
    parts = []
    for name, spec in properties.items():
        description = spec.get("description") if isinstance(spec, Mapping) else None
        parts.append(f"{name} {description}" if isinstance(description, str) else str(name))
    return " ".join(parts)


class ToolIndex:
    """An immutable BM25F index: built once per catalog, queried per request."""

    def __init__(
        self,
        items: Iterable[SearchItem],
        semantic: SemanticRanker | None = None,
        weights: Mapping[str, float] = WEIGHTS,
        semantic_weight: float = SEMANTIC_WEIGHT,
    ) -> None:
        """Index `items`; `weights` (per field, as `WEIGHTS`) and `semantic_weight` exist to tune them on data."""
        self._items: Sequence[SearchItem] = tuple(items)
        self._semantic = semantic
        self._semantic_weight = semantic_weight
        counted = _count_terms(self._items)
        total = len(self._items)
        average = {field: (sum(doc[field][1] for doc in counted) / total if total else 0.0) or 1.0 for field in WEIGHTS}
        # term -> [(document number, weighted and length-normalised frequency over all fields)].
        postings: dict[str, list[tuple[int, float]]] = {}
        for number, doc in enumerate(counted):
            combined: dict[str, float] = {}
            for field, (counts, length) in doc.items():
                if not weights[field]:
                    continue
                norm = 1 - LENGTH_NORM[field] + LENGTH_NORM[field] * length / average[field]
                for term, count in counts.items():
                    combined[term] = combined.get(term, 0.0) + weights[field] * count / norm
            for term, frequency in combined.items():
                postings.setdefault(term, []).append((number, frequency))
        # term -> [(document number, the term's share of its BM25F score)]: a query only adds them up.
        self._postings: dict[str, list[tuple[int, float]]] = {}
        for term, matches in postings.items():
            idf = math.log(1 + (total - len(matches) + 0.5) / (len(matches) + 0.5))
            idf *= GENERIC_FACTOR if len(matches) > GENERIC_SHARE * total else 1.0
            self._postings[term] = [(number, idf * tf * (K1 + 1) / (tf + K1)) for number, tf in matches]

    def __len__(self) -> int:
        return len(self._items)

    @property
    def prepares(self) -> bool:
        """Whether `prepare` has work to do: a semantic ranker embeds queries."""
        return self._semantic is not None

    def prepare(self, query: str) -> None:
        """Do ahead, in a worker thread, what `search(query)` would do on the caller's: embed the
        query (milliseconds of CPU, more on a busy machine, that would hold up every other
        session on the event loop)."""
        if self._semantic is not None:
            self._semantic.prepare([query])

    def search(
        self,
        query: str,
        limit: int = 10,
        allowed: Callable[[str], bool] | None = None,
        by_meaning: bool = True,
    ) -> list[Hit]:
        """The best `limit` tools for `query`, best first, among those `allowed` accepts.

        `allowed` is applied before ordering and truncation, so hidden tools neither appear nor
        take a place in the result; it is asked at most once per tool. `by_meaning=False` ranks by
        words alone (when `prepare` failed: the semantic ranker would try again here).
        """
        if limit <= 0:
            return []
        permitted: dict[int, bool] = {}

        def visible(number: int) -> bool:
            if allowed is None:
                return True
            if number not in permitted:
                permitted[number] = allowed(self._items[number].name)
            return permitted[number]

        scores = self._bm25(query)
        if self._semantic is not None and by_meaning:
            ranked, similarity = self._semantic.rank(query, max(limit * SEMANTIC_DEPTH, SEMANTIC_DEPTH_MIN))
            scores = fuse(scores, ranked, similarity, self._semantic_weight, len(self._items))
        if allowed is not None:
            scores = {number: score for number, score in scores.items() if visible(number)}
        # Best first, ties to the earlier tool (`nlargest` keeps the order of equals).
        best = heapq.nlargest(limit, sorted(scores), key=scores.__getitem__)
        return [self._hit(number, scores[number]) for number in best]

    def _bm25(self, query: str) -> dict[int, float]:
        """BM25F scores of the tools matching any term of `query`, each term added in the query's order."""
        scores: dict[int, float] = {}
        get = scores.get
        for term in dict.fromkeys(terms(query)):
            for number, share in self._postings.get(term, ()):
                scores[number] = get(number, 0.0) + share
        return scores

    def _hit(self, number: int, score: float) -> Hit:
        item = self._items[number]
        return Hit(item.name, item.description, score)


def _count_terms(items: Sequence[SearchItem]) -> list[dict[str, tuple[Counter[str], int]]]:
    """Each item's term counts and term total, per field. Many fields repeat the same text (every
    tool of a server carries its skills' text and the server's name), so each distinct text is
    split into terms once."""
    seen: dict[str, tuple[Counter[str], int]] = {}
    counted = []
    for item in items:
        doc = {}
        for field, text in item.fields().items():
            if text not in seen:
                counts = Counter(terms(text))
                seen[text] = (counts, sum(counts.values()))
            doc[field] = seen[text]
        counted.append(doc)
    return counted


def fuse(
    lexical: Mapping[int, float], ranked: Sequence[int], similarity: Sequence[float], weight: float, total: int
) -> dict[int, float]:
    """Fused scores of the tools words match (`lexical`, BM25F scores) and those the semantic
    ranker puts forward (`ranked`): (1 - weight) x the BM25F score's standard score plus weight x
    the similarity's (`similarity`, every item's, in item order).

    BM25F's standard score is taken over all `total` tools, those words do not match scoring 0.
    Standard scores put the two rankers on one scale whatever the query: BM25F's scores grow with
    the number and rarity of the query's words, cosine similarities stay within a narrow band.
    """
    mean = sum(lexical.values()) / total if total else 0.0
    variance = sum(score * score for score in lexical.values()) / total - mean * mean if total else 0.0
    scale = (1 - weight) / (math.sqrt(variance) if variance > 0 else 1.0)
    shift = scale * mean
    words = lexical.get
    return {
        number: scale * words(number, 0.0) - shift + weight * similarity[number]
        for number in dict.fromkeys([*lexical, *ranked])
    }
