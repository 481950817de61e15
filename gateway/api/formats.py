"""The three bodies `POST /api/v1/servers` accepts, each turned into server entries of the gateway's own form.

- The gateway's own entry: `{"name": "x", "command": ..., "args": [...]}` or `{"name": "x", "url": ...}`.
- A client's fragment: `{"mcpServers": {...}}` as Claude Desktop writes it (several servers at once),
  read by the same code as a client's config file (`config/clientfiles.py`).
- An MCP Registry `server.json`. Its first package the gateway can start becomes a stdio server:
  pypi `uvx <id>==<version>`, npm `npx -y <id>@<version>`, oci a hardened `docker run` of the image
  (no network, read-only, no capabilities: the limits of the gateway's own sandbox), whose runtime
  arguments may only set environment variables (`gateway/config/dockerrun.py`). Without one,
  its first remote becomes a URL server (streamable-http -> http, sse -> sse). Arguments come from
  `runtimeArguments` (before the package) and `packageArguments` (after it); a value's `{name}`
  templates from its `variables`; environment variables and headers from their `value` or
  `default`. A required one without either is a problem naming it: give it a `value`
  (`"${secret:NAME}"` takes a secret the operator offers to registrations; the gateway's
  environment is never read).

Pure: the entries are checked against the config schema here (problems name their path, e.g.
`servers.x.url` or `packages[0].registryType`); the gateway's parser checks them again when added.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from gateway.config.clientfiles import fitting_name, from_client_file
from gateway.config.dockerrun import image_problem, run_args, setting_problem, variable_problem
from gateway.config.schema import schema_problems
from gateway.problems import (
    NAME_PATTERN,
    NAME_RULE,
    JsonPath,
    Problem,
    explain_error,
    raise_if_any,
)

SOURCE = "request body"
_STARTABLE = ("pypi", "npm", "oci")
_REMOTE_TRANSPORTS = {"streamable-http": "http", "sse": "sse"}
# `{name}` is a server.json variable; `${secret:NAME}` is left for the gateway to fill in.
_TEMPLATE = re.compile(r"(?<!\$)\{([A-Za-z0-9_.-]+)\}")

_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "value": {"type": "string"},
        "default": {"type": "string"},
        "isRequired": {"type": "boolean"},
        "variables": {"type": "object", "additionalProperties": {"$ref": "#/$defs/input"}},
    },
}
_ARGUMENT: dict[str, Any] = {
    "allOf": [{"$ref": "#/$defs/input"}],
    "type": "object",
    "required": ["type"],
    "properties": {"type": {"enum": ["positional", "named"]}, "name": {"type": "string", "minLength": 1}},
}
_NAMED_INPUT: dict[str, Any] = {
    "allOf": [{"$ref": "#/$defs/input"}],
    "type": "object",
    "required": ["name"],
    "properties": {"name": {"type": "string", "minLength": 1}},
}
SERVER_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "version": {"type": "string"},
        "packages": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["registryType", "identifier"],
                "properties": {
                    "registryType": {"type": "string"},
                    "identifier": {"type": "string", "minLength": 1},
                    "version": {"type": "string"},
                    "transport": {
                        "type": "object",
                        "properties": {"type": {"enum": ["stdio", "streamable-http", "sse"]}},
                    },
                    "runtimeArguments": {"type": "array", "items": {"$ref": "#/$defs/argument"}},
                    "packageArguments": {"type": "array", "items": {"$ref": "#/$defs/argument"}},
                    "environmentVariables": {"type": "array", "items": {"$ref": "#/$defs/namedInput"}},
                },
            },
        },
        "remotes": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["type", "url"],
                "properties": {
                    "type": {"enum": list(_REMOTE_TRANSPORTS)},
                    "url": {"type": "string", "minLength": 1},
                    "headers": {"type": "array", "items": {"$ref": "#/$defs/namedInput"}},
                    "variables": {"type": "object", "additionalProperties": {"$ref": "#/$defs/input"}},
                },
            },
        },
    },
    "$defs": {"input": _INPUT, "argument": _ARGUMENT, "namedInput": _NAMED_INPUT},
}
"""The parts of the registry's server.json schema the gateway reads; other keys pass unchecked."""


@dataclass(frozen=True, slots=True)
class Registration:
    """One server to register: its name and its entry in the gateway's form."""

    name: str
    entry: dict[str, Any] = field(default_factory=dict)


def registrations(body: Mapping[str, Any]) -> list[Registration]:
    """The servers a POST body describes; raises `ConfigProblems` naming each problem's path."""
    if "mcpServers" in body:
        return _client_fragment(body)
    if {"packages", "remotes"} & set(body):
        return [_server_json(body)]
    return [_own_entry(body)]


def _own_entry(body: Mapping[str, Any]) -> Registration:
    name = body.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        problem = "missing required key 'name'" if name is None else f"must be a server name: {NAME_RULE}"
        raise_if_any(SOURCE, [(("name",), problem)])
    assert isinstance(name, str)
    entry = {key: value for key, value in body.items() if key != "name"}
    raise_if_any(SOURCE, _entry_problems(name, entry))
    return Registration(name, entry)


def _entry_problems(name: str, entry: Any) -> list[Problem]:
    return [(("servers", name, *path), text) for path, text in schema_problems(entry, "server")]


def _client_fragment(body: Mapping[str, Any]) -> list[Registration]:
    raise_if_any(SOURCE, schema_problems(dict(body), "mcpServersFile"))
    if not body["mcpServers"]:
        raise_if_any(SOURCE, [(("mcpServers",), "names no server")])
    problems: list[Problem] = []
    servers = from_client_file(body, "mcpServersFile", problems, {})["servers"]
    raise_if_any(SOURCE, problems)
    return [Registration(name, entry) for name, entry in servers.items()]


def _server_json(body: Mapping[str, Any]) -> Registration:
    validator = jsonschema.Draft202012Validator(SERVER_JSON_SCHEMA)
    raise_if_any(SOURCE, [problem for error in validator.iter_errors(body) for problem in explain_error(error)])
    name = fitting_name(body["name"].rsplit("/", 1)[-1], set())
    packages: list[dict[str, Any]] = body.get("packages", [])
    remotes: list[dict[str, Any]] = body.get("remotes", [])
    startable = (
        index
        for index, package in enumerate(packages)
        if package["registryType"] in _STARTABLE and package.get("transport", {}).get("type", "stdio") == "stdio"
    )
    chosen = next(startable, None)
    if chosen is None and not remotes:
        raise_if_any(SOURCE, [_unstartable(packages)])
    problems: list[Problem] = []
    if chosen is not None:
        registration = _package(name, packages[chosen], ("packages", chosen), problems)
    else:
        registration = _remote(name, remotes[0], ("remotes", 0), problems)
    raise_if_any(SOURCE, problems)
    return registration


def _unstartable(packages: list[dict[str, Any]]) -> Problem:
    """Why no package of a server.json without remotes can be started, told at its first package."""
    if not packages:
        return ((), "has neither packages nor remotes, so there is nothing to connect to")
    first = packages[0]
    if first["registryType"] not in _STARTABLE:
        allowed = ", ".join(_STARTABLE)
        return (("packages", 0, "registryType"), f"{first['registryType']!r} cannot be started; use {allowed}")
    return (("packages", 0, "transport", "type"), "only stdio packages can be started by the gateway")


def _package(name: str, package: Mapping[str, Any], path: JsonPath, problems: list[Problem]) -> Registration:
    identifier: str = package["identifier"]
    version = package.get("version")
    arguments = _arguments(package.get("packageArguments", []), (*path, "packageArguments"), problems)
    env = _named_values(package.get("environmentVariables", []), (*path, "environmentVariables"), problems)
    kind = package["registryType"]
    entry: dict[str, Any]
    if kind == "oci":
        entry = _container(package, env, arguments, path, problems)
    else:
        runtime = _arguments(package.get("runtimeArguments", []), (*path, "runtimeArguments"), problems)
        if kind == "pypi":
            entry = {"command": "uvx", "args": [*runtime, f"{identifier}=={version}" if version else identifier]}
        else:
            entry = {"command": "npx", "args": ["-y", *runtime, f"{identifier}@{version}" if version else identifier]}
        entry["args"] += arguments
    if env:
        entry["env"] = env
    return Registration(name, entry)


def _container(
    package: Mapping[str, Any], env: Mapping[str, str], arguments: list[str], path: JsonPath, problems: list[Problem]
) -> dict[str, Any]:
    """The hardened `docker run` of an oci package (`gateway/config/dockerrun.py`); a runtime argument
    that is no environment variable, a variable the docker client reads, or an odd image is a problem."""
    settings = _settings(package.get("runtimeArguments", []), (*path, "runtimeArguments"), problems)
    for index, variable in enumerate(package.get("environmentVariables", [])):
        if text := variable_problem(variable["name"]):
            problems.append(((*path, "environmentVariables", index, "name"), text))
    image = _image(package["identifier"], package.get("version"))
    if text := image_problem(image):
        problems.append(((*path, "identifier"), text))
    # Names only: `docker run --env=NAME` passes the value from its own environment, off the command line.
    return {"command": "docker", "args": run_args(list(env), settings, image, arguments)}


def _settings(arguments: list[dict[str, Any]], path: JsonPath, problems: list[Problem]) -> list[str]:
    """An oci package's runtime arguments as the `NAME=value` of each `-e`; any other is a problem naming it."""
    settings: list[str] = []
    for index, argument in enumerate(arguments):
        where = (*path, index)
        value = _value(argument, where, problems)
        if argument["type"] == "named":
            flag = argument.get("name", "a named argument without a name")
        elif value is None:
            continue
        else:
            flag, value = value, None
        text = setting_problem(flag, value)
        if text:
            problems.append((where, text))
        elif value is not None:
            settings.append(value)
    return settings


def _image(identifier: str, version: str | None) -> str:
    """The image reference: the identifier, with `:<version>` unless it names a tag or digest already."""
    last = identifier.rsplit("/", 1)[-1]
    return identifier if ":" in last or "@" in last or not version else f"{identifier}:{version}"


def _remote(name: str, remote: Mapping[str, Any], path: JsonPath, problems: list[Problem]) -> Registration:
    url = _filled(remote["url"], remote.get("variables", {}), (*path, "url"), problems)
    entry: dict[str, Any] = {"url": url, "transport": _REMOTE_TRANSPORTS[remote["type"]]}
    headers = _named_values(remote.get("headers", []), (*path, "headers"), problems)
    if headers:
        entry["headers"] = headers
    return Registration(name, entry)


def _arguments(arguments: list[dict[str, Any]], path: JsonPath, problems: list[Problem]) -> list[str]:
    """Command-line words: a named argument as `name value` (or `name` alone), a positional as its value."""
    words: list[str] = []
    for index, argument in enumerate(arguments):
        where = (*path, index)
        value = _value(argument, where, problems)
        if argument["type"] == "named":
            if "name" not in argument:
                problems.append((where, "a named argument needs a name"))
                continue
            words += [argument["name"]] if value is None else [argument["name"], value]
        elif value is not None:
            words.append(value)
    return words


def _named_values(inputs: list[dict[str, Any]], path: JsonPath, problems: list[Problem]) -> dict[str, str]:
    """Environment variables or headers by name; the optional ones without a value are left out."""
    values: dict[str, str] = {}
    for index, item in enumerate(inputs):
        value = _value(item, (*path, index), problems, item["name"])
        if value is not None:
            values[item["name"]] = value
    return values


def _value(item: Mapping[str, Any], path: JsonPath, problems: list[Problem], label: str = "") -> str | None:
    """An input's value (else its default) with its `{variables}` filled; a problem when it is
    required and has none."""
    raw = item.get("value", item.get("default"))
    if raw is None:
        if item.get("isRequired"):
            what = f"{label} is required" if label else "this argument is required"
            problems.append(
                (
                    path,
                    f"{what} and has no value; set its value "
                    '("${secret:NAME}" names a secret offered to registrations)',
                )
            )
        return None
    return _filled(raw, item.get("variables", {}), (*path, "value"), problems)


def _filled(text: str, variables: Mapping[str, Any], path: JsonPath, problems: list[Problem]) -> str:
    """`text` with each `{name}` replaced by that variable's value or default."""

    def one(match: re.Match[str]) -> str:
        variable = variables.get(match.group(1))
        value = None if variable is None else variable.get("value", variable.get("default"))
        if value is None:
            problems.append((path, f"the variable {{{match.group(1)}}} has no value or default"))
            return match.group(0)
        return str(value)

    return _TEMPLATE.sub(one, text)
