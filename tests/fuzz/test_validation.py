"""Argument validation raises only the gateway's errors, whatever schema a server publishes."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.errors import GatewayError
from gateway.pipeline.validation import ValidateArguments

from . import RUNS, TEXT, json_values, nested

KEYWORDS = [
    "type", "properties", "required", "items", "enum", "const", "pattern", "minimum", "maximum", "minLength",
    "maxLength", "$ref", "$schema", "$defs", "anyOf", "oneOf", "allOf", "not", "additionalProperties", "format",
    "multipleOf", "if", "then", "else", "dependentRequired", "$id", "$dynamicRef", "uniqueItems",
]  # fmt: skip
NEAR_VALID: st.SearchStrategy[Any] = st.sampled_from(
    [
        "object", "string", "integer", "#", "#/$defs/x", "#/nope", "http://example.invalid/s", "[", "(?P<x", "a{99999}",
        "https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft-04/schema#", "email", 0, -1,
        0.0, 10**400, float("nan"), True, False, None, [], {}, ["a"], {"a": {}}, ["not", "a", "schema"],
    ]
)  # fmt: skip
SCHEMAS = st.recursive(
    st.dictionaries(st.sampled_from(KEYWORDS), NEAR_VALID, max_size=4),
    lambda children: st.dictionaries(
        st.sampled_from(KEYWORDS), st.one_of(children, NEAR_VALID, st.dictionaries(TEXT, children, max_size=3))
    ),
    max_leaves=12,
)


@RUNS
def test_any_schema_and_arguments_give_violations_or_a_gateway_error(runs: settings) -> None:
    validate = ValidateArguments()

    @runs
    @given(SCHEMAS, st.dictionaries(TEXT, json_values(10), max_size=5))
    def check(schema: dict[str, Any], arguments: dict[str, Any]) -> None:
        try:
            violations = validate.violations("tool", schema, arguments)
        except GatewayError:
            return
        assert all(isinstance(line, str) and len(line) < 1000 for line in violations)

    check()


def test_a_schema_nested_past_the_recursion_limit_gives_violations_or_a_gateway_error() -> None:
    schema = {"type": "object", "properties": {"a": nested_schema(3000)}}
    try:
        ValidateArguments().violations("tool", schema, {"a": nested(10)})
    except GatewayError:
        return


def nested_schema(depth: int) -> dict[str, Any]:
    """A schema of `depth` nested object schemas."""
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"k": schema}}
    return schema


def test_a_self_referencing_schema_is_a_gateway_error_or_applies() -> None:
    schema = {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
    try:
        ValidateArguments().violations("tool", schema, {"x": nested(5)})
    except GatewayError:
        return
