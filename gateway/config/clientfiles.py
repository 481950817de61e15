"""Clients' server files (Claude Desktop / Cursor `mcpServers`, VS Code `servers`) in the gateway's own
shape, and the snippet of each client's file that points it at the gateway."""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from gateway.problems import NAME_PATTERN, Problem

CLIENT_DATA_DIR = "${GATEWAY_DATA_DIR:-~/.local/share/mcp-gateway}"

_CLIENT_TRANSPORTS = {
    "stdio": "stdio",
    "sse": "sse",
    "http": "http",
    "streamable-http": "http",
    "streamableHttp": "http",
}


def detect_format(data: Mapping[str, Any]) -> str:
    """Which schema definition the file follows, judged by its top-level keys."""
    if "mcpServers" in data:
        return "mcpServersFile"
    servers = data.get("servers")
    typed = isinstance(servers, dict) and any(isinstance(s, dict) and "type" in s for s in servers.values())
    if "inputs" in data or (set(data) == {"servers"} and typed):
        return "vscodeFile"
    return "gateway"


def from_client_file(
    data: Mapping[str, Any], kind: str, problems: list[Problem], renames: dict[str, str]
) -> dict[str, Any]:
    """A client's file (mcpServers or VS Code servers) rewritten in the gateway's own shape.

    Clients allow any server name; a name unfit to prefix tool names is given a fitting one
    (recorded in `renames`, new name -> original). `namespace`, the gateway's own key, is kept
    (`""` exposes the server's names as it has them); clients ignore keys they do not know.
    """
    key = "mcpServers" if kind == "mcpServersFile" else "servers"
    servers: dict[str, Any] = {}
    taken = {name for name in data[key] if NAME_PATTERN.fullmatch(name)}
    for original, entry in data[key].items():
        name = original
        if original not in taken:
            name = fitting_name(original, taken)
            taken.add(name)
            renames[name] = original
        kept = ("command", "args", "env", "cwd", "headers", "timeout", "namespace")
        server = {k: entry[k] for k in kept if k in entry}
        if (url := entry.get("url", entry.get("serverUrl"))) is not None:
            server["url"] = url
        if (transport := entry.get("type", entry.get("transportType"))) is not None:
            server["transport"] = _CLIENT_TRANSPORTS[transport]
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


def fitting_name(original: str, taken: set[str]) -> str:
    """`original` reduced to a valid server name; a hash of it is added if that name is taken."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", original).strip("_")[:32] or "server"
    if name in taken:
        # surrogatepass: a JSON file may name a server with a lone surrogate ("\ud800").
        digest = hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        name = f"{name[:23]}_{digest}"
    return name


CLIENTS = ("claude-desktop", "claude-code", "vscode", "cursor")
"""The clients `client-config` writes a snippet for."""
KEY_VARIABLE = "GATEWAY_API_KEY"
"""The environment variable a client's snippet reads the gateway's API key (or token) from."""
KEY_INPUT = "gateway-api-key"
# How each client's file names the key without holding it: VS Code prompts for an input once and
# stores it encrypted, Claude Code and Cursor expand an environment variable of the client's.
_KEY_REFERENCES = {
    "claude-code": f"${{{KEY_VARIABLE}}}",
    "cursor": f"${{env:{KEY_VARIABLE}}}",
    "vscode": f"${{input:{KEY_INPUT}}}",
}


def client_snippet(
    client: str, name: str, *, url: str | None = None, command: Sequence[str] = (), authorized: bool = False
) -> dict[str, Any]:
    """The fragment of `client`'s configuration file that adds the server `name`: the HTTP endpoint
    `url`, or else the stdio `command` (executable, then arguments). Read back by `from_client_file`.

    `authorized`: the endpoint needs a credential; the snippet sends `Authorization: Bearer` with a
    reference the client fills in (never the key itself): see `_KEY_REFERENCES`."""
    inputs: list[dict[str, Any]] = []
    if url is not None:
        server: dict[str, Any] = {"url": url} if client == "cursor" else {"type": "http", "url": url}
        if authorized:
            server["headers"] = {"Authorization": f"Bearer {_KEY_REFERENCES[client]}"}
            if client == "vscode":
                inputs.append(
                    {"type": "promptString", "id": KEY_INPUT, "description": "MCP gateway API key", "password": True}
                )
    else:
        server = {"command": command[0], "args": list(command[1:])}
        if client == "vscode":
            server = {"type": "stdio", **server}
    snippet: dict[str, Any] = {"inputs": inputs} if inputs else {}
    return {**snippet, "servers" if client == "vscode" else "mcpServers": {name: server}}


def stdio_command(config: Path | None, caller: str | None = None, role: str | None = None) -> list[str]:
    """The command that launches this gateway over stdio on `config` (None: the embedded defaults),
    as `caller` with `role` when given: with roles, a client without one sees only the meta-tools."""
    command = [sys.executable, "-m", "gateway", "stdio"]
    command += ["--config", str(config)] if config is not None else []
    command += ["--caller", caller] if caller is not None else []
    return command + (["--role", role] if role is not None else [])


def endpoint_path(group: str | None) -> str:
    """The path of the gateway's MCP endpoint (`/mcp`), or of tool group `group`'s."""
    return "/mcp" if group is None else f"/mcp/g/{quote(group, safe='')}"


def gateway_snippet(
    client: str,
    group: str | None,
    *,
    base_url: str | None = None,
    stdio_command: Sequence[str] = (),
    authorized: bool = False,
) -> dict[str, Any]:
    """The snippet connecting `client` to the gateway (or group `group`): its HTTP endpoint under
    `base_url` (with a credential when `authorized`), or without one the stdio `stdio_command` that
    launches it (`--group` added)."""
    name = "gateway" if group is None else f"gateway-{group}"
    if base_url is None:
        command = [*stdio_command, *(("--group", group) if group is not None else ())]
        return client_snippet(client, name, command=command)
    return client_snippet(client, name, url=base_url.rstrip("/") + endpoint_path(group), authorized=authorized)
