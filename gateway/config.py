"""The gateway's configuration: reading, validating and resolving a file into frozen dataclasses."""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import urlsplit

import jsonschema
import yaml

from gateway.errors import ConfigError
from gateway.tools import Layer, Risk

SandboxMode = Literal["per-call", "per-session"]
Transport = Literal["stdio", "http", "sse"]
Scope = Literal["shared", "session"]
WORKSPACE = "WORKSPACE"
WORKSPACE_REFERENCE = "${WORKSPACE}"
Disclosure = Literal["call-through", "list_changed"]
JsonPath = tuple[str | int, ...]
Problem = tuple[JsonPath, str]

MAX_CONFIG_BYTES = 1 << 20
NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,32}")
NAME_RULE = "names and namespaces are 1-32 letters, digits, '_' or '-', because they prefix tool names"
EXTRA_SECTIONS = ("roles", "auth", "confirmation")
FOREIGN_DATA_DIR = "${GATEWAY_DATA_DIR:-~/.local/share/mcp-gateway}"


@dataclass(frozen=True, slots=True)
class SandboxSettings:
    """Limits for the container a sandboxed tool runs in."""

    mode: SandboxMode = "per-call"
    memory: str = "256m"
    cpus: float = 1.0
    pids: int = 64
    tmpfs: str = "64m"
    deadline: float = 30.0
    max_output_bytes: int = 1_048_576
    command: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolSettings:
    """Overrides for one tool, keyed by the tool's original name on its server."""

    timeout: float | None = None
    layer: Layer | None = None
    sandbox: SandboxSettings | None = None
    risk: Risk | None = None
    tags: tuple[str, ...] = ()
    enabled: bool = True
    name: str | None = None


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One upstream MCP server: a process over stdio or an HTTP endpoint."""

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    namespace: str = ""
    enabled: bool = True
    required: bool = False
    timeout: float | None = None
    layer: Layer = "core"
    tags: tuple[str, ...] = ()
    sandbox: SandboxSettings | None = None
    risk: Risk | None = None
    tools: Mapping[str, ToolSettings] = field(default_factory=dict)
    scope: Scope = "shared"

    def __post_init__(self) -> None:
        if not self.namespace:
            object.__setattr__(self, "namespace", self.name)

    def settings_for(self, original_name: str) -> ToolSettings:
        """The tool's effective settings: its own overrides, falling back to this server's values."""
        own = self.tools.get(original_name, ToolSettings())
        return replace(
            own,
            timeout=own.timeout if own.timeout is not None else self.timeout,
            layer=own.layer or self.layer,
            sandbox=own.sandbox or self.sandbox,
            risk=own.risk or self.risk,
            tags=tuple(dict.fromkeys(self.tags + own.tags)),
        )


@dataclass(frozen=True, slots=True)
class LocalToolConfig:
    """Python functions served in-process: "pkg.mod:function", or every @tool function of "pkg.mod"."""

    ref: str
    namespace: str = "local"
    layer: Layer = "core"
    timeout: float | None = None
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    """Gateway-wide settings (the `gateway` section)."""

    data_dir: Path
    session_idle_timeout: float = 1800
    call_timeout: float = 60
    retries: int = 2
    max_result_chars: int = 8000
    max_binary_bytes: int = 1_048_576
    loop_window: int = 20
    loop_repeat_limit: int = 5
    disclosure: Disclosure = "call-through"
    skill_dirs: tuple[Path, ...] = ()
    skill_capacity: int = 3
    max_extended_tools: int = 40
    allowed_origins: tuple[str, ...] = ()
    upstream_connect_timeout: float = 10
    restart_backoff_initial: float = 0.5
    restart_backoff_max: float = 30
    stdio_caller: str = "local"
    stdio_role: str | None = None
    sandbox_image: str = "mcp-gateway-sandbox:latest"
    sandbox_warm: int = 2
    http_json_responses: bool = False


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """A whole, validated configuration."""

    path: Path | None
    settings: GatewaySettings
    servers: tuple[ServerConfig, ...]
    local_tools: tuple[LocalToolConfig, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    """Remarks that do not stop the gateway but the operator should see (`check`, the log)."""


class ConfigProblems(ConfigError):
    """Every violation found in one file; `file`, `path` and `problem` describe the first."""

    def __init__(self, file: str, problems: list[tuple[str, str]]) -> None:
        super().__init__(file, *problems[0])
        self.problems = tuple(problems)
        self.message = "\n".join(f"{file}: {path}: {text}" if path else f"{file}: {text}" for path, text in problems)
        self.args = (self.message,)


def default_config_path() -> Path:
    """The embedded default configuration, gateway/default.yaml."""
    return Path(__file__).with_name("default.yaml")


def load_config(path: Path, environ: Mapping[str, str] | None = None) -> GatewayConfig:
    """Read, validate and resolve a configuration file (the gateway's YAML, or a client's JSON)."""
    path = Path(path).absolute()
    config = parse_config(_read(path), source=str(path), base_dir=path.parent, environ=environ)
    return replace(config, path=path)


def parse_config(data: Any, *, source: str, base_dir: Path, environ: Mapping[str, str] | None = None) -> GatewayConfig:
    """Validate already-parsed data and build the configuration; `source` names it in errors."""
    if data is None:
        raise ConfigError(source, "", "the file is empty")
    if not isinstance(data, dict):
        raise ConfigError(source, "", f"expected a map at the top level, got {_describe(data)}")
    env = dict(os.environ if environ is None else environ)
    problems: list[Problem] = []
    kind = _detect_format(data)
    variables = {**env, "GATEWAY_PYTHON": sys.executable, "CONFIG_DIR": str(base_dir)}
    section = data.get("gateway")
    raw_dir = section.get("data_dir") if isinstance(section, dict) else None
    raw_dir = raw_dir if kind == "gateway" else FOREIGN_DATA_DIR
    if not isinstance(raw_dir, str):
        raw_dir = "./data"
    data_dir = _local_path(_expand(raw_dir, variables, ("gateway", "data_dir"), problems), base_dir, env)
    data = _substitute(data, {**variables, "GATEWAY_DATA": str(data_dir)}, (), problems)
    problems += _schema_problems(data, kind)
    _raise_if_any(source, problems)
    renames: dict[str, str] = {}
    document: dict[str, Any] = data if kind == "gateway" else _from_foreign(data, kind, problems, renames)
    config = _build(document, kind, data_dir, base_dir, env, problems, renames)
    _raise_if_any(source, problems)
    notes = tuple(
        f"server {original!r} is called '{name}' here: names prefix tool names, which allow only "
        "letters, digits, '_' and '-'"
        for name, original in renames.items()
    )
    return replace(config, notes=notes)


def _read(path: Path) -> Any:
    """The parsed content of a file, bounded in size; every failure becomes a ConfigError."""
    source = str(path)
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(source, "", "no such file") from None
    except IsADirectoryError:
        raise ConfigError(source, "", "is a directory, not a configuration file") from None
    except OSError as error:
        raise ConfigError(source, "", f"cannot be read: {error.strerror}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(source, "", f"is larger than {MAX_CONFIG_BYTES} bytes, the limit for a configuration file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConfigError(source, "", f"is not UTF-8 text (bad byte at offset {error.start})") from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text, object_pairs_hook=_unique_pairs)
        except json.JSONDecodeError as error:
            raise ConfigError(
                source, f"line {error.lineno}, column {error.colno}", f"JSON syntax error: {error.msg}"
            ) from None
        except ValueError as error:
            raise ConfigError(source, "", str(error)) from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        context = f" ({error.context})" if error.context and error.problem else ""
        label = "" if isinstance(error, _DuplicateKeyError) else "YAML syntax error: "
        raise ConfigError(source, where, f"{label}{error.problem or error.context}{context}") from None
    except yaml.YAMLError as error:
        raise ConfigError(source, "", f"YAML syntax error: {error}") from None


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key given twice (JSON parsers would keep only the last)."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}; only one of them would take effect")
        result[key] = value
    return result


class _DuplicateKeyError(yaml.constructor.ConstructorError):
    """A YAML map gives the same key twice."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one map instead of keeping the last."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """The map, after checking its own keys (merged `<<` keys may legitimately be overridden)."""
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str | int | float | bool) and key in seen:
                raise _DuplicateKeyError(
                    None, None, f"duplicate key {key!r}; only one of them would take effect", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _detect_format(data: Mapping[str, Any]) -> str:
    """Which schema definition the file follows, judged by its top-level keys."""
    if "mcpServers" in data:
        return "mcpServersFile"
    servers = data.get("servers")
    typed = isinstance(servers, dict) and any(isinstance(s, dict) and "type" in s for s in servers.values())
    if "inputs" in data or (set(data) == {"servers"} and typed):
        return "vscodeFile"
    return "gateway"


_REFERENCE = re.compile(r"\$(?:(\$)|\{([^}]*)(\}?))")
_VARIABLE = re.compile(r"(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.DOTALL)


def _expand(text: str, variables: Mapping[str, str], path: JsonPath, problems: list[Problem]) -> str:
    """`text` with ${NAME} and ${NAME:-default} replaced and $$ turned into $."""

    def substitute(match: re.Match[str]) -> str:
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

    return _REFERENCE.sub(substitute, text)


def _substitute(value: Any, variables: Mapping[str, str], path: JsonPath, problems: list[Problem]) -> Any:
    """A copy of the parsed file with every string value expanded; map keys must be strings."""
    if isinstance(value, str):
        return _expand(value, variables, path, problems)
    if isinstance(value, list):
        return [_substitute(item, variables, (*path, index), problems) for index, item in enumerate(value)]
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                problems.append(((*path, str(key)), f"the key {key!r} must be text; quote it"))
        return {str(k): _substitute(v, variables, (*path, str(k)), problems) for k, v in value.items()}
    return value


@cache
def _schema() -> dict[str, Any]:
    """The JSON Schema of every accepted format (gateway/config_schema.json)."""
    schema: dict[str, Any] = json.loads(Path(__file__).with_name("config_schema.json").read_text("utf-8"))
    return schema


def _schema_problems(data: Any, kind: str) -> list[Problem]:
    """Every schema violation of `data`, read as the format `kind` (a definition in the schema)."""
    schema = _schema() if kind == "gateway" else {**_schema(), "$ref": f"#/$defs/{kind}"}
    validator = jsonschema.Draft202012Validator(schema)
    return [problem for error in validator.iter_errors(data) for problem in explain_error(error)]


_TYPE_NAMES = {
    "object": "a map",
    "array": "a list",
    "string": "a string",
    "number": "a number",
    "integer": "a whole number",
    "boolean": "true or false",
    "null": "null",
}


def explain_error(error: jsonschema.ValidationError) -> list[Problem]:
    """One readable problem per thing wrong, with the path inside the file."""
    path: JsonPath = tuple(error.absolute_path)
    kind, schema = error.validator, cast(dict[str, Any], error.schema)
    expected: Any = error.validator_value
    value: Any = error.instance
    if kind == "additionalProperties" and expected is False:
        allowed = sorted(schema.get("properties", {}))
        return [((*path, key), _unknown_key(key, allowed)) for key in value if key not in allowed]
    if kind == "type":
        names = [expected] if isinstance(expected, str) else expected
        return [(path, f"expected {' or '.join(_TYPE_NAMES[n] for n in names)}, got {_describe(value)}")]
    if kind == "required":
        return [(path, f"missing required key '{key}'") for key in expected if key not in value]
    if kind == "enum":
        return [(path, f"must be one of {', '.join(map(repr, expected))}; got {value!r}")]
    if kind == "minimum":
        return [(path, f"must be at least {expected}; got {value!r}")]
    if kind == "exclusiveMinimum":
        return [(path, f"must be greater than {expected}; got {value!r}")]
    if kind == "minLength":
        return [(path, "must not be empty")]
    if kind == "pattern":
        return [(path, f"must be {schema.get('description', expected)}; got {value!r}")]
    if kind in ("anyOf", "oneOf"):
        branches: dict[int, list[jsonschema.ValidationError]] = {}
        for sub in error.context or []:
            branches.setdefault(cast(int, sub.relative_schema_path[0]), []).append(sub)
        for subs in branches.values():
            # The branch whose kind of value matches (a map for a map) explains the real mistake.
            if not any(sub.validator in ("type", "const") and not sub.relative_path for sub in subs):
                return [problem for sub in subs for problem in explain_error(sub)]
        described = schema.get("description", "a valid value")
        return [(path, f"expected {described}, got {_describe(value)}")]
    return [(path, error.message)]


def _unknown_key(key: str, allowed: list[str]) -> str:
    """The message for a key the schema does not know, suggesting the nearest allowed one."""
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.75)
    return f"unknown key (did you mean '{close[0]}'?)" if close else f"unknown key; allowed: {', '.join(allowed)}"


def _describe(value: Any) -> str:
    """A short description of a value's kind, without echoing strings that may hold secrets."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return f"the number {value}"
    names = {dict: "a map", list: "a list", str: "a string", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def render_path(path: JsonPath) -> str:
    """A path inside the file, written like `servers.files.args[2]`."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_-]+", part):
            text += f".{part}" if text else part
        else:
            text += f"[{json.dumps(part)}]"
    return text


def _raise_if_any(source: str, problems: list[Problem]) -> None:
    """Raise one ConfigError listing every problem (each once, in order), if there are any."""
    unique = list(dict.fromkeys((render_path(path), text) for path, text in problems))
    if unique:
        raise ConfigProblems(source, unique)


_FOREIGN_TRANSPORTS = {
    "stdio": "stdio",
    "sse": "sse",
    "http": "http",
    "streamable-http": "http",
    "streamableHttp": "http",
}


def _from_foreign(
    data: Mapping[str, Any], kind: str, problems: list[Problem], renames: dict[str, str]
) -> dict[str, Any]:
    """A client's file (mcpServers or VS Code servers) rewritten in the gateway's own shape.

    Clients allow any server name; a name unfit to prefix tool names is given a fitting one
    (recorded in `renames`, new name -> original), because such a file cannot say `namespace`.
    """
    key = "mcpServers" if kind == "mcpServersFile" else "servers"
    servers: dict[str, Any] = {}
    taken = {name for name in data[key] if NAME_PATTERN.fullmatch(name)}
    for original, entry in data[key].items():
        name = original
        if original not in taken:
            name = _fitting_name(original, taken)
            taken.add(name)
            renames[name] = original
        server = {k: entry[k] for k in ("command", "args", "env", "cwd", "headers", "timeout") if k in entry}
        if (url := entry.get("url", entry.get("serverUrl"))) is not None:
            server["url"] = url
        if (transport := entry.get("type", entry.get("transportType"))) is not None:
            server["transport"] = _FOREIGN_TRANSPORTS[transport]
        if entry.get("disabled"):
            server["enabled"] = False
        if "disabledTools" in entry:
            server["tools"] = {tool: {"enabled": False} for tool in entry["disabledTools"]}
        if "envFile" in entry:
            problems.append(
                (
                    (key, original, "envFile"),
                    "env files are not read; list the variables under env "
                    "(values may use ${NAME} from the gateway's environment)",
                )
            )
        servers[name] = server
    return {"servers": servers}


def _fitting_name(original: str, taken: set[str]) -> str:
    """`original` reduced to a valid server name; a hash of it is added if that name is taken."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", original).strip("_")[:32] or "server"
    if name in taken:
        digest = hashlib.sha256(original.encode()).hexdigest()[:8]
        name = f"{name[:23]}_{digest}"
    return name


def _build(
    document: Mapping[str, Any],
    kind: str,
    data_dir: Path,
    base_dir: Path,
    env: Mapping[str, str],
    problems: list[Problem],
    renames: Mapping[str, str],
) -> GatewayConfig:
    """The dataclasses for a schema-valid document, checking what the schema cannot express."""
    servers_key = "mcpServers" if kind == "mcpServersFile" else "servers"
    settings = _settings(document.get("gateway", {}), data_dir, base_dir, env, problems)
    transport_key = "transport" if kind == "gateway" else "type"
    servers = tuple(
        _server(name, raw, (servers_key, renames.get(name, name)), base_dir, env, problems, transport_key)
        for name, raw in document.get("servers", {}).items()
    )
    local_tools = tuple(
        _local_tool(raw, ("local_tools", index), problems) for index, raw in enumerate(document.get("local_tools", []))
    )
    owners: dict[str, str] = {}
    for server in servers:
        if server.namespace in owners:
            problems.append(
                (
                    (servers_key, renames.get(server.name, server.name)),
                    f"namespace '{server.namespace}' is already used by server "
                    f"'{owners[server.namespace]}'; give one of them another `namespace`",
                )
            )
        owners.setdefault(server.namespace, server.name)
    for index, tool in enumerate(local_tools):
        if tool.namespace in owners:
            problems.append(
                (
                    ("local_tools", index),
                    f"namespace '{tool.namespace}' is already used by server "
                    f"'{owners[tool.namespace]}'; give the local tools another `namespace`",
                )
            )
    extra = {section: document[section] for section in EXTRA_SECTIONS if section in document}
    return GatewayConfig(path=None, settings=settings, servers=servers, local_tools=local_tools, extra=extra)


_FLOAT_SETTINGS = {
    "session_idle_timeout",
    "call_timeout",
    "upstream_connect_timeout",
    "restart_backoff_initial",
    "restart_backoff_max",
}


def _settings(
    raw: Mapping[str, Any], data_dir: Path, base_dir: Path, env: Mapping[str, str], problems: list[Problem]
) -> GatewaySettings:
    """The `gateway` section, with paths resolved against the file's directory."""
    values: dict[str, Any] = {
        key: float(value) if key in _FLOAT_SETTINGS else value for key, value in raw.items() if key != "data_dir"
    }
    values["skill_dirs"] = tuple(_local_path(text, base_dir, env) for text in values.get("skill_dirs", ()))
    values["allowed_origins"] = tuple(values.get("allowed_origins", ()))
    for index, origin in enumerate(values["allowed_origins"]):
        if not re.fullmatch(r"https?://[^/\s]+", origin):
            problems.append(
                (("gateway", "allowed_origins", index), f"{origin!r} is not an origin like https://host:port")
            )
    settings = GatewaySettings(data_dir=data_dir, **values)
    if settings.loop_repeat_limit > settings.loop_window:
        problems.append((("gateway", "loop_repeat_limit"), "must not exceed loop_window"))
    if settings.restart_backoff_initial > settings.restart_backoff_max:
        problems.append((("gateway", "restart_backoff_initial"), "must not exceed restart_backoff_max"))
    return settings


def _server(
    name: str,
    raw: Mapping[str, Any],
    path: JsonPath,
    base_dir: Path,
    env: Mapping[str, str],
    problems: list[Problem],
    transport_key: str,
) -> ServerConfig:
    """One server, its transport decided by `command` (stdio) or `url` (http, or sse)."""
    if not NAME_PATTERN.fullmatch(name):
        problems.append((path, f"server name {name!r} is not allowed: {NAME_RULE}"))
    namespace = raw.get("namespace", name)
    if namespace != name and not NAME_PATTERN.fullmatch(namespace):
        problems.append(((*path, "namespace"), f"namespace {namespace!r} is not allowed: {NAME_RULE}"))
    command: str | None = raw.get("command")
    url: str | None = raw.get("url")
    transport: str | None = raw.get("transport")
    if command is not None and url is not None:
        problems.append((path, "has both command and url; a server is either a process (command) or an endpoint (url)"))
    elif command is None and url is None:
        problems.append((path, "needs either command (a process spoken to over stdio) or url (an HTTP endpoint)"))
    elif command is not None:
        if transport not in (None, "stdio"):
            problems.append(
                ((*path, transport_key), f"'{transport}' needs a url; a server started by command speaks stdio")
            )
        transport = "stdio"
        if "headers" in raw:
            problems.append(((*path, "headers"), "headers apply only to servers reached by url"))
    elif url is not None:
        if not url.startswith(("http://", "https://")):
            problems.append(((*path, "url"), "must start with http:// or https://"))
        if transport == "stdio":
            problems.append(
                ((*path, transport_key), "'stdio' needs a command; a server reached by url speaks http or sse")
            )
        if transport in (None, "stdio"):
            transport = "sse" if urlsplit(url).path.rstrip("/").endswith("/sse") else "http"
        problems.extend(
            ((*path, key), f"{key} applies only to servers started by command")
            for key in ("args", "env", "cwd")
            if key in raw
        )
    return ServerConfig(
        name=name,
        transport=cast(Transport, transport or "stdio"),
        command=command,
        args=tuple(raw.get("args", ())),
        env=dict(raw.get("env", {})),
        cwd=str(_local_path(raw["cwd"], base_dir, env)) if "cwd" in raw else None,
        url=url,
        headers=dict(raw.get("headers", {})),
        namespace=namespace,
        enabled=raw.get("enabled", True),
        required=raw.get("required", False),
        timeout=_seconds(raw.get("timeout")),
        layer=raw.get("layer", "core"),
        tags=tuple(raw.get("tags", ())),
        sandbox=_sandbox(raw.get("sandbox"), (*path, "sandbox"), problems),
        risk=Risk(raw["risk"]) if "risk" in raw else None,
        tools={
            tool: _tool(settings, (*path, "tools", tool), problems) for tool, settings in raw.get("tools", {}).items()
        },
        scope=_scope(raw, path, problems),
    )


def _scope(raw: Mapping[str, Any], path: JsonPath, problems: list[Problem]) -> Scope:
    """`session` gives each client session its own instance; only such a server may use ${WORKSPACE}."""
    scope: Scope = raw.get("scope", "shared")
    if scope == "shared" and WORKSPACE_REFERENCE in json.dumps(raw):
        problems.append(((*path, "scope"), "${WORKSPACE} is only known per session: set scope: session"))
    return scope


def _tool(raw: Mapping[str, Any], path: JsonPath, problems: list[Problem]) -> ToolSettings:
    """The overrides for one tool of a server."""
    return ToolSettings(
        timeout=_seconds(raw.get("timeout")),
        layer=raw.get("layer"),
        sandbox=_sandbox(raw.get("sandbox"), (*path, "sandbox"), problems),
        risk=Risk(raw["risk"]) if "risk" in raw else None,
        tags=tuple(raw.get("tags", ())),
        enabled=raw.get("enabled", True),
        name=raw.get("name"),
    )


def _sandbox(raw: Any, path: JsonPath, problems: list[Problem]) -> SandboxSettings | None:
    """Sandbox limits: absent, the `docker` shorthand for the defaults, or a map of overrides."""
    if raw is None:
        return None
    if raw == "docker":
        return SandboxSettings()
    values: dict[str, Any] = {key: float(value) if key in ("cpus", "deadline") else value for key, value in raw.items()}
    if "command" in values:
        values["command"] = tuple(values["command"])
    sandbox = SandboxSettings(**values)
    if _size(sandbox.tmpfs) >= _size(sandbox.memory):
        # Files written to tmpfs count against the container's memory limit.
        problems.append(
            (
                (*path, "tmpfs"),
                f"tmpfs ({sandbox.tmpfs}) must be smaller than memory ({sandbox.memory}), "
                "because files in tmpfs use the container's memory",
            )
        )
    return sandbox


def _local_tool(raw: str | Mapping[str, Any], path: JsonPath, problems: list[Problem]) -> LocalToolConfig:
    """A `local_tools` entry, either a bare module reference or a map."""
    if isinstance(raw, str):
        return LocalToolConfig(ref=raw)
    namespace = raw.get("namespace", "local")
    if not NAME_PATTERN.fullmatch(namespace):
        problems.append(((*path, "namespace"), f"namespace {namespace!r} is not allowed: {NAME_RULE}"))
    return LocalToolConfig(
        ref=raw["ref"],
        namespace=namespace,
        layer=raw.get("layer", "core"),
        timeout=_seconds(raw.get("timeout")),
        tags=tuple(raw.get("tags", ())),
    )


def _seconds(value: float | None) -> float | None:
    """A duration from the file as a float (YAML gives ints for whole numbers)."""
    return None if value is None else float(value)


def _size(text: str) -> int:
    """Bytes in a Docker-style size such as 64m."""
    units = {"b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    unit = text[-1].lower()
    return int(text[:-1]) * units[unit] if unit in units else int(text)


def _local_path(text: str, base_dir: Path, env: Mapping[str, str]) -> Path:
    """A path from the file: `~` expanded, relative paths taken from the file's directory, normalised."""
    home = env.get("HOME")
    if home and (text == "~" or text.startswith("~/")):
        text = home + text[1:]
    return Path(os.path.normpath(base_dir / Path(text).expanduser()))
