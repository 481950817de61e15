"""The JSON Schema of every accepted configuration format (gateway/config/config_schema.json)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from gateway.problems import Problem, explain_error


@cache
def _schema() -> dict[str, Any]:
    """The JSON Schema of every accepted format (gateway/config/config_schema.json)."""
    schema: dict[str, Any] = json.loads(Path(__file__).with_name("config_schema.json").read_text("utf-8"))
    return schema


def schema_problems(data: Any, kind: str) -> list[Problem]:
    """Every schema violation of `data`, read as the format `kind` (a definition in the schema)."""
    schema = _schema() if kind == "gateway" else {**_schema(), "$ref": f"#/$defs/{kind}"}
    import jsonschema  # 40 ms: loaded when a file is validated, not by commands that read none

    validator = jsonschema.Draft202012Validator(schema)
    return [problem for error in validator.iter_errors(data) for problem in explain_error(error)]
