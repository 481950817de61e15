"""Tool schemas compiled once: jsonschema judges, jsonschema-rs only accepts."""

from __future__ import annotations

import math
import socket

import pytest

from gateway.catalog.jsonschemas import SchemaCache, compile_schema

ITEMS = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "count": {"type": "integer", "maximum": 10}},
    "required": ["title"],
}


def test_a_valid_instance_is_accepted_by_the_fast_validator() -> None:
    compiled = compile_schema(ITEMS)
    assert compiled.fast is not None
    assert compiled.accepts({"title": "t", "count": 3})


def test_an_invalid_instance_is_never_accepted_and_jsonschema_says_why() -> None:
    compiled = compile_schema(ITEMS)
    assert not compiled.accepts({"count": 11})
    messages = sorted(error.message for error in compiled.validator.iter_errors({"count": 11}))
    assert messages == ["'title' is a required property", "11 is greater than the maximum of 10"]


@pytest.mark.parametrize(
    "instance",
    [{"value": math.nan}, {1: 2.5}],
    ids=["nan", "a key that is not a string"],
)
def test_an_instance_the_fast_validator_cannot_judge_is_left_to_jsonschema(instance: object) -> None:
    compiled = compile_schema({"type": "object", "additionalProperties": {"type": "number"}})
    assert not compiled.accepts(instance)
    assert compiled.validator.is_valid(instance)


def test_formats_are_annotations_for_both_as_for_jsonschema_without_a_format_checker() -> None:
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "string", "format": "email"}
    compiled = compile_schema(schema)
    assert compiled.accepts("not an address")
    assert compiled.validator.is_valid("not an address")


def test_a_schema_referring_to_another_document_gets_no_fast_validator_and_nothing_is_fetched() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/schema.json"
        compiled = compile_schema({"type": "object", "properties": {"n": {"$ref": url}}})
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert compiled.fast is None
    assert not compiled.accepts({"n": 1})


def test_the_cache_compiles_a_schema_object_once_and_keeps_the_most_recently_used() -> None:
    cache = SchemaCache(size=2)
    first, second, third = dict(ITEMS), dict(ITEMS), dict(ITEMS)
    compiled = cache.get(first)
    assert cache.get(first) is compiled
    kept = cache.get(second)
    cache.get(first)
    cache.get(third)  # pushes out `second`, the least recently used
    assert cache.get(first) is compiled
    assert cache.get(second) is not kept
