"""The registration policy: what the admin API may register, and which registered servers are sandboxed."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config.dockerrun import HARDENING
from gateway.config.loading import parse_config
from gateway.config.registration import RegistrationPolicy, glob_match
from gateway.config.schema import ConfigProblems
from gateway.errors import ConfigError, ForbiddenError

POLICY = RegistrationPolicy(
    allow_commands=("uvx", "npx", "/opt/mcp/*"),
    allow_urls=("https://*.example.com/**", "http://127.0.0.1:*/mcp"),
)


def test_nothing_may_be_registered_by_default() -> None:
    policy = RegistrationPolicy()
    with pytest.raises(ForbiddenError, match="allow_commands"):
        policy.admit("x", {"command": "uvx"})
    with pytest.raises(ForbiddenError, match="allow_urls"):
        policy.admit("x", {"url": "https://a.example.com/mcp"})


@pytest.mark.parametrize("command", ["uvx", "/usr/bin/uvx", "npx", "/opt/mcp/server", "/opt/mcp/./server"])
def test_a_command_glob_matches_the_executable_s_path_or_its_name(command: str) -> None:
    assert POLICY.command_allowed(command)


@pytest.mark.parametrize(
    "command", ["python", "/opt/mcp/sub/server", "/opt/mcp/../../bin/sh", "/opt/mcpx/server", "uvx-evil"]
)
def test_a_command_no_glob_matches_is_refused(command: str) -> None:
    assert not POLICY.command_allowed(command)
    with pytest.raises(ForbiddenError, match="is not allowed"):
        POLICY.admit("x", {"command": command})


def test_a_command_made_of_variables_is_refused_whatever_it_would_expand_to() -> None:
    with pytest.raises(ForbiddenError):
        RegistrationPolicy(allow_commands=("**",)).admit("x", {"command": "${TOOL}"})


@pytest.mark.parametrize(
    "url", ["https://api.example.com/mcp", "https://a.example.com/v1/mcp", "http://127.0.0.1:9000/mcp"]
)
def test_a_url_glob_matches_the_whole_url(url: str) -> None:
    assert POLICY.url_allowed(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.test/?.example.com/mcp",
        "https://evil.test#.example.com/mcp",
        "https://user@evil.test/.example.com/",
        "http://example.com/mcp",
        "https://api.example.com.evil.test/mcp",
        "http://127.0.0.1:9000/other",
    ],
)
def test_a_url_that_only_looks_allowed_is_refused(url: str) -> None:
    assert not POLICY.url_allowed(url)


def test_glob_stars_stay_inside_one_part_and_double_stars_cross() -> None:
    assert glob_match("a/b/c", "a/**")
    assert not glob_match("a/b/c", "a/*")
    assert glob_match("abc", "a?c")


def test_stdio_servers_registered_through_the_api_are_sandboxed_by_default() -> None:
    assert POLICY.admit("x", {"command": "uvx", "args": ["tool"]}) == {
        "command": "uvx",
        "args": ["tool"],
        "sandbox": "docker",
    }
    own = {"command": "uvx", "sandbox": {"mode": "per-session"}}
    assert POLICY.admit("x", own) == own
    assert POLICY.admit("x", {"url": "https://a.example.com/mcp"}) == {"url": "https://a.example.com/mcp"}


def test_a_hardened_docker_run_or_a_policy_without_sandboxing_is_not_sandboxed_again() -> None:
    run = ["run", *HARDENING, "ghcr.io/example/weather:1"]
    assert "sandbox" not in RegistrationPolicy(allow_commands=("docker",)).admit(
        "x", {"command": "docker", "args": run}
    )
    host = RegistrationPolicy(allow_commands=("uvx",), sandbox_stdio=False)
    assert "sandbox" not in host.admit("x", {"command": "uvx"})


@pytest.mark.parametrize("sandbox_stdio", [True, False])
def test_a_docker_command_that_is_not_the_hardened_run_is_refused_naming_the_argument(sandbox_stdio: bool) -> None:
    allowed = RegistrationPolicy(allow_commands=("docker",), sandbox_stdio=sandbox_stdio)
    entry = {"command": "docker", "args": ["run", "--privileged", "-v", "/:/host", *HARDENING, "busybox"]}
    with pytest.raises(ConfigProblems) as refused:
        allowed.admit("x", entry)
    [(path, text)] = refused.value.problems
    assert path == "servers.x.args[1]" and text.startswith("'--privileged' is not allowed")


def test_the_registration_section_is_read_from_the_config_file(tmp_path: Path) -> None:
    section = {"allow_commands": ["uvx"], "allow_urls": ["https://**"], "sandbox_stdio": False}
    config = parse_config(
        {"gateway": {"data_dir": str(tmp_path)}, "registration": section}, source="gateway.yaml", base_dir=tmp_path
    )
    assert config.registration == RegistrationPolicy(("uvx",), ("https://**",), sandbox_stdio=False)


def test_a_bad_registration_section_names_its_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"registration\.sandbox_stdio"):
        parse_config(
            {"gateway": {"data_dir": str(tmp_path)}, "registration": {"sandbox_stdio": "yes"}},
            source="gateway.yaml",
            base_dir=tmp_path,
        )
