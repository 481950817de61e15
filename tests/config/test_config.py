"""Tests for reading, validating and resolving configuration files."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gateway.auth.authenticator import Authenticator
from gateway.auth.settings import AuthSettings
from gateway.catalog.tools import Risk
from gateway.config.loading import default_config_path, load_config, parse_config
from gateway.config.model import (
    GatewaySettings,
    LocalToolConfig,
    OAuthSettings,
    SandboxSettings,
    ServerConfig,
    ToolSettings,
)
from gateway.config.reader import MAX_CONFIG_BYTES
from gateway.errors import ConfigError
from gateway.pipeline.confirmation import ConfirmationSettings
from gateway.problems import ConfigProblems

ENV = {"HOME": "/home/tester", "API_TOKEN": "s3cret", "OPS_KEY": "ops-key-0123456789abcdef0123456789"}


def write(tmp_path: Path, name: str, content: str | dict[str, Any]) -> Path:
    """A config file in tmp_path; dicts are written as JSON."""
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), "utf-8")
    return path


def error_for(path: Path, environ: dict[str, str] | None = None) -> ConfigError:
    """The ConfigError that loading `path` raises."""
    with pytest.raises(ConfigError) as caught:
        load_config(path, ENV if environ is None else environ)
    return caught.value


NATIVE = """
servers:
  fs:
    command: npx
    args: [-y, server-filesystem, /srv]
    env: {TOKEN: "${API_TOKEN}"}
  web:
    url: https://example.com/mcp
    headers: {Authorization: "Bearer ${API_TOKEN}"}
  events:
    url: https://example.com/sse
"""

CLIENT_SERVERS = {
    "fs": {"command": "npx", "args": ["-y", "server-filesystem", "/srv"], "env": {"TOKEN": "${API_TOKEN}"}},
    "web": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${API_TOKEN}"}},
    "events": {"url": "https://example.com/sse"},
}

VSCODE_SERVERS = {
    "fs": {
        "type": "stdio",
        "command": "npx",
        "args": ["-y", "server-filesystem", "/srv"],
        "env": {"TOKEN": "${API_TOKEN}"},
    },
    "web": {"type": "http", "url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${API_TOKEN}"}},
    "events": {"type": "sse", "url": "https://example.com/sse"},
}

EXPECTED_SERVERS = (
    ServerConfig(
        name="fs", transport="stdio", command="npx", args=("-y", "server-filesystem", "/srv"), env={"TOKEN": "s3cret"}
    ),
    ServerConfig(
        name="web", transport="http", url="https://example.com/mcp", headers={"Authorization": "Bearer s3cret"}
    ),
    ServerConfig(name="events", transport="sse", url="https://example.com/sse"),
)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("gateway.yaml", NATIVE),
        ("claude_desktop_config.json", {"mcpServers": CLIENT_SERVERS, "globalShortcut": "Ctrl+Space"}),
        (".mcp.json", {"mcpServers": CLIENT_SERVERS}),
        ("cursor-mcp.yaml", json.dumps({"mcpServers": CLIENT_SERVERS}, indent=2)),
        ("mcp.json", {"servers": VSCODE_SERVERS, "inputs": []}),
        ("vscode-without-inputs.json", {"servers": VSCODE_SERVERS}),
    ],
)
def test_every_accepted_format_gives_the_same_servers(tmp_path: Path, name: str, content: str | dict[str, Any]) -> None:
    config = load_config(write(tmp_path, name, content), ENV)
    assert config.servers == EXPECTED_SERVERS
    assert config.path == tmp_path / name


@pytest.mark.parametrize("kind", ["http", "streamable-http", "streamableHttp"])
def test_client_transport_names_map_to_http(tmp_path: Path, kind: str) -> None:
    path = write(tmp_path, "c.json", {"mcpServers": {"web": {"type": kind, "url": "https://h/sse"}}})
    assert load_config(path, ENV).servers[0].transport == "http"


def test_client_specific_server_keys_are_honoured_or_ignored(tmp_path: Path) -> None:
    entry = {
        "command": "uvx",
        "disabled": True,
        "timeout": 30,
        "disabledTools": ["delete_all"],
        "alwaysAllow": ["read"],
        "autoApprove": ["read"],
    }
    (server,) = load_config(write(tmp_path, "c.json", {"mcpServers": {"tool": entry}}), ENV).servers
    assert server.enabled is False
    assert server.timeout == 30.0
    assert server.settings_for("delete_all").enabled is False
    assert server.settings_for("read").enabled is True


def test_env_file_is_refused_with_its_path(tmp_path: Path) -> None:
    path = write(tmp_path, "mcp.json", {"servers": {"x": {"type": "stdio", "command": "a", "envFile": ".env"}}})
    error = error_for(path)
    assert (error.file, error.path) == (str(path), "servers.x.envFile")
    assert "env files are not read" in error.problem


def test_vscode_inputs_are_refused_only_where_used(tmp_path: Path) -> None:
    servers: dict[str, Any] = {"x": {"type": "stdio", "command": "a"}}
    inputs = [{"id": "key", "type": "promptString", "password": True}]
    assert load_config(write(tmp_path, "ok.json", {"servers": servers, "inputs": inputs}), ENV).servers
    servers["x"]["env"] = {"KEY": "${input:key}"}
    error = error_for(write(tmp_path, "used.json", {"servers": servers, "inputs": inputs}))
    assert error.path == "servers.x.env.KEY"
    assert "${input:key}" in error.problem


def test_variables_defaults_and_escapes_are_substituted(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "g.yaml",
        """
servers:
  s:
    command: "${GATEWAY_PYTHON}"
    args: ["${API_TOKEN}", "${MISSING:-fallback}", "${EMPTY:-used}", "$${API_TOKEN}", "cost $$5", "${env:API_TOKEN}"]
    env: {DIR: "${CONFIG_DIR}", DATA: "${GATEWAY_DATA}/x"}
""",
    )
    (server,) = load_config(path, {**ENV, "EMPTY": ""}).servers
    assert server.command == sys.executable
    assert server.args == ("s3cret", "fallback", "used", "${API_TOKEN}", "cost $5", "s3cret")
    assert server.env == {"DIR": str(tmp_path), "DATA": f"{tmp_path}/data/x"}


def test_unset_variable_names_path_and_variable(tmp_path: Path) -> None:
    path = write(tmp_path, "g.yaml", "servers:\n  s:\n    command: x\n    env: {KEY: '${NO_SUCH_VAR}'}\n")
    error = error_for(path)
    assert (error.file, error.path) == (str(path), "servers.s.env.KEY")
    assert "NO_SUCH_VAR" in error.problem
    assert str(error).count("\n") == 0


def test_relative_paths_resolve_against_the_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "g.yaml",
        "gateway: {data_dir: state, skill_dirs: [../skills, ~/more]}\nservers: {s: {command: x, cwd: ./work}}\n",
    )
    config = load_config(path, ENV)
    assert config.settings.data_dir == tmp_path / "state"
    assert config.settings.skill_dirs == (tmp_path.parent / "skills", Path("/home/tester/more"))
    assert config.servers[0].cwd == str(tmp_path / "work")


def test_a_shared_server_s_roots_are_directories_read_as_file_uris(tmp_path: Path) -> None:
    path = write(tmp_path, "g.yaml", "servers: {s: {command: x, roots: [./project, ~/notes]}}\n")
    roots = load_config(path, ENV).servers[0].roots
    assert roots == ((tmp_path / "project").as_uri(), "file:///home/tester/notes")


def test_a_server_that_acts_as_each_user_reads_its_oauth_client(tmp_path: Path) -> None:
    text = "servers: {n: {url: 'https://n.example/mcp', oauth: {client_id: c, client_secret: s, scopes: [read]}}}\n"
    server = load_config(write(tmp_path, "g.yaml", text), ENV).servers[0]
    assert server.oauth == OAuthSettings(client_id="c", client_secret="s", scopes=("read",))
    assert (
        load_config(write(tmp_path, "h.yaml", "servers: {n: {url: 'https://n.example/mcp'}}\n"), ENV).servers[0].oauth
        is None
    )


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("{command: x, oauth: {}}", "servers.s.oauth: applies only to servers reached by url"),
        ("{url: 'https://s.example/mcp', scope: session, oauth: {}}", "servers.s.oauth: a server reached with each"),
        (
            "{url: 'https://s.example/mcp', oauth: {client_secret: x}}",
            "servers.s.oauth.client_secret: needs the client_id",
        ),
    ],
)
def test_an_oauth_entry_that_cannot_work_is_refused_naming_why(tmp_path: Path, entry: str, problem: str) -> None:
    assert problem in str(error_for(write(tmp_path, "g.yaml", f"servers: {{s: {entry}}}\n")))


def test_a_file_with_only_defaults_gets_every_default(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "g.yaml", "{}\n"), ENV)
    assert config.settings == GatewaySettings(data_dir=tmp_path / "data")
    assert (config.servers, config.local_tools) == ((), ())
    assert (config.policy.roles, config.auth, config.confirmation) == (None, AuthSettings(), ConfirmationSettings())


def test_workspace_size_and_retention_are_read_as_bytes_and_seconds(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "g.yaml", "gateway: {workspace_size: 8m, workspace_retention: 90}\n"), ENV)
    assert (config.settings.workspace_size, config.settings.workspace_retention) == (8 << 20, 90.0)


def test_the_caps_on_workspace_bytes_are_read_as_sizes(tmp_path: Path) -> None:
    text = "gateway: {workspace_size: 8m, max_workspace_bytes_per_caller: 24m, max_workspace_bytes: 1g}\n"
    settings = load_config(write(tmp_path, "g.yaml", text), ENV).settings
    assert (settings.max_workspace_bytes_per_caller, settings.max_workspace_bytes) == (24 << 20, 1 << 30)


def test_gateway_options_build_every_dataclass(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "g.yaml",
        """
gateway: {call_timeout: 5, retries: 0, disclosure: list_changed, allowed_origins: ["https://app.example:8443"]}
servers:
  py:
    command: python3
    namespace: code
    required: true
    layer: extended
    tags: [compute]
    risk: high
    timeout: 12
    sandbox: docker
    tools:
      run: {name: run_python, risk: low, tags: [exec], sandbox: {mode: per-session, memory: 1g, tmpfs: 128m, cpus: 2}}
local_tools:
  - tools.text
  - {ref: "tools.math:add", namespace: maths, layer: extended, timeout: 3, tags: [m]}
roles: {admin: {allow: ["*"], admin: true}}
auth: {api_keys: [{caller: ops, role: admin, key: "${OPS_KEY}"}]}
confirmation: {risk: medium}
""",
    )
    config = load_config(path, ENV)
    assert config.settings.call_timeout == 5.0 and config.settings.retries == 0
    assert config.settings.allowed_origins == ("https://app.example:8443",)
    (server,) = config.servers
    assert (server.namespace, server.required, server.layer, server.risk) == ("code", True, "extended", Risk.HIGH)
    assert server.sandbox == SandboxSettings()
    assert server.tools["run"] == ToolSettings(
        name="run_python",
        risk=Risk.LOW,
        tags=("exec",),
        sandbox=SandboxSettings(mode="per-session", memory="1g", tmpfs="128m", cpus=2.0),
    )
    assert config.local_tools == (
        LocalToolConfig(ref="tools.text"),
        LocalToolConfig(ref="tools.math:add", namespace="maths", layer="extended", timeout=3.0, tags=("m",)),
    )
    assert config.policy.is_admin("admin") and config.confirmation.risk == Risk.MEDIUM
    assert Authenticator(config.auth).authenticate(f"Bearer {ENV['OPS_KEY']}").caller == "ops"


def test_tool_settings_fall_back_to_the_server() -> None:
    server = ServerConfig(
        name="s",
        transport="stdio",
        command="x",
        timeout=9.0,
        layer="extended",
        tags=("a",),
        risk=Risk.MEDIUM,
        tools={"t": ToolSettings(timeout=1.0, layer="core", tags=("b", "a"))},
    )
    assert server.settings_for("t") == ToolSettings(timeout=1.0, layer="core", tags=("a", "b"), risk=Risk.MEDIUM)
    assert server.settings_for("other") == ToolSettings(timeout=9.0, layer="extended", tags=("a",), risk=Risk.MEDIUM)
    assert server.namespace == "s"


@pytest.mark.parametrize(
    ("content", "path", "problem"),
    [
        ("servers:\n  s: {comand: x}\n", "servers.s.comand", "did you mean 'command'?"),
        ("gateway: {call_timout: 3}\n", "gateway.call_timout", "did you mean 'call_timeout'?"),
        ("gateway: {call_timeout: soon}\n", "gateway.call_timeout", "expected a number, got a string"),
        ("gateway: {retries: -1}\n", "gateway.retries", "must be at least 0"),
        ("servers:\n  s: {command: x, args: [--port, 8080]}\n", "servers.s.args[1]", "expected a string"),
        ("servers:\n  s: {command: x, layer: middle}\n", "servers.s.layer", "must be one of 'core', 'extended'"),
        ("servers:\n  s: {command: x, sandbox: podman}\n", "servers.s.sandbox", "expected 'docker' or a map"),
        ("servers:\n  s: {command: x, sandbox: {memroy: 1g}}\n", "servers.s.sandbox.memroy", "did you mean 'memory'"),
        ("servers:\n  s: {command: x, sandbox: {memory: lots}}\n", "servers.s.sandbox.memory", "a size like 64m"),
        ("local_tools: [{namespace: x}]\n", "local_tools[0]", "missing required key 'ref'"),
        ("local_tools: ['not a ref']\n", "local_tools[0]", "a reference like 'pkg.mod'"),
        ("servers:\n  my.server: {command: x}\n", 'servers["my.server"]', "1-32 letters, digits"),
        ("servers:\n  s: {command: x, namespace: 'a b'}\n", "servers.s.namespace", "1-32 letters, digits"),
        ("servers:\n  a: {command: x}\n  b: {command: y, namespace: a}\n", "servers.b", "already used by server 'a'"),
        ("servers:\n  local: {command: x}\nlocal_tools: [m.n]\n", "local_tools[0]", "already used by server 'local'"),
        ("servers:\n  s: {command: x, url: 'http://h'}\n", "servers.s", "has both command and url"),
        ("servers:\n  s: {args: [a]}\n", "servers.s", "needs either command"),
        ("servers:\n  s: {url: 'ftp://h'}\n", "servers.s.url", "http:// or https://"),
        ("servers:\n  s: {url: 'http://h', transport: stdio}\n", "servers.s.transport", "needs a command"),
        ("servers:\n  s: {command: x, transport: sse}\n", "servers.s.transport", "needs a url"),
        ("servers:\n  s: {url: 'http://h', env: {A: b}}\n", "servers.s.env", "only to servers started by command"),
        ("servers:\n  s: {command: x, sandbox: {memory: 64m}}\n", "servers.s.sandbox.tmpfs", "smaller than memory"),
        ("servers:\n  s: {command: x, scope: session, roots: [a]}\n", "servers.s.roots", "roots is for shared"),
        ("gateway: {loop_window: 3, loop_repeat_limit: 4}\n", "gateway.loop_repeat_limit", "loop_window"),
        ("gateway: {allowed_origins: ['example.com']}\n", "gateway.allowed_origins[0]", "not an origin"),
        ("servers:\n  1: {command: x}\n", "servers.1", "must be text; quote it"),
        ("servers: {s: {command: '${OPEN'}}\n", "servers.s.command", "is not closed"),
        ("extras: {}\n", "extras", "unknown key"),
        ("gateway: {workspace_size: 512k}\n", "gateway.workspace_size", "at least 1m"),
        ("gateway: {workspace_size: huge}\n", "gateway.workspace_size", "a size like 64m"),
        ("gateway: {workspace_retention: 0}\n", "gateway.workspace_retention", "greater than 0"),
        ("gateway: {max_workspace_bytes: lots}\n", "gateway.max_workspace_bytes", "a size like 64m"),
        (
            "gateway: {workspace_size: 2g}\n",
            "gateway.max_workspace_bytes_per_caller",
            "at least workspace_size",
        ),
        (
            "gateway: {max_workspace_bytes_per_caller: 9g}\n",
            "gateway.max_workspace_bytes",
            "at least max_workspace_bytes_per_caller",
        ),
    ],
)
def test_invalid_file_names_file_path_and_problem(tmp_path: Path, content: str, path: str, problem: str) -> None:
    file = write(tmp_path, "bad.yaml", content)
    error = error_for(file)
    assert (error.file, error.path) == (str(file), path)
    assert problem in error.problem
    assert str(error).startswith(f"{file}: {path}: ")


def test_every_violation_is_reported_one_per_line(tmp_path: Path) -> None:
    file = write(tmp_path, "bad.yaml", "gateway: {retries: x, colour: red}\nservers:\n  s: {command: 1}\n")
    error = error_for(file)
    assert isinstance(error, ConfigProblems)
    assert set(str(error).splitlines()) == {
        f"{file}: gateway.retries: expected a whole number, got a string",
        f"{file}: gateway.colour: unknown key; allowed: " + ", ".join(sorted(_settings_keys())),
        f"{file}: servers.s.command: expected a string, got the number 1",
    }
    assert (error.path, error.problem) == (error.problems[0][0], error.problems[0][1])


def test_yaml_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    error = error_for(write(tmp_path, "bad.yaml", "servers:\n  s:\n    command: [x\n    args: y\n"))
    assert error.path.startswith("line ") and ", column " in error.path
    assert "YAML syntax error" in error.problem


def test_json_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    error = error_for(write(tmp_path, "bad.json", '{\n  "mcpServers": {,}\n}'))
    assert error.path == "line 2, column 18"
    assert "JSON syntax error" in error.problem


@pytest.mark.parametrize(
    ("name", "content"),
    [("dup.yaml", "servers:\n  s: {command: a}\n  s: {command: b}\n"), ("dup.json", '{"servers": {"s": {}, "s": {}}}')],
)
def test_a_key_given_twice_is_refused(tmp_path: Path, name: str, content: str) -> None:
    assert "duplicate key 's'" in error_for(write(tmp_path, name, content)).problem


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    error = error_for(tmp_path / "nowhere.yaml")
    assert (error.file, error.problem) == (str(tmp_path / "nowhere.yaml"), "no such file")


def test_directory_is_a_config_error(tmp_path: Path) -> None:
    assert "is a directory" in error_for(tmp_path).problem


def test_oversized_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = write(tmp_path, "big.yaml", "#" * (MAX_CONFIG_BYTES + 1))
    assert "larger than" in error_for(path).problem


@pytest.mark.parametrize(("content", "problem"), [("", "the file is empty"), ("- a\n", "expected a map")])
def test_a_file_without_a_top_level_map_is_refused(tmp_path: Path, content: str, problem: str) -> None:
    assert problem in error_for(write(tmp_path, "g.yaml", content)).problem


def test_default_config_loads_the_bundled_servers() -> None:
    config = load_config(default_config_path(), {"HOME": "/home/tester", "GATEWAY_DATA_DIR": "/var/gw"})
    data = Path("/var/gw")
    repository = Path(__file__).resolve().parents[2]
    assert config.settings.data_dir == data
    assert config.settings.skill_dirs == (repository / "skills",)
    assert {path.name for path in (repository / "skills").iterdir()} >= {"data-analysis", "quick-math"}
    servers = {server.name: server for server in config.servers}
    assert set(servers) == {"files", "sqlite", "calc", "python"}
    assert servers["files"].args == ("-m", "servers.files", "--root", "${WORKSPACE}")
    assert servers["files"].scope == "session"
    assert servers["sqlite"].args == ("-m", "servers.sqlite", "--database", str(data / "sqlite/main.db"))
    # No cwd: the gateway's own Python imports the installed servers package from anywhere.
    assert all(s.command == sys.executable and s.cwd is None for s in config.servers)
    run_python = servers["python"].settings_for("run_python")
    assert run_python.sandbox == SandboxSettings(mode="per-call", command=("python3", "-m", "servers.python"))
    assert run_python.risk is Risk.HIGH


def test_default_data_dir_is_under_home() -> None:
    config = load_config(default_config_path(), {"HOME": "/home/tester"})
    assert config.settings.data_dir == Path("/home/tester/.local/share/mcp-gateway")


def test_parse_config_reads_in_memory_data() -> None:
    data = {"servers": {"s": {"command": "x", "cwd": "w"}}}
    config = parse_config(data, source="<test>", base_dir=Path("/etc/gw"), environ={})
    assert config.path is None
    assert config.servers[0].cwd == "/etc/gw/w"
    with pytest.raises(ConfigError) as caught:
        parse_config({"servers": 3}, source="<test>", base_dir=Path("/"), environ={})
    assert str(caught.value) == "<test>: servers: expected a map, got the number 3"


def _settings_keys() -> set[str]:
    return {f.name for f in dataclasses.fields(GatewaySettings)}


def test_schema_is_valid_and_matches_the_settings_dataclass() -> None:
    schema = json.loads(default_config_path().with_name("config_schema.json").read_text("utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    assert set(schema["$defs"]["settings"]["properties"]) == _settings_keys()
    assert set(schema["$defs"]["sandbox"]["properties"]) == {f.name for f in dataclasses.fields(SandboxSettings)}
    assert set(schema["$defs"]["toolSettings"]["properties"]) == {f.name for f in dataclasses.fields(ToolSettings)}


@pytest.mark.parametrize(
    ("entry", "path", "problem"),
    [
        ({"type": "stdio", "url": "https://h/mcp"}, "mcpServers.x.type", "'stdio' needs a command"),
        ({"command": "a", "url": "https://h/mcp"}, "mcpServers.x", "has both command and url"),
        ({"command": "a", "alwaysAllowed": []}, "mcpServers.x.alwaysAllowed", "did you mean 'alwaysAllow'?"),
        ({"type": "websocket", "url": "wss://h"}, "mcpServers.x.type", "must be one of 'stdio'"),
    ],
)
def test_invalid_client_file_names_the_key_the_client_wrote(
    tmp_path: Path, entry: dict[str, Any], path: str, problem: str
) -> None:
    error = error_for(write(tmp_path, "c.json", {"mcpServers": {"x": entry}}))
    assert (error.path, problem in error.problem) == (path, True)


def test_an_empty_namespace_exposes_a_server_unprefixed_and_may_be_shared(tmp_path: Path) -> None:
    servers = {"a": {"command": "x", "namespace": ""}, "b": {"command": "y", "namespace": ""}}
    file = write(tmp_path, "gateway.yaml", {"servers": servers})
    config = load_config(file, {"GATEWAY_DATA_DIR": str(tmp_path)})
    assert [(server.namespace, server.prefix) for server in config.servers] == [("", ""), ("", "")]


def test_find_tools_names_a_bundled_model_or_the_model_of_its_endpoint(tmp_path: Path) -> None:
    error = error_for(write(tmp_path, "a.yaml", "gateway:\n  find_tools_model: bge-m3\nservers: {}\n"))
    assert "find_tools_model" in str(error) and "find_tools_endpoint" in str(error)
    endpoint = "gateway:\n  find_tools_model: bge-m3\n  find_tools_endpoint: http://127.0.0.1:8080/v1\nservers: {}\n"
    settings = load_config(write(tmp_path, "b.yaml", endpoint), ENV).settings
    assert (settings.find_tools_model, settings.find_tools_endpoint) == ("bge-m3", "http://127.0.0.1:8080/v1")
    assert "find_tools_endpoint" in str(
        error_for(write(tmp_path, "c.yaml", "gateway:\n  find_tools_endpoint: ftp://x\nservers: {}\n"))
    )
