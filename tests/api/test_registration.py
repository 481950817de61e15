"""The registration policy: what the admin API may register, and which registered servers are sandboxed."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config.dockerrun import HARDENING
from gateway.config.loading import parse_config
from gateway.config.registration import RegistrationPolicy, glob_match
from gateway.config.schema import ConfigProblems
from gateway.errors import ConfigError, ForbiddenError


def program(path: Path) -> Path:
    """An executable file at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def programs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`bin/` with `uvx`, `npx` and `docker` as the gateway's whole PATH, and `evil/uvx` beside it."""
    for name in ("bin/uvx", "bin/npx", "bin/docker", "evil/uvx"):
        program(tmp_path / name)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return tmp_path


def policy() -> RegistrationPolicy:
    """Program names pinned on the PATH of now, and a path glob."""
    return RegistrationPolicy(allow_commands=("uvx", "npx", "/opt/mcp/*"), allow_urls=POLICY.allow_urls)


POLICY = RegistrationPolicy(allow_urls=("https://*.example.com/**", "http://127.0.0.1:*/mcp"))


def test_nothing_may_be_registered_by_default(programs: Path) -> None:
    policy = RegistrationPolicy()
    with pytest.raises(ForbiddenError, match="allow_commands"):
        policy.admit("x", {"command": "uvx"})
    with pytest.raises(ForbiddenError, match="allow_urls"):
        policy.admit("x", {"url": "https://a.example.com/mcp"})


def test_a_program_name_allows_the_path_it_was_found_at_and_the_entry_runs_that_path(programs: Path) -> None:
    uvx = str(programs / "bin" / "uvx")
    host = RegistrationPolicy(allow_commands=("uvx",), sandbox_stdio=False)
    assert host.allowed_path("uvx") == host.allowed_path(uvx) == uvx
    assert host.admit("x", {"command": "uvx", "args": ["tool"]}) == {"command": uvx, "args": ["tool"]}


def test_a_program_of_an_allowed_name_elsewhere_is_refused_naming_it(programs: Path) -> None:
    evil = str(programs / "evil" / "uvx")
    with pytest.raises(ForbiddenError, match=f"'{evil}' is not allowed"):
        policy().admit("x", {"command": evil})


def test_a_path_changed_after_the_policy_was_made_cannot_swap_a_pinned_program(
    programs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pinned = policy()
    monkeypatch.setenv("PATH", f"{programs / 'evil'}:{programs / 'bin'}")
    with pytest.raises(ForbiddenError, match=f"'uvx' \\(found at {programs / 'evil' / 'uvx'}\\) is not allowed"):
        pinned.admit("x", {"command": "uvx"})


@pytest.mark.parametrize("command", ["/opt/mcp/server", "/opt/mcp/./server", "/opt/mcp/sub/../server"])
def test_a_path_glob_matches_the_normalised_absolute_path(programs: Path, command: str) -> None:
    assert policy().allowed_path(command) == "/opt/mcp/server"


@pytest.mark.parametrize(
    "command",
    ["python", "/opt/mcp/sub/server", "/opt/mcp/../../bin/sh", "/opt/mcpx/server", "uvx-evil", "./uvx", "bin/uvx"],
)
def test_a_command_no_entry_allows_is_refused(programs: Path, command: str) -> None:
    assert policy().allowed_path(command) is None
    with pytest.raises(ForbiddenError, match="is not allowed"):
        policy().admit("x", {"command": command})


def test_a_program_name_not_on_the_path_allows_nothing(programs: Path) -> None:
    missing = RegistrationPolicy(allow_commands=("missing",))
    assert missing.pinned == frozenset()
    with pytest.raises(ForbiddenError, match="not on the gateway's PATH"):
        missing.admit("x", {"command": "missing"})


def test_a_command_made_of_variables_is_refused_whatever_it_would_expand_to() -> None:
    with pytest.raises(ForbiddenError):
        RegistrationPolicy(allow_commands=("/**",)).admit("x", {"command": "${TOOL}"})


@pytest.mark.parametrize("entry", ["**", "uv*", "bin/uvx", "u?x"])
def test_an_allow_commands_entry_that_is_neither_a_program_name_nor_an_absolute_glob_is_a_config_error(
    tmp_path: Path, entry: str
) -> None:
    with pytest.raises(ConfigError, match=r"registration\.allow_commands\[0\]"):
        parse_config(
            {"gateway": {"data_dir": str(tmp_path)}, "registration": {"allow_commands": [entry]}},
            source="gateway.yaml",
            base_dir=tmp_path,
        )


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


def test_stdio_servers_registered_through_the_api_are_sandboxed_by_default(programs: Path) -> None:
    assert policy().admit("x", {"command": "uvx", "args": ["tool"]}) == {
        "command": "uvx",
        "args": ["tool"],
        "sandbox": "docker",
    }
    own = {"command": "uvx", "sandbox": {"mode": "per-session"}}
    assert policy().admit("x", own) == own
    assert policy().admit("x", {"url": "https://a.example.com/mcp"}) == {"url": "https://a.example.com/mcp"}


def test_a_hardened_docker_run_is_not_sandboxed_again_and_runs_the_pinned_docker(programs: Path) -> None:
    run = ["run", *HARDENING, "ghcr.io/example/weather:1"]
    admitted = RegistrationPolicy(allow_commands=("docker",)).admit("x", {"command": "docker", "args": run})
    assert admitted == {"command": str(programs / "bin" / "docker"), "args": run}
    host = RegistrationPolicy(allow_commands=("uvx",), sandbox_stdio=False)
    assert "sandbox" not in host.admit("x", {"command": "uvx"})


@pytest.mark.parametrize("sandbox_stdio", [True, False])
def test_a_docker_command_that_is_not_the_hardened_run_is_refused_naming_the_argument(
    programs: Path, sandbox_stdio: bool
) -> None:
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
