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
each. An optional semantic ranker (`SemanticRanker`) is fused with the lexical ranking
(reciprocal rank fusion).
Words that a tenth of the tools share ("get", "create", "file") count half: they say little
about which tool is meant.
No cap per server: on the benchmark a task often needs several tools of one server, and every
cap tried lost recall.
"""

from __future__ import annotations

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
# Reciprocal rank fusion's constant: 60 in the original paper, and robust around it.
RRF_K = 60
# The semantic ranking's share in the fusion (the lexical one counts 1): tuned on the tuning
# split of benchmarks/tool_search.py, docs/skills.md has the figures.
SEMANTIC_WEIGHT = 1.0


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
    catalog change; `rank` returns item numbers, best first, at most `limit` of them. It must load
    its model from a local path: nothing may be downloaded while the gateway runs.
    """

    def prepare(self, queries: Sequence[str]) -> None:
        """Get ready to rank `queries` (embed them); called in a worker thread before `rank`."""

    def rank(self, query: str, limit: int) -> Sequence[int]: ...


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

        `allowed` is applied before ranking and truncation, so hidden tools neither appear nor
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

        lexical = self._bm25(query)
        if allowed is not None:
            lexical = {number: score for number, score in lexical.items() if visible(number)}
        # Best first, ties to the earlier tool: the numbers in order, then a stable sort by score.
        ordered = sorted(sorted(lexical), key=lexical.__getitem__, reverse=True)
        if self._semantic is None or not by_meaning:
            return [self._hit(number, lexical[number]) for number in ordered[:limit]]
        meaning = [number for number in self._semantic.rank(query, max(limit * 5, 50)) if visible(number)]
        return [self._hit(number, score) for number, score in fuse(ordered, meaning, self._semantic_weight, limit)]

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


def fuse(lexical: Sequence[int], meaning: Sequence[int], weight: float, limit: int) -> list[tuple[int, float]]:
    """The best `limit` items by reciprocal rank fusion of two rankings (item numbers, best first),
    with their fused scores, best first, ties to the lower number.

    An item's score is 1 / (RRF_K + its place among `lexical`) plus weight / (RRF_K + its place
    among `meaning`), a ranking it is absent from adding nothing. An item ranked by words alone
    scores less than every one ranked by words alone ahead of it, so only the first `limit` of
    those can place: the rest of `lexical` is never scored.
    """
    place = {number: rank for rank, number in enumerate(lexical, start=1)} if meaning else {}
    scores: dict[int, float] = {}
    for rank, number in enumerate(meaning, start=1):
        words = 1.0 / (RRF_K + place[number]) if number in place else 0.0
        scores[number] = words + weight / (RRF_K + rank)
    alone = 0
    for rank, number in enumerate(lexical, start=1):
        if alone == limit:
            break
        if number not in scores:
            scores[number] = 1.0 / (RRF_K + rank)
            alone += 1
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))[:limit]
