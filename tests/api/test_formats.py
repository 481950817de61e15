"""The three bodies of `POST /api/v1/servers`, each turned into the right entries of the gateway's form."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gateway.api.formats import Registration, registrations
from gateway.config.dockerrun import HARDENING, run_problems
from gateway.problems import ConfigProblems

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


def test_an_oci_package_runs_in_a_hardened_container_with_its_environment_passed_by_name() -> None:
    body = with_package(registryType="oci", identifier="ghcr.io/example/weather", runtimeArguments=[])
    [registration] = registrations(body)
    args = registration.entry["args"]
    assert registration.entry["command"] == "docker"
    assert args == [
        "run",
        "--env=WEATHER_KEY",
        "--env=WEATHER_LANG",
        *HARDENING,
        "ghcr.io/example/weather:1.2.0",
        "serve",
        "--units",
        "metric",
        "--region",
        "eu",
    ]
    assert "--network=none" in args and "--read-only" in args and "--cap-drop=ALL" in args
    assert registration.entry["env"] == {"WEATHER_KEY": "${WEATHER_KEY}", "WEATHER_LANG": "en"}
    assert run_problems(args, registration.entry["env"]) == []


def test_an_oci_identifier_with_a_tag_keeps_it() -> None:
    body = with_package(registryType="oci", identifier="docker.io/example/weather:2", runtimeArguments=[])
    [registration] = registrations(body)
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


def oci(**changes: Any) -> dict[str, Any]:
    """The fixture as an oci package of `mcp-gateway-sandbox`, without runtime arguments unless given."""
    return with_package(
        **{"registryType": "oci", "identifier": "mcp-gateway-sandbox", "runtimeArguments": [], **changes}
    )


def named(name: str, value: str | None = None) -> dict[str, Any]:
    """A named runtime argument."""
    return {"type": "named", "name": name} | ({} if value is None else {"value": value})


# The payload that wrote a root-owned file on the host before runtime arguments were checked.
HOSTILE = [named("--user", "0:0"), named("-v", "/host/dir:/host"), named("--entrypoint", "sh")]


def test_an_oci_package_s_runtime_arguments_that_undo_the_hardening_are_each_a_problem_naming_it() -> None:
    problems = problems_of(oci(runtimeArguments=HOSTILE))
    assert list(problems) == [f"packages[0].runtimeArguments[{index}]" for index in range(3)]
    for index, flag in enumerate(["--user", "-v", "--entrypoint"]):
        assert problems[f"packages[0].runtimeArguments[{index}]"].startswith(f"{flag!r} is not allowed")


ISOLATION = [
    named("--user", "0"),
    named("-u", "root"),
    named("--user=0:0"),
    named("--privileged"),
    named("--cap-add", "ALL"),
    named("--security-opt", "seccomp=unconfined"),
    named("--security-opt", "apparmor=unconfined"),
    named("--read-only=false"),
    named("--network", "host"),
    named("--net=host"),
    named("-v", "/:/host"),
    named("--volume", "/:/host"),
    named("--mount", "type=bind,src=/,dst=/host"),
    named("--volumes-from", "other"),
    named("--tmpfs", "/run"),
    named("--entrypoint", "sh"),
    named("--device", "/dev/sda"),
    named("--pid", "host"),
    named("--ipc", "host"),
    named("--uts", "host"),
    named("--userns", "host"),
    named("--cgroupns", "host"),
    named("--group-add", "0"),
    named("--env-file", "/etc/shadow"),
    named("--runtime", "runc"),
    named("--label", "io.mcp-gateway.sandbox=1"),
    named("-e"),
    named("-e", "--privileged"),
    named("--env", "=x"),
    {"type": "positional", "value": "--privileged"},
    {"type": "positional", "value": "-e"},
]


@pytest.mark.parametrize("argument", ISOLATION, ids=[str(list(argument.values())[1:]) for argument in ISOLATION])
def test_an_oci_runtime_argument_other_than_an_environment_variable_is_refused(argument: dict[str, Any]) -> None:
    problems = problems_of(oci(runtimeArguments=[named("-e", "FINE=1"), argument]))
    assert list(problems) == ["packages[0].runtimeArguments[1]"]


def test_an_oci_package_s_environment_variables_stand_before_the_hardening_and_its_arguments_after_the_image() -> None:
    runtime = [
        named("-e", "MODE={mode}") | {"variables": {"mode": {"default": "x --privileged"}}},
        named("--env", "B="),
    ]
    [registration] = registrations(oci(runtimeArguments=runtime))
    args = registration.entry["args"]
    image = args.index("mcp-gateway-sandbox:1.2.0")
    assert args[:3] == ["run", "--env=WEATHER_KEY", "--env=WEATHER_LANG"]
    assert args[3:image] == ["--env=MODE=x --privileged", "--env=B=", *HARDENING]
    assert args[image + 1 :] == ["serve", "--units", "metric", "--region", "eu"]


@pytest.mark.parametrize("name", ["DOCKER_HOST", "DOCKER_CONFIG", "LD_PRELOAD", "PATH", "HOME", "https_proxy", "A B"])
def test_an_oci_environment_variable_the_docker_client_would_read_on_the_host_is_refused(name: str) -> None:
    problems = problems_of(oci(environmentVariables=[{"name": "FINE", "value": "1"}, {"name": name, "value": "x"}]))
    assert list(problems) == ["packages[0].environmentVariables[1].name"]
    assert name in problems["packages[0].environmentVariables[1].name"]


@pytest.mark.parametrize(
    ("identifier", "version"),
    [
        ("--privileged", "1"),
        ("-v", "1"),
        ("example/weather --privileged", "1"),
        ("Example/Weather", "1"),
        ("example/weather", "1 --privileged"),
        ("example/weather", "-x"),
        ("example//weather", "1"),
    ],
)
def test_an_oci_identifier_that_is_no_image_reference_is_refused(identifier: str, version: str) -> None:
    problems = problems_of(oci(identifier=identifier, version=version))
    assert list(problems) == ["packages[0].identifier"]
    assert "is not an image reference" in problems["packages[0].identifier"]


@pytest.mark.parametrize(
    "identifier",
    ["weather", "ghcr.io/example/weather", "localhost:5000/a/b_c", "example/weather@sha256:" + "a" * 64],
)
def test_an_oci_identifier_that_is_an_image_reference_is_run(identifier: str) -> None:
    [registration] = registrations(oci(identifier=identifier))
    assert run_problems(registration.entry["args"], registration.entry["env"]) == []
