"""An upstream that outlives its client (run as `python -m tests.support.stubborn`).

It ignores SIGTERM and keeps running after its stdin closes, and so does the helper process it
starts; `family` answers both process ids, and a line on stderr says when the helper runs.
"""

from __future__ import annotations

import os
import signal
import sys

from mcp.server import MCPServer


def linger() -> None:
    """Wait for SIGKILL."""
    while True:
        signal.pause()


def main() -> None:
    """Start the helper, serve over stdio, and stay when the client goes."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    helper = os.fork()
    if helper == 0:
        linger()
    print(f"stubborn: helper {helper} started", file=sys.stderr, flush=True)
    server = MCPServer("stubborn")

    @server.tool(structured_output=False)
    async def family() -> str:
        """This server's process id and its helper's."""
        return f"{os.getpid()} {helper}"

    server.run("stdio")
    linger()


if __name__ == "__main__":
    main()
