"""A stdio server for the live-changes benchmark (`python -m benchmarks.marker MARKS [--edition N]`).

Its one tool, `mark`, appends the call's id and the server's process id to the file MARKS before it
answers, so that a call that reached a server twice shows as its id written twice, and the answer
names the id and the process that ran it. `--edition` changes nothing but the command line: an
edit of it needs a new connection.
"""

from __future__ import annotations

import argparse
import os

from mcp.server import MCPServer


def main(argv: list[str] | None = None) -> None:
    """Serve `mark` over stdio, writing each call to the marks file."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.marker", description=__doc__)
    parser.add_argument("marks", help="the file each call's id and this process's id are appended to")
    parser.add_argument("--edition", default="1", help="ignored: a command line to edit")
    args = parser.parse_args(argv)
    # One write of one short line to a file opened for appending: lines of processes sharing the file never mix.
    marks = os.open(args.marks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    pid = os.getpid()
    server = MCPServer("marker")

    @server.tool(structured_output=False)
    async def mark(id: str) -> str:
        """Write `id` to the marks file and answer it with this process's id."""
        os.write(marks, f"{id} {pid}\n".encode())
        return f"{id} {pid}"

    server.run("stdio")


if __name__ == "__main__":
    main()
