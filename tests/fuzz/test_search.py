"""Tool search answers any query over any tools, and never shows a tool the caller may not see."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.skills.search import SearchItem, ToolIndex

from . import RUNS, TEXT

WORDS = st.sampled_from(["list", "tables", "read", "file", "the", "s", "sss", "ListTables", "_", "-", "ß", "İ"])
PHRASES = st.lists(st.one_of(WORDS, TEXT), max_size=6).map(" ".join)
ITEMS = st.lists(
    st.builds(SearchItem, name=PHRASES, description=PHRASES, skills=PHRASES, parameters=PHRASES, server=PHRASES),
    max_size=20,
)


@RUNS
def test_search_answers_any_query_within_the_limit_and_the_allowed_tools(runs: settings) -> None:
    @runs
    @given(ITEMS, PHRASES, st.integers(min_value=-2, max_value=30), st.sets(PHRASES, max_size=5))
    def check(items: list[SearchItem], query: str, limit: int, hidden: set[str]) -> None:
        index = ToolIndex(items)
        hits = index.search(query, limit=limit, allowed=lambda name: name not in hidden)
        assert len(hits) <= max(limit, 0)
        assert not {hit.name for hit in hits} & hidden
        assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
        unrestricted = index.search(query, limit=limit)
        assert len(unrestricted) >= len(hits) or len(unrestricted) == max(limit, 0)

    check()
