"""The gateway's configuration as frozen dataclasses: what a validated file resolves to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from gateway.auth.groups import Group
from gateway.auth.policy import Policy
from gateway.auth.settings import AuthSettings
from gateway.catalog.pinning import OnToolChange
from gateway.catalog.tools import Layer, Risk
from gateway.config.namedsecrets import Secrets
from gateway.config.registration import RegistrationPolicy
from gateway.pipeline.confirmation import ConfirmationSettings
from gateway.runtime.tracing import TracingSettings
from gateway.stores import StoreSettings

SandboxMode = Literal["per-call", "per-session"]
Transport = Literal["stdio", "http", "sse"]
Scope = Literal["shared", "session"]
Disclosure = Literal["call-through", "list_changed"]
# The models Find_Tools ranks by meaning with without an endpoint (gateway/skills/semantic.py), or
# none: word matching alone. With `find_tools_endpoint`, the model is whichever the endpoint serves.
BUNDLED_MODELS = ("use-multilingual-v3", "none")

DEFAULT_WORKSPACE_SIZE = 256 << 20
DEFAULT_WORKSPACE_BYTES_PER_CALLER = 1 << 30
DEFAULT_WORKSPACE_BYTES = 8 << 30


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
class OAuthSettings:
    """A server each caller connects with their own OAuth grant (`oauth:`): the client the gateway
    is at the server's authorization server (None: registered there dynamically) and the scopes it asks for."""

    client_id: str | None = None
    client_secret: str | None = None
    scopes: tuple[str, ...] = ()


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
    namespace: str | None = None
    """What prefixes the server's tools, prompts and resource URIs: None means its name; "" means
    nothing, the server's names are exposed as it has them (read `prefix`, which is always a str)."""
    enabled: bool = True
    required: bool = False
    timeout: float | None = None
    layer: Layer = "core"
    tags: tuple[str, ...] = ()
    sandbox: SandboxSettings | None = None
    risk: Risk | None = None
    tools: Mapping[str, ToolSettings] = field(default_factory=dict)
    scope: Scope = "shared"
    roots: tuple[str, ...] = ()
    """The `file://` URIs of the directories a shared server is given when it asks for roots,
    whoever calls it; a session's own instance gets its client's roots instead."""
    on_tool_change: OnToolChange | None = None
    """What a changed tool definition meets; None: the default of where the server is defined
    (`gateway.catalog.pinning`)."""
    oauth: OAuthSettings | None = None
    """Set when each caller reaches the server with their own OAuth grant, connected on the web page
    (`gateway.upstreams.grants`); None for a server reached as the gateway (its `headers`)."""
    registration: RegistrationPolicy | None = None
    """For a server registered through the admin API, the policy that judges its URL, and the
    addresses its host resolves to, at every connection; None for the config file's servers,
    which are the operator's and trusted."""

    def __post_init__(self) -> None:
        if self.namespace is None:
            object.__setattr__(self, "namespace", self.name)

    @property
    def prefix(self) -> str:
        """The namespace in effect: the configured one ("" for none), else the server's name."""
        return self.name if self.namespace is None else self.namespace

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
    max_sessions_per_caller: int = 64
    max_sessions: int = 10_000
    call_timeout: float = 60
    retries: int = 2
    max_result_chars: int = 8000
    max_binary_bytes: int = 1_048_576
    max_result_bytes: int = 4_194_304
    loop_window: int = 20
    loop_repeat_limit: int = 5
    disclosure: Disclosure = "call-through"
    skill_dirs: tuple[Path, ...] = ()
    skill_capacity: int = 3
    find_tools_model: str = "use-multilingual-v3"
    find_tools_endpoint: str | None = None
    max_extended_tools: int = 40
    allowed_origins: tuple[str, ...] = ()
    upstream_connect_timeout: float = 10
    first_listing_wait: float = 10
    restart_backoff_initial: float = 0.5
    restart_backoff_max: float = 30
    restart_backoff_reset: float = 60
    health_interval: float = 30
    unhealthy_after: int = 3
    notify_coalesce_ms: int = 200
    stdio_caller: str = "local"
    stdio_role: str | None = None
    sandbox_image: str = "mcp-gateway-sandbox:latest"
    sandbox_warm: int = 2
    sandbox_session_warm: int = 1
    code_mode: bool = False
    code_mode_deadline: float = 30
    http_json_responses: bool = False
    workspace_size: int = DEFAULT_WORKSPACE_SIZE
    workspace_retention: float = 86400
    max_workspace_bytes_per_caller: int = DEFAULT_WORKSPACE_BYTES_PER_CALLER
    max_workspace_bytes: int = DEFAULT_WORKSPACE_BYTES
    registry_namespace: str = "io.github.mcp-gateway"
    admin_without_auth: bool = False


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """A whole, validated configuration."""

    path: Path | None
    settings: GatewaySettings
    servers: tuple[ServerConfig, ...]
    local_tools: tuple[LocalToolConfig, ...] = ()
    policy: Policy = field(default_factory=Policy)
    """The `roles` section; without one every tool is visible."""
    auth: AuthSettings = field(default_factory=AuthSettings)
    groups: Mapping[str, Group] = field(default_factory=dict)
    """The `groups` section: named subsets of the catalog, each served at `/mcp/g/<name>`."""
    confirmation: ConfirmationSettings = field(default_factory=ConfirmationSettings)
    registration: RegistrationPolicy = field(default_factory=RegistrationPolicy)
    """What the admin API may register; by default nothing."""
    store: StoreSettings = field(default_factory=StoreSettings)
    """The `store` section: where the durable stores live (SQLite under `data_dir` by default) and
    the state replicas share (this process by default)."""
    secrets: Secrets = field(default_factory=Secrets)
    """The `secrets` section: values servers name as `${secret:NAME}`."""
    tracing: TracingSettings | None = None
    """The `tracing` section: where OpenTelemetry spans are exported; None (no section) traces nothing."""
    notes: tuple[str, ...] = ()
    """Remarks that do not stop the gateway but the operator should see (`check`, the log)."""
