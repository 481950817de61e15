"""An upstream that gives its credential away whenever it fails (run as `python -m tests.support.leaky`).

Its key comes from `LEAKY_API_KEY`. `complain` fails quoting the key; `break_down` prints the key on
stderr and exits, and from then on (while the file `LEAKY_BROKEN` names exists) every start does the same.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.server import MCPServer


def main() -> None:
    """Serve over stdio, or refuse to start, printing the key, once broken."""
    key = os.environ["LEAKY_API_KEY"]
    broken = Path(os.environ["LEAKY_BROKEN"])
    if broken.exists():
        print(f"login refused for api key {key}", file=sys.stderr, flush=True)
        raise SystemExit(1)
    server = MCPServer("leaky")

    @server.tool(structured_output=False)
    async def lookup(query: str) -> str:
        """Look something up."""
        return f"found {query}"

    @server.tool(structured_output=False)
    async def complain() -> str:
        """Fail, quoting the key."""
        raise ValueError(f"the service rejected api key {key}")

    @server.tool(structured_output=False)
    async def break_down() -> str:
        """Print the key on stderr and exit; later starts fail the same way."""
        await anyio.Path(broken).touch()
        print(f"fatal: session lost for api key {key}", file=sys.stderr, flush=True)
        os._exit(1)

    server.run("stdio")


if __name__ == "__main__":
    main()
