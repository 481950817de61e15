"""The peers the benchmarks run beside the gateway: mcp-proxy and FastMCP's proxy, pinned, each in a
virtual environment of its own (their dependencies conflict with each other and with ours).

`ensure(peer)` creates the environment under `~/.cache/mcp-gateway/bench-peers/` (or
`$GATEWAY_BENCH_PEERS`) with `python -m venv` and installs the pinned version from PyPI with pip,
once; later runs reuse it. Each peer serves the same stdio echo server over streamable HTTP at `/mcp`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# FastMCP's proxy as its documentation builds one: a stdio backend, served over HTTP with JSON bodies.
FASTMCP_PROXY = """
import sys
from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy

port, python, cwd = int(sys.argv[1]), sys.argv[2], sys.argv[3]
proxy = create_proxy(StdioTransport(command=python, args=["-m", "servers.echo"], cwd=cwd), name="echo-proxy")
proxy.run(transport="http", host="127.0.0.1", port=port, json_response=True, show_banner=False, log_level="warning")
"""


@dataclass(frozen=True, slots=True)
class Peer:
    """A pinned peer: its PyPI requirement and whether it speaks the 2026-07-28 era."""

    name: str
    requirement: str
    modern: bool

    def command(self, environment: Path, port: int, repo: Path) -> list[str]:
        """The command serving the echo server (`python -m servers.echo` in `repo`) at port `port`."""
        python = str(environment / "bin" / "python")
        echo = [sys.executable, "-m", "servers.echo"]
        if self.name == "mcp-proxy":
            launcher = str(environment / "bin" / "mcp-proxy")
            return [launcher, "--port", str(port), "--log-level", "WARNING", "--cwd", str(repo), "--", *echo]
        return [python, "-c", FASTMCP_PROXY, str(port), sys.executable, str(repo)]


PEERS = (
    # mcp-proxy builds on mcp 1.x: the handshake era only.
    Peer("mcp-proxy", "mcp-proxy==0.13.0", modern=False),
    Peer("fastmcp", "fastmcp==4.1.6", modern=True),
)


def home() -> Path:
    """Where the peers' environments live."""
    configured = os.environ.get("GATEWAY_BENCH_PEERS")
    return Path(configured) if configured else Path.home() / ".cache" / "mcp-gateway" / "bench-peers"


def ensure(peer: Peer) -> Path:
    """The peer's virtual environment, created and installed on first use (needs PyPI then)."""
    environment = home() / peer.requirement.replace("==", "-")
    marker = environment / "installed"
    if marker.exists():
        return environment
    print(f"installing {peer.requirement} into {environment} (once)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(environment)], check=True)
    pip = [str(environment / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, peer.requirement], check=True)
    marker.write_text(peer.requirement + "\n")
    return environment
