"""Schemas for people: parameter tables of nested schemas, and try-it form values turned into arguments."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.web.schema import RAW_FIELD, FormProblems, arguments_from_form, form_fields, parameters

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["city", "units"],
    "properties": {
        "city": {"type": "string", "description": "Where", "minLength": 1},
        "units": {"type": "string", "enum": ["metric", "imperial"], "default": "metric"},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "detail": {"type": "boolean"},
        "where": {
            "type": "object",
            "required": ["lat"],
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
        },
        "stops": {"type": "array", "items": {"$ref": "#/$defs/stop"}},
    },
    "$defs": {"stop": {"type": "object", "properties": {"name": {"type": "string"}}}},
}


def test_a_parameter_table_shows_nesting_arrays_enums_defaults_constraints_and_required_marks() -> None:
    rows = {row.path: row for row in parameters(SCHEMA)}
    assert list(rows) == ["city", "units", "days", "detail", "where", "where.lat", "where.lon", "stops", "stops[].name"]
    assert rows["city"].required and rows["city"].constraints == ("min length 1",)
    assert rows["units"].enum == ('"metric"', '"imperial"') and rows["units"].default == '"metric"'
    assert rows["days"].constraints == ("≥ 1", "≤ 14") and not rows["days"].required
    assert rows["where.lat"].required and rows["where.lat"].depth == 1 and not rows["where.lon"].required
    assert rows["stops"].type == "array of object" and rows["stops[].name"].depth == 1


def test_a_malformed_or_self_referencing_schema_still_makes_a_table() -> None:
    looping = {"properties": {"a": {"$ref": "#"}, "b": "not a schema", "c": {"type": ["string", "null"]}}}
    rows = parameters(looping)
    assert [row.path for row in rows][:3] == ["a", "a.a", "a.a.a"]
    assert len(rows) < 40
    assert {row.path: row.type for row in rows}["c"] == "string | null"
    assert parameters("nonsense") == [] and parameters({"properties": []}) == []


def test_form_values_become_typed_arguments_and_empty_fields_are_left_out() -> None:
    fields = form_fields(SCHEMA)
    controls = {field.name: field.control for field in fields}
    assert controls == {
        "city": "text",
        "units": "select",
        "days": "number",
        "detail": "select",
        "where": "json",
        "stops": "json",
    }
    values = {"arg.city": "Oslo", "arg.units": "", "arg.days": "3", "arg.detail": "false", "arg.where": '{"lat": 1}'}
    assert arguments_from_form(fields, values) == {"city": "Oslo", "days": 3, "detail": False, "where": {"lat": 1}}


def test_bad_form_values_are_named_by_their_field() -> None:
    fields = form_fields(SCHEMA)
    with pytest.raises(FormProblems) as raised:
        arguments_from_form(fields, {"arg.days": "three", "arg.where": "{lat"})
    assert set(raised.value.problems) == {"days", "where"}
    assert "expected a number" in raised.value.problems["days"]


def test_raw_json_arguments_replace_the_fields_and_must_be_an_object() -> None:
    fields = form_fields(SCHEMA)
    assert arguments_from_form(fields, {RAW_FIELD: '{"city": "x"}', "arg.city": "ignored"}) == {"city": "x"}
    with pytest.raises(FormProblems) as raised:
        arguments_from_form(fields, {RAW_FIELD: "[1]"})
    assert raised.value.problems == {RAW_FIELD: "the arguments must be a JSON object"}
