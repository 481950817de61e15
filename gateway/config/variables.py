"""`${...}` references in configuration values: the environment and the operator's named secrets
(`${secret:NAME}`), expanded when a definition is read; ${WORKSPACE} left for each session.

A definition from the config file may read the environment; one registered through the API
(`variables` None) may not: there only `${secret:NAME}` of the secrets offered to registrations
and `${WORKSPACE}` are known, so an admin cannot send the gateway's own secrets to a server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gateway.problems import JsonPath, Problem

WORKSPACE = "WORKSPACE"
WORKSPACE_REFERENCE = "${WORKSPACE}"
SECRET_PREFIX = "secret:"
SECRET_PLACES = ("headers", "env", "args")
"""The keys of a server entry whose values may name a secret."""
MASK = "***"
_SERVERS = ("servers", "mcpServers")

_REFERENCE = re.compile(r"\$(?:(\$)|\{([^}]*)(\}?))")
_VARIABLE = re.compile(r"(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.DOTALL)
_SECRET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What `masked` keeps: escapes, secret references and the per-session workspace.
_SHOWN = re.compile(r"\$\$|\$\{secret:[A-Za-z_][A-Za-z0-9_]*\}|\$\{WORKSPACE\}")


def expand(
    text: str,
    variables: Mapping[str, str] | None,
    path: JsonPath,
    problems: list[Problem],
    secrets: Mapping[str, str] | None = None,
) -> str:
    """`text` with ${NAME}, ${NAME:-default} and ${secret:NAME} replaced and $$ turned into $.

    `variables` None: a definition from the API, which may name no variable but ${WORKSPACE}.
    `secrets`: the secrets a server entry's headers, env and args may name (see `SECRET_PLACES`).
    """

    def resolve(match: re.Match[str]) -> str:
        if match.group(1):
            return "$"
        body = match.group(2)
        if not match.group(3):
            problems.append((path, f"'${{{body}' is not closed with '}}' (write $$ for a literal $)"))
        elif body.startswith(SECRET_PREFIX):
            found = _secret(body.removeprefix(SECRET_PREFIX), path, problems, secrets, api=variables is None)
            if found is not None:
                return found
        elif body.startswith("input:"):
            problems.append(
                (
                    path,
                    f"${{{body}}} is a VS Code input the gateway cannot ask for; set an "
                    "environment variable and write ${NAME} instead",
                )
            )
        elif variables is None:
            if body == WORKSPACE:
                return match.group(0)
            problems.append(
                (
                    path,
                    f"${{{body}}}: a server registered through the API cannot read the gateway's environment; "
                    "name a secret the operator offers to registrations instead: ${secret:NAME}",
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


def _secret(
    name: str, path: JsonPath, problems: list[Problem], secrets: Mapping[str, str] | None, *, api: bool
) -> str | None:
    """The value of the secret `name`, or None after recording why it cannot be used at `path`."""
    if not _SECRET_NAME.fullmatch(name):
        problems.append((path, f"${{secret:{name}}}: a secret's name is letters, digits and '_'"))
    elif secrets is None or len(path) != 4 or path[0] not in _SERVERS or path[2] not in SECRET_PLACES:
        problems.append((path, f"${{secret:{name}}} may be used only in a server's headers, env or args"))
    elif name in secrets:
        return secrets[name]
    elif api:
        problems.append(
            (
                path,
                f"no secret named '{name}' is offered to registrations (the operator offers one in the "
                "config file's `secrets` section with `registrations: true`)",
            )
        )
    else:
        problems.append((path, f"no secret named '{name}' in the `secrets` section"))
    return None


def substitute(
    value: Any,
    variables: Mapping[str, str] | None,
    path: JsonPath,
    problems: list[Problem],
    secrets: Mapping[str, str] | None = None,
) -> Any:
    """A copy of the parsed file with every string value expanded; map keys must be strings."""
    if isinstance(value, str):
        return expand(value, variables, path, problems, secrets)
    if isinstance(value, list):
        return [substitute(item, variables, (*path, index), problems, secrets) for index, item in enumerate(value)]
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                problems.append(((*path, str(key)), f"the key {key!r} must be text; quote it"))
        return {str(k): substitute(v, variables, (*path, str(k)), problems, secrets) for k, v in value.items()}
    return value


def masked(text: str) -> str:
    """`text` as the API shows a header or env value: `${secret:NAME}` references (and
    ${WORKSPACE}) as written, every other part `***`."""
    shown: list[str] = []
    end = 0
    for match in _SHOWN.finditer(text):
        if match.start() > end:
            shown.append(MASK)
        shown.append(match.group(0))
        end = match.end()
    if end < len(text):
        shown.append(MASK)
    return "".join(shown)


def pin_variable(value: Any, name: str, text: str) -> Any:
    """A copy of parsed data with every `${name}` already replaced by `text` (its `$` written `$$`),
    the rest left for `substitute`: how a file extended by another keeps its own ${CONFIG_DIR}."""
    if isinstance(value, str):
        escaped = text.replace("$", "$$")
        return _REFERENCE.sub(
            lambda match: escaped if match.group(2) == name and match.group(3) else match.group(0), value
        )
    if isinstance(value, list):
        return [pin_variable(item, name, text) for item in value]
    if isinstance(value, dict):
        return {key: pin_variable(item, name, text) for key, item in value.items()}
    return value
