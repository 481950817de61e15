"""Upstream server processes as the gateway's children: launched to die with it, leftovers ended at start-up.

Every stdio server runs under a watcher that kills the server's process group when the gateway dies,
even by SIGKILL: on Linux, util-linux `setpriv` and coreutils `timeout` (no Python of their own),
or `launcher.py` where either is missing (docs/decisions/0140). Each server carries
`MCP_GATEWAY_DATA_DIR` naming the gateway's data directory and `MCP_GATEWAY_OWNER` naming the
gateway process (`gateway.runtime.owners`). A gateway starting on that directory ends the processes
that still carry it and whose owner is gone: what a previous run left behind. Those of a gateway
still running on the same directory (another desktop window's) are its own business.
"""

from __future__ import annotations

import functools
import logging
import os
import select
import shlex
import shutil
import signal
import subprocess
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
# The gateway's death sends the watcher SIGALRM (PR_SET_PDEATHSIG, armed by `setpriv` and kept across
# its exec), which `timeout` answers as a time-out: SIGKILL to the server, then to its whole process
# group. With no time limit (`0`) it otherwise only waits, as the server's parent in the server's
# group, and exits as the server did; the SDK's SIGTERM to the group it passes on and stays.
_GATEWAY_GONE = "ALRM"


def server_parameters(config: ServerConfig, data_dir: Path) -> StdioServerParameters:
    """How the SDK starts `config`'s server: under its watcher, marked with the data directory and its owner."""
    assert config.command is not None
    env = {**config.env, MARKER: str(data_dir), OWNER: owners.own_token()}
    command, args = config.command, list(config.args)
    if sys.platform == "linux":  # PR_SET_PDEATHSIG is Linux's
        command, args = watched(os.getpid(), [command, *args])
    return StdioServerParameters(command=command, args=args, env=env, cwd=config.cwd)


def watched(gateway: int, command: list[str]) -> tuple[str, list[str]]:
    """`command` run under a watcher that kills its process group when process `gateway`, its parent, dies."""
    setpriv, timeout, shell = shutil.which("setpriv"), shutil.which("timeout"), shutil.which("sh")
    if setpriv is None or timeout is None or shell is None or not _watches(setpriv, timeout):
        return sys.executable, ["-I", "-S", str(LAUNCHER), str(gateway), *command]
    # The shell runs once the signal is armed: a gateway that died before has left it another parent,
    # and no signal will come, so it starts nothing.
    check = f'test "$PPID" = "$0" && exec {shlex.quote(timeout)} --signal=KILL 0 "$@"'
    return setpriv, ["--pdeathsig", _GATEWAY_GONE, "--", shell, "-c", check, str(gateway), *command]


@functools.cache
def _watches(setpriv: str, timeout: str) -> bool:
    """Whether `setpriv` arms the parent-death signal and `timeout` is GNU's, which kills its process
    group (BusyBox's has neither, and its `timeout` is the command's child, not its parent)."""
    try:
        probe = subprocess.run(
            [setpriv, "--pdeathsig", _GATEWAY_GONE, "--", timeout, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
    except OSError:
        return False
    return probe.returncode == 0 and b"GNU coreutils" in probe.stdout


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
