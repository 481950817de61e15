"""An MCP server that runs Python snippets in child processes; it must only run inside a sandbox."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from typing import Annotated, TypedDict

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024
# Bounds the wait for a killed process group to be reaped; SIGKILL cannot be ignored.
REAP_TIMEOUT_SECONDS = 5.0


class RunResult(TypedDict):
    """How a snippet ended and what it printed (each stream capped, keeping its head)."""

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    stdout_cut_bytes: int
    stderr_cut_bytes: int


class _Capture:
    """Keeps the first `limit` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.cut = 0

    async def drain(self, stream: ByteReceiveStream) -> None:
        """Read the stream to its end, so the child never blocks on a full pipe."""
        async for chunk in stream:
            room = self.limit - len(self.head)
            self.head += chunk[:room]
            self.cut += max(len(chunk) - room, 0)

    def text(self) -> str:
        """The kept head as text, with a marker saying how much was cut."""
        text = self.head.decode("utf-8", errors="replace")
        return f"{text}\n[... {self.cut} more bytes cut]" if self.cut else text


async def _feed(stream: ByteSendStream, data: bytes) -> None:
    """Write stdin and close it; a child that exits without reading it is not an error."""
    try:
        async with stream:
            await stream.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, BrokenPipeError):
        pass


def _kill_group(pid: int) -> None:
    """SIGKILL the child's whole process group, grandchildren included."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _environment(workdir: str) -> dict[str, str]:
    """A small environment: the server's own variables (and any secrets in them) stay out of the child."""
    return {"PATH": os.environ.get("PATH", os.defpath), "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8"}


async def run_snippet(code: str, stdin: str | None, seconds: float, max_output_bytes: int) -> RunResult:
    """Run code with `python -I` in a fresh temporary directory, killing its process group at the deadline."""
    stdout, stderr = _Capture(max_output_bytes), _Capture(max_output_bytes)
    with tempfile.TemporaryDirectory(prefix="run-python-", ignore_cleanup_errors=True) as workdir:
        script = anyio.Path(workdir, "snippet.py")
        await script.write_text(code, encoding="utf-8")
        process = await anyio.open_process(
            [sys.executable, "-I", script.name],
            cwd=workdir,
            env=_environment(workdir),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            with anyio.move_on_after(seconds) as deadline:
                async with anyio.create_task_group() as group:
                    assert process.stdout is not None and process.stderr is not None
                    group.start_soon(stdout.drain, process.stdout)
                    group.start_soon(stderr.drain, process.stderr)
                    if process.stdin is not None and stdin is not None:
                        group.start_soon(_feed, process.stdin, stdin.encode("utf-8"))
                    await process.wait()
                    # Leftover grandchildren would hold the pipes open; nothing outlives the call.
                    _kill_group(process.pid)
        finally:
            _kill_group(process.pid)
            with anyio.CancelScope(shield=True), anyio.move_on_after(REAP_TIMEOUT_SECONDS):
                await process.aclose()
    return {
        "stdout": stdout.text(),
        "stderr": stderr.text(),
        "exit_code": process.returncode,
        "timed_out": deadline.cancelled_caught,
        "stdout_cut_bytes": stdout.cut,
        "stderr_cut_bytes": stderr.cut,
    }


def render(result: RunResult, timeout: float) -> str:
    """A short text rendering: how it ended, then each non-empty stream."""
    code = result["exit_code"]
    if result["timed_out"]:
        parts = [f"timed out after {timeout:g} s; the process group was killed"]
    elif code is not None and code < 0:
        cause = " (out of memory or another limit)" if -code == signal.SIGKILL else ""
        parts = [f"killed by signal {signal.strsignal(-code) or -code}{cause}"]
    else:
        parts = [f"exit code {code}"]
    if result["stdout"]:
        parts.append(f"--- stdout ---\n{result['stdout']}")
    if result["stderr"]:
        parts.append(f"--- stderr ---\n{result['stderr']}")
    return "\n".join(parts)


def build_server(
    timeout: float = DEFAULT_TIMEOUT_SECONDS, max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
) -> MCPServer:
    """Build the Python runner; timeout is both the default and the most a call may ask for."""
    most_seconds = timeout
    server = MCPServer(
        "python",
        instructions="Runs Python snippets in a child process. Only for use inside a sandboxed container.",
    )

    @server.tool(
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
        ),
        description=(
            "Run a Python snippet in a fresh child process (isolated mode, empty temporary working "
            "directory) and return its stdout, stderr and exit code. Print what you want to see. "
            f"Output is capped at {max_output_bytes} bytes per stream; the run is killed after "
            f"{timeout:g} s. It runs arbitrary code: this server must only run inside a sandbox "
            "(a hardened container), never directly on a host."
        ),
    )
    async def run_python(
        code: Annotated[str, Field(description="Python source to run as a script")],
        stdin: Annotated[str | None, Field(description="text given to the snippet on standard input")] = None,
        # The argument name is part of the published tool interface, hence the noqa.
        timeout: Annotated[  # noqa: ASYNC109
            float | None, Field(gt=0, description="seconds before the run is killed")
        ] = None,
    ) -> Annotated[CallToolResult, RunResult]:
        limit = most_seconds if timeout is None else timeout
        if limit > most_seconds:
            raise ToolError(f"timeout {limit:g} s is over this server's limit of {most_seconds:g} s")
        result = await run_snippet(code, stdin, limit, max_output_bytes)
        return CallToolResult(
            content=[TextContent(type="text", text=render(result, limit))], structured_content=dict(result)
        )

    return server


def main(argv: list[str] | None = None) -> None:
    """Run the Python runner over stdio."""
    parser = argparse.ArgumentParser(prog="python -m servers.python", description=__doc__)
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS, help="most seconds per run")
    parser.add_argument(
        "--max-output-bytes", type=int, default=DEFAULT_MAX_OUTPUT_BYTES, help="bytes kept per output stream"
    )
    args = parser.parse_args(argv)
    build_server(args.timeout, args.max_output_bytes).run("stdio")


if __name__ == "__main__":
    main()
