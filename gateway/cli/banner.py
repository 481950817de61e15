"""What `serve` tells the person who started it: where it serves, then how many servers came up."""

from __future__ import annotations

from collections.abc import Iterable

from gateway.upstreams.connection import State, Status


def base_url(host: str, port: int) -> str:
    """The URL a person on this machine opens for a gateway listening on `host` and `port`."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "[::1]"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _enabled(statuses: Iterable[Status]) -> list[Status]:
    return [status for status in statuses if status.enabled]


def serving(url: str, statuses: Iterable[Status]) -> str:
    """The banner: the MCP endpoint, the web page, and the servers ready so far."""
    servers = _enabled(statuses)
    ready = sum(status.state == State.READY for status in servers)
    waiting = ", the others connecting" if ready < len(servers) else ""
    return f"Serving MCP at {url}/mcp and the web page at {url}/ ({ready}/{len(servers)} servers ready{waiting})"


def settled(statuses: Iterable[Status]) -> str:
    """The line once every server has connected or failed: how many are ready, which failed."""
    servers = _enabled(statuses)
    ready = sum(status.state == State.READY for status in servers)
    failed = [status.name for status in servers if status.state != State.READY]
    line = f"{ready}/{len(servers)} servers ready"
    if failed:
        line += f"; not ready: {', '.join(failed)} (their errors: /readyz as an admin, `check`, the log)"
    return line
