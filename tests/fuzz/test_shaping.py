"""Result shaping keeps any result within the text budget, cuts structured content over it without losing
a key or growing it, and never fails."""

from __future__ import annotations

import re
from typing import Any

import mcp_types as types
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.pipeline.shaping import SHAPED_KEY, json_size, shape_result

from . import RUNS, TEXT, json_values

LINES = st.lists(st.one_of(TEXT, st.just(""), st.text(alphabet="ab\n", max_size=200)), max_size=30).map("\n".join)
BASE64 = st.one_of(st.text(alphabet="ABCDabcd0123+/=", max_size=400), TEXT, st.just(""), st.just("===="))
BLOCKS = st.one_of(
    st.builds(types.TextContent, text=LINES),
    st.builds(types.ImageContent, data=BASE64, mime_type=TEXT),
    st.builds(types.AudioContent, data=BASE64, mime_type=st.just("audio/wav")),
    st.builds(
        types.EmbeddedResource,
        resource=st.one_of(
            st.builds(types.TextResourceContents, uri=st.just("toy://x"), text=LINES),
            st.builds(types.BlobResourceContents, uri=st.just("toy://b"), blob=BASE64),
        ),
    ),
    st.builds(types.ResourceLink, uri=st.just("toy://l"), name=TEXT),
)
MARKER = re.compile(r"\[\.\.\. [0-9,]+ characters \([0-9,]+ lines?\) omitted \.\.\.\]")


def texts(result: types.CallToolResult) -> list[str]:
    """Every text the result carries, in text blocks and embedded text resources."""
    found = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            found.append(block.text)
        elif isinstance(block, types.EmbeddedResource) and isinstance(block.resource, types.TextResourceContents):
            found.append(block.resource.text)
    return found


@RUNS
def test_shaped_text_stays_within_the_limit_plus_markers(runs: settings) -> None:
    @runs
    @given(
        st.lists(BLOCKS, max_size=8),
        st.one_of(st.none(), json_values(10).map(lambda value: {"value": value})),
        st.integers(min_value=1, max_value=2000),
        st.integers(min_value=0, max_value=400),
        st.booleans(),
    )
    def check(blocks: list[Any], structured: Any, max_text: int, max_binary: int, is_error: bool) -> None:
        result = types.CallToolResult(content=blocks, structured_content=structured, is_error=is_error)
        shaped = shape_result(result, max_text_chars=max_text, max_binary_bytes=max_binary)
        said = (shaped.meta or {}).get(SHAPED_KEY, {}).get("structuredContent")
        assert len(shaped.content) == len(blocks) + (said is not None)
        assert shaped.is_error == is_error
        if structured is None or json_size(structured) <= max_text:
            assert shaped.structured_content is structured and said is None
        elif said is not None:
            # Cut: every key kept, never longer than it was, and the result says by how much.
            assert shaped.structured_content is not None and set(shaped.structured_content) == set(structured)
            assert said == {"chars": json_size(structured), "kept": json_size(shaped.structured_content)}
            assert said["kept"] < said["chars"]
        else:
            assert shaped.structured_content is structured  # nothing that could be cut shorter
        out = texts(shaped.model_copy(update={"content": shaped.content[: len(blocks)]}))
        # Each cut block gains one marker and at most two newlines around it.
        allowance = sum(len(marker.group()) + 2 for text in out for marker in MARKER.finditer(text))
        assert sum(map(len, out)) <= max_text + allowance or out == texts(result)

    check()


@RUNS
def test_a_result_within_the_limits_comes_back_untouched(runs: settings) -> None:
    @runs
    @given(st.lists(st.builds(types.TextContent, text=LINES), max_size=5))
    def check(blocks: list[types.TextContent]) -> None:
        result = types.CallToolResult(content=list(blocks))
        limit = sum(len(block.text) for block in blocks) + 1
        assert shape_result(result, max_text_chars=limit) is result

    check()
