"""Upstream server processes as the gateway's children: launched to die with it, leftovers ended at start-up.

Every stdio server runs under `launcher.py`, which kills the server's process group when the gateway
dies, and carries `MCP_GATEWAY_DATA_DIR` naming the gateway's data directory and `MCP_GATEWAY_OWNER`
naming the gateway process (`gateway.runtime.owners`). A gateway starting on that directory ends the
processes that still carry it and whose owner is gone: what a previous run left behind. Those of a
gateway still running on the same directory (another desktop window's) are its own business.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import sys
import time
from contextlib import suppress
from pathlib import Path

from mcp.client.stdio import StdioServerParameters

from gateway.config.model import ServerConfig
from gateway.runtime import owners

log = logging.getLogger(__name__)

MARKER = "MCP_GATEWAY_DATA_DIR"
OWNER = "MCP_GATEWAY_OWNER"
LAUNCHER = Path(__file__).with_name("launcher.py")


def server_parameters(config: ServerConfig, data_dir: Path) -> StdioServerParameters:
    """How the SDK starts `config`'s server: under the launcher, marked with the data directory and its owner."""
    assert config.command is not None
    env = {**config.env, MARKER: str(data_dir), OWNER: owners.own_token()}
    command, args = config.command, list(config.args)
    if sys.platform == "linux":  # PR_SET_PDEATHSIG is Linux's
        command, args = sys.executable, ["-I", "-S", str(LAUNCHER), str(os.getpid()), command, *args]
    return StdioServerParameters(command=command, args=args, env=env, cwd=config.cwd)


def end_leftovers(data_dir: Path, grace: float = 5.0) -> int:
    """End every process marked with `data_dir` whose gateway is gone: SIGTERM, SIGKILL after
    `grace` seconds; return how many."""
    entry = f"{MARKER}={data_dir}".encode()
    found: list[int] = []
    try:
        for pid in _other_pids():
            try:
                descriptor = os.pidfd_open(pid)
            except OSError:
                continue
            # Read after opening: a matching environment then proves the descriptor holds that very
            # process, not another one given the same pid since the listing.
            environment = _environment(pid)
            if entry in environment and not _owner_alive(environment):
                found.append(descriptor)
            else:
                os.close(descriptor)
        for descriptor in found:
            _send(descriptor, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for descriptor in found:
            if not _exits_within(descriptor, deadline - time.monotonic()):
                _send(descriptor, signal.SIGKILL)
    finally:
        for descriptor in found:
            os.close(descriptor)
    if found:
        log.warning("ended %d upstream process(es) left running by a previous gateway on %s", len(found), data_dir)
    return len(found)


def _owner_alive(environment: list[bytes]) -> bool:
    prefix = f"{OWNER}=".encode()
    # A process marked without an owner was started before owners were recorded: a leftover.
    tokens = [item[len(prefix) :].decode("ascii", "replace") for item in environment if item.startswith(prefix)]
    return any(owners.is_another_live_gateway(token) for token in tokens)


def _other_pids() -> list[int]:
    if sys.platform != "linux":  # pidfds are Linux's
        return []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    own = os.getpid()
    return [int(name) for name in names if name.isdigit() and int(name) != own]


def _environment(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            return file.read().split(b"\0")
    except OSError:  # gone, or another user's
        return []


def _send(descriptor: int, signum: int) -> None:
    with suppress(ProcessLookupError):
        signal.pidfd_send_signal(descriptor, signum)


def _exits_within(descriptor: int, seconds: float) -> bool:
    poller = select.poll()
    poller.register(descriptor, select.POLLIN)
    return bool(poller.poll(max(0, int(seconds * 1000))))
