"""Every section is checked when the file is loaded: `roles`, `auth`, `confirmation`, one server entry."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config.loading import default_config_path, parse_config, parse_server
from gateway.config.model import ServerConfig
from gateway.config.secrets import secrets_of
from gateway.problems import ConfigProblems
from tests.support.harness import REPO

DOCS = REPO / "docs" / "configuration.md"
SHORT_KEY = "short"

BAD_ROLES = {"dev": {"allow": "*", "approve": "anyone"}}
ROLES_PROBLEMS = [
    "roles.dev.allow: expected a list, got a string",
    "roles.dev.approve: must be one of 'own', 'admins'; got 'anyone'",
]
BAD_AUTH = {"api_keys": [{"caller": "ci"}], "enabled": "yes"}
# In path order, like every section's problems.
AUTH_PROBLEMS = [
    "auth.api_keys[0]: missing required key 'role'",
    "auth.enabled: expected true or false, got a string",
]
BAD_AUTH_ROLE = {"api_keys": [{"caller": "ci", "role": "ghost", "key_sha256": "ab" * 32}]}
AUTH_ROLE_PROBLEMS = ["auth.api_keys[0].role: unknown role 'ghost'; configured roles: dev"]
BAD_CONFIRMATION = {"ttl_seconds": 0, "risk": "extreme"}
CONFIRMATION_PROBLEMS = [
    "confirmation.risk: must be one of 'low', 'medium', 'high'; got 'extreme'",
    "confirmation.ttl_seconds: must be greater than 0; got 0",
]


def check(tmp_path: Path, sections: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """`python -m gateway check` on a file holding `sections`, run as the operator runs it."""
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"gateway": {"data_dir": str(tmp_path / "data")}, **sections}))
    command = [sys.executable, "-m", "gateway", "check", "--config", str(path)]
    return subprocess.run(command, cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        ({"roles": BAD_ROLES}, ROLES_PROBLEMS),
        ({"auth": BAD_AUTH}, AUTH_PROBLEMS),
        ({"roles": {"dev": {"allow": ["*"]}}, "auth": BAD_AUTH_ROLE}, AUTH_ROLE_PROBLEMS),
        ({"confirmation": BAD_CONFIRMATION}, CONFIRMATION_PROBLEMS),
        (
            {"roles": BAD_ROLES, "auth": BAD_AUTH_ROLE, "confirmation": BAD_CONFIRMATION},
            ROLES_PROBLEMS + CONFIRMATION_PROBLEMS + AUTH_ROLE_PROBLEMS,
        ),
        (
            {"servers": {"s": {"command": "python3", "sandbox": {"memory": "1m", "tmpfs": "512k"}}}},
            ["servers.s.sandbox.memory: 1048576 must be at least 16 MiB"],
        ),
    ],
    ids=["roles", "auth", "auth-role", "confirmation", "all-three", "sandbox-limits"],
)
def test_check_reports_every_problem_of_the_access_sections_one_line_each_and_exits_2(
    tmp_path: Path, sections: dict[str, Any], expected: list[str]
) -> None:
    done = check(tmp_path, sections)
    path = tmp_path / "bad.yaml"
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert done.stderr.removeprefix("error: ").splitlines() == [f"{path}: {line}" for line in expected]


def test_a_plain_key_too_short_is_named_with_its_path_but_not_shown() -> None:
    data = {"auth": {"api_keys": [{"caller": "ci", "role": "dev", "key": SHORT_KEY}]}}
    with pytest.raises(ConfigProblems) as raised:
        parse_config(data, source="g.yaml", base_dir=Path("/etc/gw"), environ={})
    assert [path for path, _ in raised.value.problems] == ["auth.api_keys[0].key"]
    assert SHORT_KEY not in raised.value.message


def test_problems_of_servers_and_of_the_access_sections_are_reported_together() -> None:
    data = {"servers": {"s": {"comand": "x"}}, "roles": BAD_ROLES, "confirmation": BAD_CONFIRMATION}
    with pytest.raises(ConfigProblems) as raised:
        parse_config(data, source="g.yaml", base_dir=Path("/etc/gw"), environ={})
    paths = [path for path, _ in raised.value.problems]
    assert paths[:3] == ["servers.s.comand", "roles.dev.allow", "roles.dev.approve"]
    assert paths[3:] == ["confirmation.risk", "confirmation.ttl_seconds"]


def test_the_access_sections_are_typed_parts_of_the_config() -> None:
    data = {
        "roles": {"ops": {"allow": ["*"], "admin": True}, "dev": {"allow": ["*"], "approve": "own"}},
        "auth": {"api_keys": [{"caller": "ci", "role": "dev", "key_sha256": "ab" * 32}]},
        "confirmation": {"risk": "medium", "ttl_seconds": 60},
    }
    config = parse_config(data, source="g.yaml", base_dir=Path("/etc/gw"), environ={})
    assert config.policy.is_admin("ops") and config.policy.approves_own("dev")
    assert config.auth.enabled and config.auth.known_roles == frozenset({"ops", "dev"})
    assert (config.confirmation.risk.value, config.confirmation.ttl_seconds) == ("medium", 60.0)


@pytest.mark.parametrize(
    ("sandbox", "expected"),
    [
        (
            {"pids": 2},
            "servers.s.tools.run.sandbox.pids: 2 must be at least 4 (the init, timeout, server and one child)",
        ),
        ({"deadline": 7200}, "servers.s.tools.run.sandbox.deadline: 3600.0 must be at least the deadline"),
    ],
)
def test_sandbox_limits_the_container_would_refuse_are_refused_at_load(sandbox: dict[str, Any], expected: str) -> None:
    data = {"servers": {"s": {"command": "x", "tools": {"run": {"sandbox": sandbox}}}}}
    with pytest.raises(ConfigProblems) as raised:
        parse_config(data, source="g.yaml", base_dir=Path("/"), environ={})
    assert raised.value.message == f"g.yaml: {expected}"


def test_a_misspelt_top_level_key_gets_a_hint() -> None:
    with pytest.raises(ConfigProblems) as raised:
        parse_config({"mcpServer": {}}, source="g.yaml", base_dir=Path("/"), environ={})
    assert raised.value.message == "g.yaml: mcpServer: unknown key (did you mean 'mcpServers'?)"
    with pytest.raises(ConfigProblems) as raised:
        parse_config({"confirmations": {}}, source="g.yaml", base_dir=Path("/"), environ={})
    assert raised.value.message == "g.yaml: confirmations: unknown key (did you mean 'confirmation'?)"


def parse(name: str, entry: Any, secrets: dict[str, str] | None = None) -> ServerConfig:
    """One server entry, as live registration would check it."""
    return parse_server(name, entry, source="api", base_dir=Path("/etc/gw"), secrets=secrets or {})


def test_parse_server_builds_the_same_server_as_a_whole_file() -> None:
    entry = {"command": "python", "args": ["db", "${secret:token}"], "env": {"K": "$${secret:x}"}, "cwd": "w"}
    whole = parse_config(
        {
            "gateway": {"data_dir": "/var/gw"},
            "servers": {"db": entry},
            "secrets": {"token": {"value": "${TOKEN}", "registrations": True}},
        },
        source="g.yaml",
        base_dir=Path("/etc/gw"),
        environ={"TOKEN": "t0k"},
    )
    assert parse("db", entry, {"token": "t0k"}) == whole.servers[0]
    assert whole.servers[0].args == ("db", "t0k") and whole.servers[0].cwd == "/etc/gw/w"
    assert whole.servers[0].env == {"K": "${secret:x}"}


@pytest.mark.parametrize(
    ("name", "entry", "expected"),
    [
        ("db", {"comand": "x"}, ["servers.db.comand: unknown key (did you mean 'command'?)"]),
        ("db", {"command": "x", "timeout": -1}, ["servers.db.timeout: must be greater than 0; got -1"]),
        (
            "db",
            {"command": "x", "url": "http://h/mcp"},
            ["servers.db: has both command and url; a server is either a process (command) or an endpoint (url)"],
        ),
        (
            "db",
            {"command": "x", "args": ["${HOME:-x}"]},
            [
                "servers.db.args[0]: ${HOME:-x}: a server registered through the API cannot read the gateway's "
                "environment; name a secret the operator offers to registrations instead: ${secret:NAME}"
            ],
        ),
        (
            "db",
            {"command": "x", "args": ["${WORKSPACE}"]},
            ["servers.db.scope: ${WORKSPACE} is only known per session: set scope: session"],
        ),
        ("db", ["x"], ["servers.db: expected a map, got a list"]),
        (
            "no good",
            {"command": "x"},
            [
                "servers[\"no good\"]: server name 'no good' is not allowed: names and "
                "namespaces are 1-32 letters, digits, '_' or '-', because they prefix "
                "tool names"
            ],
        ),
    ],
)
def test_parse_server_names_each_problem_with_its_path(name: str, entry: Any, expected: list[str]) -> None:
    with pytest.raises(ConfigProblems) as raised:
        parse(name, entry)
    assert raised.value.message.splitlines() == [f"api: {line}" for line in expected]


def test_the_example_in_the_configuration_docs_is_a_valid_file() -> None:
    text = DOCS.read_text("utf-8").split("## The gateway's format", 1)[1]
    example = yaml.safe_load(text.split("```yaml\n", 1)[1].split("```", 1)[0])
    config = parse_config(example, source=str(DOCS), base_dir=Path("/etc/gw"), environ={"SEARCH_TOKEN": "t"})
    assert [server.name for server in config.servers] == ["files", "search"]
    schema = json.loads(default_config_path().with_name("config_schema.json").read_text("utf-8"))
    # `extends` has an example of its own: this one stands alone.
    assert set(example) == set(schema["$defs"]["gatewayFile"]["properties"]) - {"extends"}


def test_the_configuration_docs_list_every_gateway_setting_the_schema_knows() -> None:
    text = DOCS.read_text("utf-8").split("### `gateway`", 1)[1].split("###", 1)[0]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", text, re.MULTILINE))
    schema = json.loads(default_config_path().with_name("config_schema.json").read_text("utf-8"))
    assert documented == set(schema["$defs"]["settings"]["properties"])


def test_a_file_server_may_name_any_secret_read_from_the_environment_or_a_file(tmp_path: Path) -> None:
    (tmp_path / "search.key").write_text("from-a-file-0123456789\n")
    document = {
        "servers": {
            "search": {
                "url": "https://search.example/mcp",
                "headers": {"Authorization": "Bearer ${secret:search}", "X-Other": "${secret:token}"},
            }
        },
        "secrets": {"search": {"file": "search.key"}, "token": {"value": "${TOKEN}", "registrations": True}},
    }
    config = parse_config(document, source="g.yaml", base_dir=tmp_path, environ={"TOKEN": "from-the-env-0123"})
    assert config.servers[0].headers == {
        "Authorization": "Bearer from-a-file-0123456789",
        "X-Other": "from-the-env-0123",
    }
    assert config.secrets.for_registrations() == {"token": "from-the-env-0123"}
    assert {"from-a-file-0123456789", "from-the-env-0123"} <= set(secrets_of(config))


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (
            {"servers": {"s": {"url": "https://${secret:token}.example/mcp"}}},
            "g.yaml: servers.s.url: ${secret:token} may be used only in a server's headers, env or args",
        ),
        (
            {"servers": {"s": {"command": "x", "env": {"K": "${secret:nothing}"}}}},
            "g.yaml: servers.s.env.K: no secret named 'nothing' in the `secrets` section",
        ),
        (
            {"secrets": {"a": {"value": "${secret:token}"}}},
            "g.yaml: secrets.a.value: ${secret:token} may be used only in a server's headers, env or args",
        ),
        ({"secrets": {"a": {"registrations": True}}}, "g.yaml: secrets.a: needs either value or file"),
        ({"secrets": {"a": {"file": "missing"}}}, "g.yaml: secrets.a.file: cannot read"),
    ],
)
def test_a_secret_named_where_it_cannot_be_used_or_not_defined_is_a_problem_naming_its_path(
    document: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ConfigProblems) as raised:
        parse_config({"secrets": {"token": {"value": "v"}}, **document}, source="g.yaml", base_dir=Path("/nowhere"))
    assert raised.value.message.startswith(expected)


def test_a_store_key_that_is_no_key_is_a_problem_that_never_quotes_it() -> None:
    with pytest.raises(ConfigProblems) as raised:
        parse_config({"store": {"key": "not-a-key-but-secret"}}, source="g.yaml", base_dir=Path("/"), environ={})
    assert raised.value.message.startswith("g.yaml: store.key: must be 32 random bytes in URL-safe base64")
    assert "not-a-key-but-secret" not in raised.value.message
