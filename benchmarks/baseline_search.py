"""The tool search the gateway shipped before BM25F (kept for comparison): BM25 over names
(counted three times), descriptions and the names of carrying skills, with a plural-`s` fold.

`benchmarks/tool_search.py` ranks the same queries with it and with `gateway.skills.search`, and
`old_answer` renders hits as Find_Tools did then (every hit with its input schema).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# Standard BM25 constants: term-frequency saturation and document-length normalisation.
K1 = 1.2
B = 0.75
# A name says what a tool is more surely than its prose, so name terms count this many times.
NAME_WEIGHT = 3

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[^\W_]+")
# fmt: off
_STOP_WORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how", "i",
        "in", "into", "is", "it", "me", "my", "of", "on", "or", "so", "that", "the", "this", "to", "use",
        "using", "what", "when", "which", "with", "you", "your",
    }
)
# fmt: on


@dataclass(frozen=True, slots=True)
class SearchItem:
    """One searchable tool: its exposed name, its description, and extra words such as skill names."""

    name: str
    description: str = ""
    extra: str = ""


@dataclass(frozen=True, slots=True)
class Hit:
    """A tool that matched a query, with its BM25 score (higher is better)."""

    name: str
    description: str
    score: float


def tokenize(text: str) -> list[str]:
    """Lowercase terms of `text`, split on `_`, `-`, camelCase and every other non-word character."""
    terms: list[str] = []
    for word in _WORD.findall(_CAMEL.sub(" ", text)):
        term = word.lower()
        if term in _STOP_WORDS:
            continue
        # Folding a plural 's' lets "tables" find list_tables; "ss" endings (process, class) stay.
        if len(term) > 3 and term.endswith("s") and not term.endswith("ss"):
            term = term[:-1]
        terms.append(term)
    return terms


class ToolIndex:
    """An immutable BM25 index: built once per catalog, queried per request."""

    def __init__(self, items: Iterable[SearchItem]) -> None:
        self._items: Sequence[SearchItem] = tuple(items)
        lengths: list[int] = []
        # term -> [(document number, term frequency)], so a query only touches documents that match.
        self._postings: dict[str, list[tuple[int, int]]] = {}
        for number, item in enumerate(self._items):
            terms = tokenize(item.name) * NAME_WEIGHT + tokenize(item.description) + tokenize(item.extra)
            lengths.append(len(terms))
            for term, count in Counter(terms).items():
                self._postings.setdefault(term, []).append((number, count))
        total = len(self._items)
        average = sum(lengths) / total if total else 0.0
        self._norms = [K1 * (1 - B + B * length / average) if average else K1 for length in lengths]
        self._idf = {
            term: math.log(1 + (total - len(postings) + 0.5) / (len(postings) + 0.5))
            for term, postings in self._postings.items()
        }

    def __len__(self) -> int:
        return len(self._items)

    def search(self, query: str, limit: int = 10, allowed: Callable[[str], bool] | None = None) -> list[Hit]:
        """The best `limit` tools for `query`, best first, among those `allowed` accepts.

        `allowed` is applied before ranking and truncation, so hidden tools neither appear nor
        take a place in the result.
        """
        terms = set(tokenize(query))
        if limit <= 0 or not terms:
            return []
        scores: dict[int, float] = {}
        permitted: dict[int, bool] = {}
        for term in terms:
            idf = self._idf.get(term)
            if idf is None:
                continue
            for number, count in self._postings[term]:
                if allowed is not None:
                    if number not in permitted:
                        permitted[number] = allowed(self._items[number].name)
                    if not permitted[number]:
                        continue
                weight = idf * count * (K1 + 1) / (count + self._norms[number])
                scores[number] = scores.get(number, 0.0) + weight
        best = sorted(scores, key=lambda number: (-scores[number], number))[:limit]
        return [Hit(self._items[n].name, self._items[n].description, scores[n]) for n in best]


def old_answer(hits: Sequence[tuple[str, str, list[str], Any]]) -> dict[str, Any]:
    """Find_Tools' former result (name, description, skills, schema of every hit) as the client read it."""
    rows = [
        {
            "name": name,
            "description": description.strip().split("\n", 1)[0][:200],
            "skills": skills,
            "input_schema": schema,
        }
        for name, description, skills, schema in hits
    ]
    lines = [
        f"- {row['name']}: {row['description']}"
        + (f" (skill: {', '.join(row['skills'])})" if row["skills"] else "")
        + f"\n  arguments: {json.dumps(row['input_schema'], separators=(',', ':'), sort_keys=True)}"
        for row in rows
    ]
    return {
        "content": [{"type": "text", "text": "Tools (call with Use_Tool):\n" + "\n".join(lines)}],
        "structuredContent": {"tools": rows},
    }
