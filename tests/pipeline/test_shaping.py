"""Result shaping: long text cut in the middle with a marker, large binaries dropped with a note, structured
content held to the same budget and in agreement with the text that writes it out."""

from __future__ import annotations

import base64
import json
import re
import time
from dataclasses import replace
from typing import Any

import mcp_types as types
import pytest

from gateway.pipeline.chain import ToolCall
from gateway.pipeline.shaping import SHAPED_KEY, ShapeResult, cut_text, decoded_size, json_size, shape_result

from .conftest import MakeCall, make_tool, text_result

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


def test_the_error_flag_and_meta_are_kept_and_meta_says_what_was_cut() -> None:
    result = types.CallToolResult(
        content=[types.TextContent(text="e" * 10_000)],
        structured_content={"rows": [1, 2]},
        is_error=True,
        _meta={"trace": "t1"},
    )
    shaped = shape_result(result, max_text_chars=100)
    assert shaped.structured_content is result.structured_content
    assert shaped.is_error
    kept = len(texts(shaped)[0])
    assert shaped.meta == {"trace": "t1", SHAPED_KEY: {"content": {"chars": 10_000, "kept": kept}}}


def report(rows: int, note: int = 0) -> dict[str, Any]:
    """Structured content the size of a report: a title, `rows` records and a note of `note` characters."""
    records = [{"index": index, "label": f"row {index:05d}", "value": index * 1.5} for index in range(rows)]
    return {"title": "Quarterly figures", "rows": records, "note": "n" * note}


def test_structured_content_over_the_budget_keeps_every_key_and_the_first_and_last_rows() -> None:
    data = report(400, note=100)
    result = types.CallToolResult(content=[types.TextContent(text="A summary.")], structured_content=data)
    shaped = shape_result(result, max_text_chars=8000)
    cut = shaped.structured_content
    assert cut is not None and json_size(data) > 19_000
    assert set(cut) == set(data) and cut["title"] == data["title"] and cut["note"] == data["note"]
    rows = cut["rows"]
    assert 100 < len(rows) < 400 and rows[0] == data["rows"][0] and rows[-1] == data["rows"][-1]
    assert rows == data["rows"][: (len(rows) + 1) // 2] + data["rows"][400 - len(rows) // 2 :]
    assert json_size(cut) <= 8000
    note = texts(shaped)[-1]
    assert texts(shaped)[0] == "A summary." and len(shaped.content) == 2
    assert note == (
        f"[structured content cut to the 8,000-character limit: {json_size(cut):,} of {json_size(data):,} "
        f"characters kept; cut: $.rows ({len(rows)} of 400 items)]"
    )
    assert shaped.meta == {SHAPED_KEY: {"structuredContent": {"chars": json_size(data), "kept": json_size(cut)}}}


def test_a_long_string_in_the_structure_is_cut_in_the_middle_with_the_text_marker() -> None:
    data = {"log": "\n".join(f"entry {index:05d}" for index in range(3000)), "status": "done"}
    shaped = shape_result(types.CallToolResult(content=[], structured_content=data), max_text_chars=2000)
    cut = shaped.structured_content
    assert cut is not None and cut["status"] == "done"
    assert cut["log"].startswith("entry 00000\n") and cut["log"].endswith("entry 02999")
    assert MARKER.search(cut["log"]) and json_size(cut) <= 2000


@pytest.mark.parametrize("indent", [None, 2])
def test_a_text_block_writing_out_the_structure_writes_out_the_cut_structure(indent: int | None) -> None:
    data = report(400, note=6000)
    written = json.dumps(data, indent=indent)
    result = types.CallToolResult(content=[types.TextContent(text=written)], structured_content=data)
    shaped = shape_result(result, max_text_chars=8000)
    text = texts(shaped)[0]
    assert json.loads(text) == shaped.structured_content != data
    assert len(text) <= 8000 and (indent is None) == ("\n" not in text)
    assert MARKER.search(shaped.structured_content["note"])  # type: ignore[index]


def test_a_cut_the_output_schema_would_refuse_keeps_the_structure_whole_and_says_so() -> None:
    data = {"values": [index * 0.5 for index in range(2000)]}
    result = types.CallToolResult(content=[types.TextContent(text=json.dumps(data))], structured_content=data)
    shaped = shape_result(result, max_text_chars=1000, accepts=lambda value: len(value["values"]) >= 2000)
    assert shaped.structured_content is data
    assert texts(shaped)[-1] == (
        f"[structured content of {json_size(data):,} characters kept whole: cut to the 1,000-character limit "
        "it would no longer match the tool's output schema]"
    )
    assert MARKER.search(texts(shaped)[0])  # the text is cut as text


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


@pytest.mark.anyio
async def test_the_step_holds_a_cut_structure_to_the_tool_s_output_schema(make_call: MakeCall) -> None:
    schema = {"type": "object", "properties": {"values": {"type": "array", "minItems": 2000}}}
    data = {"values": list(range(2000)), "other": list(range(2000))}

    async def counting(call: ToolCall) -> types.CallToolResult:
        return types.CallToolResult(content=[], structured_content=data)

    strict = replace(make_tool(), output_schema=schema)
    loose = replace(make_tool(), output_schema={"type": "object"})
    kept = await ShapeResult(max_text_chars=1000)(make_call(strict), counting)
    cut = await ShapeResult(max_text_chars=1000)(make_call(loose), counting)
    assert kept.structured_content is data
    assert cut.structured_content is not None and json_size(cut.structured_content) <= 1000
