"""The three bodies of `POST /api/v1/servers`, each turned into the right entries of the gateway's form."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gateway.api.formats import CONTAINER_FLAGS, Registration, registrations
from gateway.config.schema import ConfigProblems

# A registry server.json as the spec (docs/reference/server-json) describes one, written for these tests.
SERVER_JSON: dict[str, Any] = {
    "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
    "name": "io.github.example/weather",
    "title": "Weather",
    "description": "Forecasts",
    "version": "1.2.0",
    "packages": [
        {
            "registryType": "pypi",
            "identifier": "weather-mcp",
            "version": "1.2.0",
            "transport": {"type": "stdio"},
            "runtimeArguments": [{"type": "named", "name": "--python", "value": "3.12"}],
            "packageArguments": [
                {"type": "positional", "value": "serve"},
                {"type": "named", "name": "--units", "default": "metric"},
                {"type": "named", "name": "--region", "value": "{region}", "variables": {"region": {"default": "eu"}}},
                {"type": "positional", "valueHint": "extra"},
            ],
            "environmentVariables": [
                {"name": "WEATHER_KEY", "isRequired": True, "isSecret": True, "value": "${WEATHER_KEY}"},
                {"name": "WEATHER_DEBUG", "description": "optional, no value"},
                {"name": "WEATHER_LANG", "default": "en"},
            ],
        }
    ],
    "remotes": [{"type": "streamable-http", "url": "https://weather.example.com/mcp"}],
}


def with_package(**changes: Any) -> dict[str, Any]:
    """The fixture with its package changed."""
    document = copy.deepcopy(SERVER_JSON)
    document["packages"][0].update(changes)
    return document


def problems_of(body: dict[str, Any]) -> dict[str, str]:
    """The problems the body is refused with, by path."""
    with pytest.raises(ConfigProblems) as refused:
        registrations(body)
    return dict(refused.value.problems)


def test_the_gateway_s_own_entry_keeps_its_keys_without_the_name() -> None:
    body = {"name": "notes", "command": "python", "args": ["-m", "notes"], "tags": ["x"]}
    assert registrations(body) == [Registration("notes", {"command": "python", "args": ["-m", "notes"], "tags": ["x"]})]


def test_an_own_entry_s_problems_name_their_path_under_servers() -> None:
    assert problems_of({"name": "x", "url": 5}) == {"servers.x.url": "expected a string, got the number 5"}
    assert "name" in problems_of({"command": "python"})
    assert "name" in problems_of({"name": "bad name!", "command": "python"})


def test_an_mcp_servers_fragment_gives_every_server_in_the_gateway_s_form() -> None:
    body = {
        "mcpServers": {
            "files": {"command": "npx", "args": ["-y", "files"], "env": {"ROOT": "/tmp"}},
            "remote": {"type": "streamable-http", "url": "https://example.com/mcp"},
            "odd name": {"command": "uvx", "disabled": True},
        }
    }
    assert registrations(body) == [
        Registration("files", {"command": "npx", "args": ["-y", "files"], "env": {"ROOT": "/tmp"}}),
        Registration("remote", {"url": "https://example.com/mcp", "transport": "http"}),
        Registration("odd_name", {"command": "uvx", "enabled": False}),
    ]


def test_an_mcp_servers_fragment_s_problems_name_their_path() -> None:
    assert "mcpServers.x.url" in problems_of({"mcpServers": {"x": {"url": 7}}})
    assert "mcpServers" in problems_of({"mcpServers": {}})


def test_a_pypi_package_runs_with_uvx_at_its_version_with_its_arguments_and_environment() -> None:
    [registration] = registrations(SERVER_JSON)
    assert registration == Registration(
        "weather",
        {
            "command": "uvx",
            "args": ["--python", "3.12", "weather-mcp==1.2.0", "serve", "--units", "metric", "--region", "eu"],
            "env": {"WEATHER_KEY": "${WEATHER_KEY}", "WEATHER_LANG": "en"},
        },
    )


def test_an_npm_package_runs_with_npx() -> None:
    body = with_package(registryType="npm", identifier="@example/weather", runtimeArguments=[], packageArguments=[])
    [registration] = registrations(body)
    assert registration.entry["command"] == "npx"
    assert registration.entry["args"] == ["-y", "@example/weather@1.2.0"]
    assert not registration.container


def test_an_oci_package_runs_in_a_hardened_container_with_its_environment_passed_by_name() -> None:
    body = with_package(registryType="oci", identifier="ghcr.io/example/weather", runtimeArguments=[])
    [registration] = registrations(body)
    args = registration.entry["args"]
    assert registration.container and registration.entry["command"] == "docker"
    assert args[: 1 + len(CONTAINER_FLAGS)] == ["run", *CONTAINER_FLAGS]
    assert "--network=none" in args and "--read-only" in args and "--cap-drop=ALL" in args
    assert args[args.index("ghcr.io/example/weather:1.2.0") + 1 :] == ["serve", "--units", "metric", "--region", "eu"]
    assert {"--env=WEATHER_KEY", "--env=WEATHER_LANG"} <= set(args)
    assert registration.entry["env"] == {"WEATHER_KEY": "${WEATHER_KEY}", "WEATHER_LANG": "en"}


def test_an_oci_identifier_with_a_tag_keeps_it() -> None:
    [registration] = registrations(with_package(registryType="oci", identifier="docker.io/example/weather:2"))
    assert "docker.io/example/weather:2" in registration.entry["args"]


def test_a_required_environment_variable_without_a_value_is_named_in_the_problem() -> None:
    variables = [{"name": "WEATHER_KEY", "isRequired": True}, {"name": "OTHER", "isRequired": True, "default": "x"}]
    problems = problems_of(with_package(environmentVariables=variables))
    assert list(problems) == ["packages[0].environmentVariables[0]"]
    assert "WEATHER_KEY is required" in problems["packages[0].environmentVariables[0]"]


def test_a_server_json_without_a_startable_package_uses_its_first_remote() -> None:
    [registration] = registrations(with_package(registryType="nuget"))
    assert registration == Registration("weather", {"url": "https://weather.example.com/mcp", "transport": "http"})


def test_a_remote_s_url_variables_and_headers_are_filled() -> None:
    body = {
        "name": "io.example/api",
        "remotes": [
            {
                "type": "sse",
                "url": "https://{tenant}.example.com/sse",
                "variables": {"tenant": {"default": "acme"}},
                "headers": [{"name": "Authorization", "value": "Bearer ${API_TOKEN}"}, {"name": "X-Opt"}],
            }
        ],
    }
    assert registrations(body) == [
        Registration(
            "api",
            {
                "url": "https://acme.example.com/sse",
                "transport": "sse",
                "headers": {"Authorization": "Bearer ${API_TOKEN}"},
            },
        )
    ]


def test_an_unstartable_registry_type_without_remotes_names_the_registry_type() -> None:
    body = with_package(registryType="nuget")
    del body["remotes"]
    problems = problems_of(body)
    assert "packages[0].registryType" in problems and "nuget" in problems["packages[0].registryType"]


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"registryType": 5}, "packages[0].registryType"),
        ({"identifier": ""}, "packages[0].identifier"),
        ({"transport": {"type": "carrier-pigeon"}}, "packages[0].transport.type"),
        ({"packageArguments": [{"type": "named", "value": "x"}]}, "packages[0].packageArguments[0]"),
        ({"environmentVariables": [{"value": "x"}]}, "packages[0].environmentVariables[0]"),
        ({"runtimeArguments": "--flag"}, "packages[0].runtimeArguments"),
    ],
)
def test_a_malformed_server_json_names_the_path_of_its_problem(change: dict[str, Any], path: str) -> None:
    assert path in problems_of(with_package(**change))


def test_a_variable_without_a_value_is_a_problem() -> None:
    arguments = [{"type": "positional", "value": "{missing}"}]
    assert "packages[0].packageArguments[0].value" in problems_of(with_package(packageArguments=arguments))
