"""Runs one upstream server so that it dies with the gateway, even a gateway killed with SIGKILL.

Run by path, standard library only: `python -I -S launcher.py GATEWAY_PID COMMAND [ARGS...]`, as
the leader of a process group of its own (the SDK starts stdio servers in a new session). The
kernel sends the launcher a signal when the gateway dies (PR_SET_PDEATHSIG); it then kills its
whole group: the server and whatever the server started that stayed in the group.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from types import FrameType

_PR_SET_PDEATHSIG = 1
# A signal of our own to catch: the server itself never sees it, the launcher answers it for the group.
_GATEWAY_GONE = signal.SIGHUP


def main(argv: list[str]) -> int:
    """Watch the gateway, run the command as a child, and exit as the child did."""
    gateway, command = int(argv[0]), argv[1:]
    if os.getpgrp() != os.getpid():
        os.setpgid(0, 0)  # never kill the gateway's own group below
    signal.signal(_GATEWAY_GONE, _end_group)
    # The SDK stops a server by signalling the group: the launcher stays to watch until its child exits.
    signal.signal(signal.SIGTERM, _keep_watching)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(_GATEWAY_GONE), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    # The gateway may have died before the kernel was told to watch it: then no signal will come.
    if os.getppid() != gateway:
        _end_group(_GATEWAY_GONE, None)
    child = os.fork()
    if child == 0:
        try:
            os.execvp(command[0], command)
        except OSError as error:
            print(f"cannot run {command[0]!r}: {error.strerror}", file=sys.stderr, flush=True)
        os._exit(127)
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def _end_group(signum: int, frame: FrameType | None) -> None:
    os.killpg(0, signal.SIGKILL)


def _keep_watching(signum: int, frame: FrameType | None) -> None:
    pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
