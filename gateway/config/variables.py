"""`${NAME}` references in configuration values: expansion from the environment, ${WORKSPACE} left for each session."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gateway.config.schema import JsonPath, Problem

WORKSPACE = "WORKSPACE"
WORKSPACE_REFERENCE = "${WORKSPACE}"

_REFERENCE = re.compile(r"\$(?:(\$)|\{([^}]*)(\}?))")
_VARIABLE = re.compile(r"(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.DOTALL)


def expand(text: str, variables: Mapping[str, str], path: JsonPath, problems: list[Problem]) -> str:
    """`text` with ${NAME} and ${NAME:-default} replaced and $$ turned into $."""

    def resolve(match: re.Match[str]) -> str:
        if match.group(1):
            return "$"
        body = match.group(2)
        if not match.group(3):
            problems.append((path, f"'${{{body}' is not closed with '}}' (write $$ for a literal $)"))
        elif body.startswith("input:"):
            problems.append(
                (
                    path,
                    f"${{{body}}} is a VS Code input the gateway cannot ask for; set an "
                    "environment variable and write ${NAME} instead",
                )
            )
        elif (variable := _VARIABLE.fullmatch(body)) is None or "${" in (variable.group(2) or ""):
            problems.append(
                (
                    path,
                    f"${{{body}}} is not a variable reference; write ${{NAME}} or ${{NAME:-default}} "
                    "(nested references are not supported; $$ is a literal $)",
                )
            )
        else:
            name, default = variable.groups()
            if name == WORKSPACE and name not in variables:
                # Filled in per session when a `scope: session` server starts.
                return match.group(0)
            value = variables.get(name)
            if default is not None and not value:
                return str(default)
            if value is not None:
                return value
            problems.append(
                (path, f"environment variable {name} is not set (set it, or give a default: ${{{name}:-value}})")
            )
        # Keep the text as written so that the schema does not report a second, derived problem.
        return match.group(0)

    return _REFERENCE.sub(resolve, text)


def substitute(value: Any, variables: Mapping[str, str], path: JsonPath, problems: list[Problem]) -> Any:
    """A copy of the parsed file with every string value expanded; map keys must be strings."""
    if isinstance(value, str):
        return expand(value, variables, path, problems)
    if isinstance(value, list):
        return [substitute(item, variables, (*path, index), problems) for index, item in enumerate(value)]
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                problems.append(((*path, str(key)), f"the key {key!r} must be text; quote it"))
        return {str(k): substitute(v, variables, (*path, str(k)), problems) for k, v in value.items()}
    return value
