"""The registration policy: what the admin API may register, and which registered servers are sandboxed."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from gateway.config.dockerrun import HARDENING
from gateway.config.loading import parse_config
from gateway.config.registration import RegistrationPolicy, glob_match
from gateway.errors import ConfigError, ForbiddenError
from gateway.problems import ConfigProblems


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


def url_allowed(policy: RegistrationPolicy, url: str) -> bool:
    """Whether `policy` lets a server be registered with `url`."""
    try:
        policy.judge_url("x", url)
    except ForbiddenError:
        return False
    return True


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
    assert url_allowed(POLICY, url)


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
    assert not url_allowed(POLICY, url)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://evil.test\\.example.com/mcp", "backslash"),
        ("https://a.example.com/m\tcp", "whitespace or a control character"),
        ("https://%61.example.com/mcp", "not letters, digits and hyphens"),
        ("https://a.example.com/mcp/../admin", ". or .. segment"),
        ("https://a.example.com/mcp/%2e%2e/admin", "percent-encoded"),
        ("https://a.example.com/mcp%2F..%2Fadmin", "percent-encoded"),
        ("https://a.example.com/caf\u00e9", "percent-encoded"),
    ],
)
def test_a_url_that_does_not_read_strictly_is_refused_with_the_reason(url: str, reason: str) -> None:
    assert not url_allowed(POLICY, url)
    with pytest.raises(ForbiddenError, match="refused") as refused:
        POLICY.admit("x", {"url": url})
    assert repr(url) in refused.value.message and reason in refused.value.message


@pytest.mark.parametrize(
    "url",
    [
        "http://127.1/mcp",
        "http://0x7f000001/mcp",
        "http://2130706433/mcp",
        "http://0177.0.0.1/mcp",
        "http://[::1%25lo]/",
    ],
)
def test_a_host_resolvers_could_read_as_an_address_is_refused(url: str) -> None:
    assert not url_allowed(RegistrationPolicy(allow_urls=("http://**:*/**", "http://127.0.0.1:*/**")), url)


@pytest.mark.parametrize(
    ("pattern", "url", "allowed"),
    [
        ("https://*.example.com/**", "https://a.b.example.com/mcp", False),
        ("https://**.example.com/**", "https://a.b.example.com/mcp", True),
        ("https://**.example.com/**", "https://example.com/mcp", False),
        ("https://mcp-*.example.com/mcp", "https://MCP-eu.Example.com/mcp", True),
        ("https://api.example.com/mcp", "https://api.example.com:443/mcp", True),
        ("https://api.example.com/mcp", "https://api.example.com:8443/mcp", False),
        ("https://api.example.com:*/mcp", "https://api.example.com:8443/mcp", True),
        ("https://api.example.com/mcp", "http://api.example.com/mcp", False),
        ("https://api.example.com/mcp", "https://api.example.com/mcp?key=1", True),
        ("https://api.example.com/*/mcp", "https://api.example.com/v1/v2/mcp", False),
        ("https://api.example.com", "https://api.example.com/", True),
        ("https://**/**", "https://10.0.0.1/mcp", False),
        ("http://[::1]:*/mcp", "http://[0:0::1]:9000/mcp", True),
    ],
)
def test_a_pattern_matches_the_host_label_by_label_and_the_scheme_port_and_path_as_written(
    pattern: str, url: str, allowed: bool
) -> None:
    assert url_allowed(RegistrationPolicy(allow_urls=(pattern,)), url) is allowed


@pytest.mark.parametrize(
    ("pattern", "address", "allowed"),
    [
        ("https://*.example.com/**", "93.184.215.14", True),
        ("https://*.example.com/**", "127.0.0.1", False),
        ("https://*.example.com/**", "169.254.169.254", False),
        ("https://*.example.com/**", "192.168.1.5", False),
        ("https://*.example.com/**", "fd12::1", False),
        ("https://*.example.com/**", "ff02::1", False),
        ("https://*.example.com/**", "0.0.0.0", False),
        ("https://*.example.com/**", "168.63.129.16", False),
        ("https://*.example.com/**", "64:ff9b::a9fe:a9fe", False),
        ("http://localhost:*/**", "127.0.0.1", True),
        ("http://localhost:*/**", "10.0.0.1", False),
    ],
)
def test_a_name_may_lead_to_an_internal_address_only_when_a_pattern_names_it(
    pattern: str, address: str, allowed: bool
) -> None:
    policy = RegistrationPolicy(allow_urls=(pattern,))
    host = "localhost" if "localhost" in pattern else "api.example.com"
    endpoint = policy.judge_url("x", f"{pattern.partition(':')[0]}://{host}/mcp")
    if allowed:
        policy.judge_address("x", endpoint, ipaddress.ip_address(address))
    else:
        with pytest.raises(ForbiddenError, match=f"resolves to {address}"):
            policy.judge_address("x", endpoint, ipaddress.ip_address(address))


def test_a_pattern_that_does_not_read_is_a_config_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"registration\.allow_urls\[1\]: '\*\*': it does not begin with http"):
        parse_config(
            {"gateway": {"data_dir": str(tmp_path)}, "registration": {"allow_urls": ["https://**/**", "**"]}},
            source="gateway.yaml",
            base_dir=tmp_path,
        )


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
