"""Reading, validating and resolving a configuration file (or one server entry) into the dataclasses of `model`."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar, cast

from gateway.auth.groups import Group, parse_groups
from gateway.auth.policy import Policy
from gateway.auth.settings import AuthSettings
from gateway.catalog.tools import Risk
from gateway.config.clientfiles import CLIENT_DATA_DIR, detect_format, from_client_file
from gateway.config.extends import extended
from gateway.config.limits import SandboxLimits
from gateway.config.model import (
    BUNDLED_MODELS,
    DEFAULT_WORKSPACE_BYTES,
    DEFAULT_WORKSPACE_BYTES_PER_CALLER,
    DEFAULT_WORKSPACE_SIZE,
    GatewayConfig,
    GatewaySettings,
    LocalToolConfig,
    OAuthSettings,
    SandboxSettings,
    Scope,
    ServerConfig,
    ToolSettings,
    Transport,
)
from gateway.config.namedsecrets import Secrets
from gateway.config.reader import read_config_file
from gateway.config.registration import RegistrationPolicy
from gateway.config.schema import schema_problems
from gateway.config.values import local_path, seconds, size_bytes, url_path
from gateway.config.variables import WORKSPACE_REFERENCE, expand, substitute
from gateway.errors import ConfigError
from gateway.pipeline.confirmation import ConfirmationSettings
from gateway.problems import (
    NAME_PATTERN,
    NAME_RULE,
    ConfigProblems,
    JsonPath,
    Problem,
    describe_value,
    nesting_problem,
    raise_if_any,
    render_path,
)
from gateway.runtime.tracing import TracingSettings
from gateway.stores import StoreSettings

_T = TypeVar("_T")


def default_config_path() -> Path:
    """The embedded default configuration, gateway/config/default.yaml, where it is installed."""
    return Path(str(resources.files(__package__ or "gateway.config").joinpath("default.yaml")))


def load_config(path: Path, environ: Mapping[str, str] | None = None) -> GatewayConfig:
    """Read, validate and resolve a configuration file (the gateway's YAML, or a client's JSON)."""
    path = Path(path).absolute()
    config = parse_config(read_config_file(path), source=str(path), base_dir=path.parent, environ=environ)
    return replace(config, path=path)


def parse_config(data: Any, *, source: str, base_dir: Path, environ: Mapping[str, str] | None = None) -> GatewayConfig:
    """Validate already-parsed data and build the configuration; `source` names it in errors.

    Every section is checked here, and every problem of every section is reported together.
    """
    if data is None:
        raise ConfigError(source, "", "the file is empty")
    data = extended(data, source, base_dir, default_config_path)
    if not isinstance(data, dict):
        raise ConfigError(source, "", f"expected a map at the top level, got {describe_value(data)}")
    # Checked first: every step after this one walks the data recursively.
    raise_if_any(source, nesting_problem(data))
    env = dict(os.environ if environ is None else environ)
    problems: list[Problem] = []
    kind = detect_format(data)
    section = data.get("gateway")
    raw_dir = section.get("data_dir") if isinstance(section, dict) else None
    raw_dir = raw_dir if kind == "gateway" else CLIENT_DATA_DIR
    if not isinstance(raw_dir, str):
        raw_dir = "./data"
    variables = _variables(env, base_dir)
    data_dir_text = expand(raw_dir, variables, ("gateway", "data_dir"), problems)
    data_dir = local_path(data_dir_text, base_dir, env, ("gateway", "data_dir"), problems)
    variables = {**variables, "GATEWAY_DATA": str(data_dir)}
    access_problems: list[tuple[str, str]] = []
    # The secrets are expanded first (and once: `$$` must not be undone twice), for the servers to name.
    written = substitute(data.get("secrets"), variables, ("secrets",), problems) if kind == "gateway" else None
    secrets = _secrets(written, source, base_dir, access_problems)
    data = {
        key: written
        if key == "secrets" and kind == "gateway"
        else substitute(value, variables, (key,), problems, secrets.values)
        for key, value in data.items()
    }
    problems += schema_problems(data, kind)
    policy, confirmation, auth, groups, registration, store, tracing = _sections(
        data if kind == "gateway" else {}, source, base_dir, access_problems
    )
    if problems:
        _raise_all(source, problems, access_problems)
    renames: dict[str, str] = {}
    document: dict[str, Any] = data if kind == "gateway" else from_client_file(data, kind, problems, renames)
    config = _build(document, kind, data_dir, base_dir, env, problems, renames)
    _raise_all(source, problems, access_problems)
    notes = tuple(
        f"server {original!r} is called '{name}' here: names prefix tool names, which allow only "
        "letters, digits, '_' and '-'"
        for name, original in renames.items()
    )
    return replace(
        config,
        notes=notes,
        policy=policy,
        confirmation=confirmation,
        auth=auth,
        groups=groups,
        registration=registration,
        store=store,
        secrets=secrets,
        tracing=tracing,
    )


def _secrets(written: Any, source: str, base_dir: Path, problems: list[tuple[str, str]]) -> Secrets:
    """The `secrets` section, its problems added to `problems`."""
    try:
        return Secrets.from_config(written, source_file=source, base_dir=base_dir)
    except ConfigProblems as error:
        problems.extend(error.problems)
    except ConfigError as error:
        problems.append((error.path, error.problem))
    return Secrets()


def parse_server(
    name: str,
    entry: Any,
    *,
    source: str,
    base_dir: Path,
    secrets: Mapping[str, str],
) -> ServerConfig:
    """One entry of `servers` registered through the API, checked by the same schema and rules as
    in a whole file. It never reads the environment: its headers, env and args may name `secrets`
    (those offered to registrations) as `${secret:NAME}`, and nothing else but `${WORKSPACE}`.

    Problems are raised as ConfigProblems with paths `servers.<name>...`. Whether its namespace
    is free is for the caller to judge against the servers it already has.
    """
    path: JsonPath = ("servers", name)
    problems = [((*path, *where), text) for where, text in nesting_problem(entry)]
    raise_if_any(source, problems)
    entry = substitute(entry, None, path, problems, secrets)
    problems += [((*path, *where), text) for where, text in schema_problems(entry, "server")]
    raise_if_any(source, problems)
    server = _server(name, entry, path, base_dir, {}, problems, "transport")
    raise_if_any(source, problems)
    return server


def _variables(env: Mapping[str, str], base_dir: Path) -> dict[str, str]:
    """What `${...}` may name before `data_dir` is known: the environment and the gateway's own."""
    variables = {**env, "GATEWAY_PYTHON": sys.executable, "CONFIG_DIR": str(base_dir)}
    skills = bundled_skills()
    if skills is not None:
        variables["GATEWAY_SKILLS"] = str(skills)
    return variables


def bundled_skills() -> Path | None:
    """The skill folders installed with the gateway: the `skills` package data, where the import
    system finds it (a checkout's `skills/`, or `site-packages/skills` of a wheel); None when it is
    not installed. Found without importing it, so no bytecode folder appears among the skills."""
    spec = importlib.util.find_spec("skills")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    return Path(locations[0]) if locations else None


def _sections(
    document: Mapping[str, Any], source: str, base_dir: Path, problems: list[tuple[str, str]]
) -> tuple[
    Policy,
    ConfirmationSettings,
    AuthSettings,
    dict[str, Group],
    RegistrationPolicy,
    StoreSettings,
    TracingSettings | None,
]:
    """The `roles`, `confirmation`, `auth`, `groups`, `registration`, `store` and `tracing` sections,
    each problem with its path."""
    roles = document.get("roles")

    def parse(build: Callable[[], _T], default: _T) -> _T:
        try:
            return build()
        except ConfigProblems as error:
            problems.extend(error.problems)
        except ConfigError as error:
            problems.append((error.path, error.problem))
        return default

    policy = parse(lambda: Policy.from_config(roles, source_file=source), None)
    confirmation = parse(
        lambda: ConfirmationSettings.from_config(document.get("confirmation"), source_file=source),
        ConfirmationSettings(),
    )
    # An unusable `roles` map still names its roles, so auth's references to them are checked too.
    known_roles = frozenset(map(str, roles)) if isinstance(roles, dict) else None
    if policy is not None:
        known_roles = policy.role_names()
    auth = parse(
        lambda: AuthSettings.from_config(
            document.get("auth"), source_file=source, base_dir=base_dir, known_roles=known_roles
        ),
        AuthSettings(),
    )
    no_groups: dict[str, Group] = {}
    groups = parse(lambda: parse_groups(document.get("groups"), source_file=source), no_groups)
    registration = parse(
        lambda: RegistrationPolicy.from_config(document.get("registration"), source_file=source), RegistrationPolicy()
    )
    store = parse(lambda: StoreSettings.from_config(document.get("store"), source_file=source), StoreSettings())
    tracing = parse(lambda: TracingSettings.from_config(document.get("tracing"), source_file=source), None)
    return policy or Policy(), confirmation, auth, groups, registration, store, tracing


def _raise_all(source: str, problems: list[Problem], written: list[tuple[str, str]]) -> None:
    """Raise one ConfigProblems listing every problem (each once, in order), if there are any."""
    unique = list(dict.fromkeys([*((render_path(path), text) for path, text in problems), *written]))
    if unique:
        raise ConfigProblems(source, unique)


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
    # Servers without a prefix may be many: a clash between their names is the catalog's to resolve.
    for server in (server for server in servers if server.prefix):
        if server.prefix in owners:
            problems.append(
                (
                    (servers_key, renames.get(server.name, server.name)),
                    f"namespace '{server.prefix}' is already used by server "
                    f"'{owners[server.prefix]}'; give one of them another `namespace`",
                )
            )
        owners.setdefault(server.prefix, server.name)
    for index, tool in enumerate(local_tools):
        if tool.namespace in owners:
            problems.append(
                (
                    ("local_tools", index),
                    f"namespace '{tool.namespace}' is already used by server "
                    f"'{owners[tool.namespace]}'; give the local tools another `namespace`",
                )
            )
    return GatewayConfig(path=None, settings=settings, servers=servers, local_tools=local_tools)


_FLOAT_SETTINGS = {
    "session_idle_timeout",
    "call_timeout",
    "upstream_connect_timeout",
    "first_listing_wait",
    "restart_backoff_initial",
    "restart_backoff_max",
    "restart_backoff_reset",
    "health_interval",
    "workspace_retention",
    "code_mode_deadline",
}

_SIZE_SETTINGS = {
    "max_workspace_bytes_per_caller": DEFAULT_WORKSPACE_BYTES_PER_CALLER,
    "max_workspace_bytes": DEFAULT_WORKSPACE_BYTES,
}


def _settings(
    raw: Mapping[str, Any], data_dir: Path, base_dir: Path, env: Mapping[str, str], problems: list[Problem]
) -> GatewaySettings:
    """The `gateway` section, with paths resolved against the file's directory."""
    values: dict[str, Any] = {
        key: seconds(value, ("gateway", key), problems) if key in _FLOAT_SETTINGS else value
        for key, value in raw.items()
        if key != "data_dir"
    }
    # None marks a number already reported as unusable; the default stands in until the error is raised.
    values = {key: value for key, value in values.items() if value is not None}
    values["skill_dirs"] = tuple(
        local_path(text, base_dir, env, ("gateway", "skill_dirs", index), problems)
        for index, text in enumerate(values.get("skill_dirs", ()))
    )
    if "workspace_size" in values:
        size = size_bytes(values["workspace_size"], ("gateway", "workspace_size"), problems)
        if size is not None and size < 1 << 20:
            problems.append((("gateway", "workspace_size"), "must be at least 1m"))
        values["workspace_size"] = size or DEFAULT_WORKSPACE_SIZE
    for key, default in _SIZE_SETTINGS.items():
        if key in values:
            values[key] = size_bytes(values[key], ("gateway", key), problems) or default
    values["allowed_origins"] = tuple(values.get("allowed_origins", ()))
    for index, origin in enumerate(values["allowed_origins"]):
        if not re.fullmatch(r"https?://[^/\s]+", origin):
            problems.append(
                (("gateway", "allowed_origins", index), f"{origin!r} is not an origin like https://host:port")
            )
    settings = GatewaySettings(data_dir=data_dir, **values)
    if settings.find_tools_endpoint is None and settings.find_tools_model not in BUNDLED_MODELS:
        problems.append(
            (
                ("gateway", "find_tools_model"),
                f"must be one of {', '.join(BUNDLED_MODELS)}, or the model of find_tools_endpoint",
            )
        )
    if settings.loop_repeat_limit > settings.loop_window:
        problems.append((("gateway", "loop_repeat_limit"), "must not exceed loop_window"))
    if settings.restart_backoff_initial > settings.restart_backoff_max:
        problems.append((("gateway", "restart_backoff_initial"), "must not exceed restart_backoff_max"))
    # A caller's cap must leave room for one workspace, and the total for one caller's cap.
    if settings.max_workspace_bytes_per_caller < settings.workspace_size:
        problems.append((("gateway", "max_workspace_bytes_per_caller"), "must be at least workspace_size"))
    if settings.max_workspace_bytes < settings.max_workspace_bytes_per_caller:
        problems.append((("gateway", "max_workspace_bytes"), "must be at least max_workspace_bytes_per_caller"))
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
    if namespace not in (name, "") and not NAME_PATTERN.fullmatch(namespace):
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
            transport = "sse" if url_path(url, (*path, "url"), problems).rstrip("/").endswith("/sse") else "http"
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
        cwd=str(local_path(raw["cwd"], base_dir, env, (*path, "cwd"), problems)) if "cwd" in raw else None,
        url=url,
        headers=dict(raw.get("headers", {})),
        namespace=namespace,
        enabled=raw.get("enabled", True),
        required=raw.get("required", False),
        timeout=seconds(raw.get("timeout"), (*path, "timeout"), problems),
        layer=raw.get("layer", "core"),
        tags=tuple(raw.get("tags", ())),
        sandbox=_sandbox(raw.get("sandbox"), (*path, "sandbox"), problems),
        risk=Risk(raw["risk"]) if "risk" in raw else None,
        tools={
            tool: _tool(settings, (*path, "tools", tool), problems) for tool, settings in raw.get("tools", {}).items()
        },
        scope=_scope(raw, path, problems),
        roots=_roots(raw, path, base_dir, env, problems),
        oauth=_oauth(raw, path, problems),
        on_tool_change=raw.get("on_tool_change"),
    )


def _scope(raw: Mapping[str, Any], path: JsonPath, problems: list[Problem]) -> Scope:
    """`session` gives each client session its own instance; only such a server may use ${WORKSPACE}."""
    scope: Scope = raw.get("scope", "shared")
    if scope == "shared" and WORKSPACE_REFERENCE in json.dumps(raw):
        problems.append(((*path, "scope"), "${WORKSPACE} is only known per session: set scope: session"))
    return scope


def _roots(
    raw: Mapping[str, Any], path: JsonPath, base_dir: Path, env: Mapping[str, str], problems: list[Problem]
) -> tuple[str, ...]:
    """The directories a shared server is given as its roots, as `file://` URIs."""
    texts: list[str] = raw.get("roots", [])
    if texts and raw.get("scope") == "session":
        problems.append(
            ((*path, "roots"), "a session's own instance gets its client's roots: roots is for shared servers")
        )
    return tuple(
        local_path(text, base_dir, env, (*path, "roots", index), problems).as_uri() for index, text in enumerate(texts)
    )


def _oauth(raw: Mapping[str, Any], path: JsonPath, problems: list[Problem]) -> OAuthSettings | None:
    """How each caller's own OAuth grant reaches the server: only a server reached by url has one."""
    section: Mapping[str, Any] | None = raw.get("oauth")
    if section is None:
        return None
    if "url" not in raw:
        problems.append(((*path, "oauth"), "applies only to servers reached by url"))
    if raw.get("scope") == "session":
        problems.append(((*path, "oauth"), "a server reached with each caller's grant is one per caller already"))
    if "client_secret" in section and "client_id" not in section:
        problems.append(((*path, "oauth", "client_secret"), "needs the client_id it belongs to"))
    return OAuthSettings(
        client_id=section.get("client_id"),
        client_secret=section.get("client_secret"),
        scopes=tuple(section.get("scopes", ())),
    )


def _tool(raw: Mapping[str, Any], path: JsonPath, problems: list[Problem]) -> ToolSettings:
    """The overrides for one tool of a server."""
    return ToolSettings(
        timeout=seconds(raw.get("timeout"), (*path, "timeout"), problems),
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
    values: dict[str, Any] = {
        key: seconds(value, (*path, key), problems) if key in ("cpus", "deadline") else value
        for key, value in raw.items()
    }
    values = {key: value for key, value in values.items() if value is not None}
    if "command" in values:
        values["command"] = tuple(values["command"])
    sandbox = SandboxSettings(**values)
    tmpfs = size_bytes(sandbox.tmpfs, (*path, "tmpfs"), problems)
    memory = size_bytes(sandbox.memory, (*path, "memory"), problems)
    if tmpfs is not None and memory is not None and tmpfs >= memory:
        # Files written to tmpfs count against the container's memory limit.
        problems.append(
            (
                (*path, "tmpfs"),
                f"tmpfs ({sandbox.tmpfs}) must be smaller than memory ({sandbox.memory}), "
                "because files in tmpfs use the container's memory",
            )
        )
    elif tmpfs is not None and memory is not None:
        problems.extend(_limit_problems(sandbox, memory, tmpfs, path))
    return sandbox


def _limit_problems(sandbox: SandboxSettings, memory: int, tmpfs: int, path: JsonPath) -> list[Problem]:
    """The first limit the container itself would refuse, found at load time instead of at start-up."""
    try:
        SandboxLimits(
            memory=memory,
            cpus=sandbox.cpus,
            pids=sandbox.pids,
            tmpfs=tmpfs,
            deadline=sandbox.deadline,
            max_output=sandbox.max_output_bytes,
        )
    except ConfigError as error:
        key = _LIMIT_KEYS.get(error.path, error.path)
        return [((*path, key), error.problem)]
    return []


# SandboxLimits' names for what the file calls otherwise; a deadline past the lifetime is the deadline's fault.
_LIMIT_KEYS = {"max_output": "max_output_bytes", "lifetime": "deadline"}


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
        timeout=seconds(raw.get("timeout"), (*path, "timeout"), problems),
        tags=tuple(raw.get("tags", ())),
    )
