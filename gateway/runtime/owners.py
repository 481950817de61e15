"""Which gateway process owns a child process or a container, and whether that process still runs.

Several gateways may serve from one data directory at once: a desktop client starts one `stdio`
gateway per window, and `serve` may run beside them. What a gateway starts (stdio servers,
sandbox containers) carries its owner token, the process id with the process's start time, so
that a gateway starting up ends only what a gateway that is gone left behind. The start time
tells a live owner from a new process that was given the same id after the owner died.
"""

from __future__ import annotations

import os
from functools import cache


@cache
def own_token() -> str:
    """This process's owner token: `<pid>:<start time in clock ticks since boot>`."""
    return token_of(os.getpid())


def token_of(pid: int) -> str:
    """The owner token of process `pid` (its start time empty where the system does not tell it)."""
    return f"{pid}:{_start_time(pid) or ''}"


def is_another_live_gateway(token: str) -> bool:
    """Whether `token` names a process other than this one that still runs: its id is in use by a
    process started at the same time. A token that cannot be read names no process. A gateway
    starting up has started nothing yet, so what carries this very process's token was left by an
    earlier gateway of the same process."""
    if token == own_token():
        return False
    pid_text, _, started = token.partition(":")
    if not pid_text.isdigit():
        return False
    pid = int(pid_text)
    current = _start_time(pid)
    if current is None:
        return _exists(pid) and not started
    return current == started


def _start_time(pid: int) -> str | None:
    # Field 22 of /proc/<pid>/stat; the command name before it may hold spaces and parentheses.
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            fields = file.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # A zombie has ended: what it owned is a leftover.
    return None if fields[0] == b"Z" else fields[19].decode()


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
