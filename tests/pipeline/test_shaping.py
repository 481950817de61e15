"""Result shaping: long text cut in the middle with a marker, large binaries dropped with a note."""

from __future__ import annotations

import base64
import re
import time

import mcp_types as types
import pytest

from gateway.pipeline.chain import ToolCall
from gateway.pipeline.shaping import ShapeResult, cut_text, decoded_size, shape_result

from .conftest import MakeCall, text_result

MARKER = re.compile(r"\[\.\.\. ([\d,]+) characters \(([\d,]+) lines?\) omitted \.\.\.\]")


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def test_a_small_result_is_returned_as_the_same_object() -> None:
    result = types.CallToolResult(content=[types.TextContent(text="short")], structured_content={"a": 1})
    assert shape_result(result, max_text_chars=100) is result


def test_one_megabyte_of_text_keeps_whole_first_and_last_lines_around_a_marker() -> None:
    lines = [f"line {i:06d} " + "x" * 87 + "\n" for i in range(10_500)]
    text = "".join(lines)
    assert len(text) > 1_000_000
    # A guard against quadratic work, in CPU seconds of this thread so that a busy machine does not stretch
    # it: shaping takes about 1 ms, the bound is fifty times that.
    started = time.thread_time()
    shaped = texts(shape_result(text_result(text), max_text_chars=8000))[0]
    assert time.thread_time() - started < 0.05
    head, marker_line, tail = shaped.split("\n[")[0] + "\n", "[" + shaped.split("\n[")[1], ""
    marker_line, _, tail = marker_line.partition("\n")
    assert head == "".join(lines[:40])
    assert tail == "".join(lines[-40:])
    match = MARKER.fullmatch(marker_line)
    assert match is not None
    assert match.group(1) == f"{len(text) - 80 * 100:,}"
    assert match.group(2) == f"{10_500 - 80:,}"
    assert len(shaped) <= 8000 + len(marker_line) + 2


def test_a_single_huge_line_is_cut_inside() -> None:
    text = "a" * 5000 + "b" * 5000
    shaped = cut_text(text, 1000)
    assert shaped == "a" * 500 + "\n[... 9,000 characters (1 line) omitted ...]\n" + "b" * 500


def test_a_huge_line_between_short_ones_is_dropped_whole() -> None:
    text = "first\n" + "x" * 10_000 + "\nlast\n"
    assert cut_text(text, 100) == "first\n[... 10,001 characters (1 line) omitted ...]\nlast\n"


def test_the_budget_counts_across_all_text_blocks() -> None:
    small = types.TextContent(text="s" * 100)
    large = [types.TextContent(text="\n".join(["y" * 9] * 500)) for _ in range(2)]
    result = types.CallToolResult(content=[small, *large])
    shaped = texts(shape_result(result, max_text_chars=1100))
    assert shaped[0] == small.text
    for text in shaped[1:]:
        kept = MARKER.sub("", text).replace("\n", "")
        assert 400 <= len(kept) <= 500
        assert MARKER.search(text)


def test_embedded_text_resources_count_as_text() -> None:
    resource = types.EmbeddedResource(resource=types.TextResourceContents(uri="file:///log", text="z\n" * 5000))
    shaped = shape_result(types.CallToolResult(content=[resource]), max_text_chars=200)
    block = shaped.content[0]
    assert isinstance(block, types.EmbeddedResource)
    assert isinstance(block.resource, types.TextResourceContents)
    assert block.resource.uri == "file:///log"
    assert MARKER.search(block.resource.text)


def test_structured_content_error_flag_and_meta_are_kept() -> None:
    result = types.CallToolResult(
        content=[types.TextContent(text="e" * 10_000)],
        structured_content={"rows": list(range(1000))},
        is_error=True,
        _meta={"trace": "t1"},
    )
    shaped = shape_result(result, max_text_chars=100)
    assert shaped.structured_content is result.structured_content
    assert shaped.is_error
    assert shaped.meta == {"trace": "t1"}


def test_binaries_under_the_cap_pass_and_larger_ones_become_a_note() -> None:
    small = types.ImageContent(data=base64.b64encode(b"p" * 100).decode(), mime_type="image/png")
    big = types.AudioContent(data=base64.b64encode(b"w" * 3000).decode(), mime_type="audio/wav")
    blob = types.EmbeddedResource(
        resource=types.BlobResourceContents(uri="file:///x.bin", blob=base64.b64encode(b"b" * 2001).decode())
    )
    shaped = shape_result(types.CallToolResult(content=[small, big, blob]), max_binary_bytes=2000)
    assert shaped.content[0] is small
    assert texts(shaped) == [
        "[audio/wav audio of 3,000 bytes dropped: larger than the 2,000-byte limit for one result]",
        "[binary resource file:///x.bin of 2,001 bytes dropped: larger than the 2,000-byte limit for one result]",
    ]


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 100, 1001])
def test_decoded_size_matches_base64_decoding(size: int) -> None:
    data = base64.b64encode(b"\x00" * size).decode()
    assert decoded_size(data) == size


@pytest.mark.anyio
async def test_the_step_shapes_what_the_chain_returns(make_call: MakeCall) -> None:
    async def chatty(call: ToolCall) -> types.CallToolResult:
        return text_result("word\n" * 10_000)

    result = await ShapeResult(max_text_chars=100)(make_call(), chatty)
    assert len(texts(result)[0]) < 200
