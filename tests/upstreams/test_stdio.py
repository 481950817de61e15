"""Framing of a stdio server's messages: lines in linear time, oversized ones counted and refused."""

from __future__ import annotations

import copy
import json
import tracemalloc

import mcp_types as types

from gateway.upstreams.faults import FaultLog
from gateway.upstreams.stdio import RESULT_TOO_LARGE, LineReader, Oversized, parse, refusal, response_id


def test_lines_split_across_chunks_come_out_whole() -> None:
    reader = LineReader(limit=100)
    assert reader.feed(b'{"a":') == []
    assert reader.feed(b'1}\n{"b"') == [b'{"a":1}']
    assert reader.feed(b":2}\n\n") == [b'{"b":2}', b""]


def test_a_line_over_the_limit_is_counted_with_its_ends_kept_and_its_middle_dropped() -> None:
    reader = LineReader(limit=10)
    lines = reader.feed(b"0123456789" * 1000) + reader.feed(b"end\nnext\n")
    oversized, following = lines
    assert isinstance(oversized, Oversized)
    assert oversized.size == 10_003
    assert oversized.head.startswith(b"0123456789")
    assert oversized.tail.endswith(b"89end")
    assert len(oversized.head) + len(oversized.tail) < oversized.size
    assert following == b"next"


def oversized(text: str) -> Oversized:
    data = text.encode()
    return Oversized(size=10**8, head=data[:4096], tail=data[-4096:])


def test_the_id_of_an_oversized_response_is_found_whether_it_comes_first_or_last() -> None:
    middle = '{"content":[{"type":"text","text":"' + "x" * 20_000 + '","id":99}]}'
    assert response_id(oversized('{"jsonrpc":"2.0","id":7,"result":' + middle + "}")) == 7
    assert response_id(oversized('{"result":' + middle + ',"jsonrpc":"2.0","id":"call-8"}')) == "call-8"


def test_an_oversized_request_or_notification_is_not_mistaken_for_a_response() -> None:
    params = '{"data":"' + "x" * 20_000 + '","id":5}'
    request = '{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":' + params + "}"
    assert response_id(oversized(request)) is None
    assert response_id(oversized('{"jsonrpc":"2.0","method":"notifications/message","params":' + params + "}")) is None
    assert response_id(oversized('{"method":"ping","params":' + params + ',"jsonrpc":"2.0","id":4}')) is None


def test_an_oversized_response_becomes_an_error_naming_the_limit() -> None:
    message = refusal(oversized('{"jsonrpc":"2.0","id":7,"result":{"text":"' + "x" * 9000 + '"}}'), limit=4096)
    assert message is not None
    error = message.message
    assert isinstance(error, types.JSONRPCError)
    assert error.id == 7
    assert error.error.code == RESULT_TOO_LARGE
    assert "100,000,000 bytes" in error.error.message
    assert "limit of 4,096 bytes" in error.error.message


def test_a_listing_is_held_in_the_memory_of_its_decoded_json() -> None:
    tool = {"name": "t", "description": "Looks up records.", "inputSchema": {"type": "object", "properties": {}}}
    tools = [
        {**tool, "name": f"tool_{index:03d}", "inputSchema": copy.deepcopy(tool["inputSchema"])} for index in range(100)
    ]
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}}).encode()
    tracemalloc.start()
    try:
        decoded = json.loads(line)
        plain = tracemalloc.get_traced_memory()[0]
        del decoded
        # Some of the first decoding can still be held after `del`, more or less depending on what
        # ran before in the process: count only what `parse` adds.
        before = tracemalloc.get_traced_memory()[0]
        message = parse(line, FaultLog("s"))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert message is not None and len(message.message.result["tools"]) == 100
    assert held < 1.2 * plain
