"""Starting a stdio server without forking the gateway: `subprocess` spawns with vfork, uvloop forks.

Under uvloop, `anyio.open_process` goes through libuv, which forks the whole gateway (about 100
MB): measured per spawn from a 97 MB process, 2.1 ms of the gateway's CPU and 3.1 ms of the
child's (copying, then dropping, the page tables). CPython's `subprocess` uses vfork when no
`preexec_fn` is given: 0.23 ms and 0.5 ms. Either way the event loop waits until the child has
executed its command. The process is then watched with a pidfd and its pipes are read and written
without blocking, so the rest (the SDK's stop and drain helpers included) sees an ordinary
`anyio.abc.Process`. Linux only (pidfds).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from signal import Signals
from typing import TextIO

import anyio
import anyio.lowlevel
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

_CHUNK = 65536


def spawn(command: Sequence[str], env: Mapping[str, str], errlog: TextIO, cwd: str | Path | None) -> PipedProcess:
    """Run `command` in a new session (its own process group), stdin and stdout piped, stderr to `errlog`."""
    server_in, to_server = os.pipe2(os.O_CLOEXEC)
    from_server, server_out = os.pipe2(os.O_CLOEXEC)
    try:
        popen = subprocess.Popen(
            list(command),
            stdin=server_in,
            stdout=server_out,
            stderr=errlog,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    except BaseException:
        os.close(to_server)
        os.close(from_server)
        raise
    finally:
        os.close(server_in)
        os.close(server_out)
    return PipedProcess(popen, to_server, from_server)


class PipedProcess(Process):
    """A spawned child as anyio sees a process: its exit awaited on a pidfd, its pipes non-blocking."""

    def __init__(self, popen: subprocess.Popen[bytes], stdin: int, stdout: int) -> None:
        self._popen = popen
        self._stdin = PipeWriter(stdin)
        self._stdout = PipeReader(stdout)

    async def wait(self) -> int:
        """Wait until the process exits; its exit code (negative: the signal that ended it)."""
        while (code := self._popen.poll()) is None:
            try:
                descriptor = os.pidfd_open(self._popen.pid)
            except ProcessLookupError:  # reaped since the poll: the next poll has its code
                continue
            try:
                await anyio.wait_readable(descriptor)
            finally:
                os.close(descriptor)
        return code

    def terminate(self) -> None:
        """Send SIGTERM (nothing once the process has been reaped)."""
        self._popen.terminate()

    def kill(self) -> None:
        """Send SIGKILL (nothing once the process has been reaped)."""
        self._popen.kill()

    def send_signal(self, signal: Signals) -> None:
        """Send `signal` (nothing once the process has been reaped)."""
        self._popen.send_signal(signal)

    @property
    def pid(self) -> int:
        """The process id, which is also its process group's."""
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        """The exit code once the process has exited (reaping it), else None."""
        return self._popen.poll()

    @property
    def stdin(self) -> PipeWriter:
        """The server's standard input."""
        return self._stdin

    @property
    def stdout(self) -> PipeReader:
        """The server's standard output."""
        return self._stdout

    @property
    def stderr(self) -> None:
        """Not piped: stderr goes to the error log given at the spawn."""
        return None

    async def aclose(self) -> None:
        """Close both pipes and wait for the process to exit."""
        await self._stdin.aclose()
        await self._stdout.aclose()
        await self.wait()


class _Pipe:
    """One non-blocking pipe end, closed once: a task waiting on it wakes with `ClosedResourceError`."""

    def __init__(self, descriptor: int) -> None:
        os.set_blocking(descriptor, False)
        self._descriptor: int | None = descriptor

    def _open(self) -> int:
        if self._descriptor is None:
            raise anyio.ClosedResourceError
        return self._descriptor

    async def aclose(self) -> None:
        """Close the pipe end (again: nothing)."""
        if self._descriptor is not None:
            descriptor, self._descriptor = self._descriptor, None
            anyio.notify_closing(descriptor)
            os.close(descriptor)
        await anyio.lowlevel.checkpoint()


class PipeReader(_Pipe, ByteReceiveStream):
    """The read end of a pipe as an anyio byte stream."""

    async def receive(self, max_bytes: int = _CHUNK) -> bytes:
        """The next bytes; `EndOfStream` once the writer has closed its end.

        The checkpoint comes before the read: a reader that has just handed on an answer lets the
        task it woke run before it looks for more, and waits for the pipe after that task.
        """
        await anyio.lowlevel.checkpoint()
        while True:
            try:
                data = os.read(self._open(), max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._open())
                continue
            if not data:
                raise anyio.EndOfStream
            return data


class PipeWriter(_Pipe, ByteSendStream):
    """The write end of a pipe as an anyio byte stream."""

    async def send(self, item: bytes) -> None:
        """Write all of `item`; `BrokenResourceError` once the reader has gone.

        Only a full pipe makes it wait: a write the pipe takes at once is no checkpoint, since every
        writer awaits next anyway (a call the answer, the writer task its next message). The
        checkpoint it was cost a trip round the event loop per call.
        """
        view = memoryview(item)
        while view:
            try:
                written = os.write(self._open(), view)
            except BlockingIOError:
                await anyio.wait_writable(self._open())
                continue
            except BrokenPipeError as error:
                raise anyio.BrokenResourceError from error
            view = view[written:]

    async def send_eof(self) -> None:
        """Close the pipe end: the reader sees the end of its input."""
        await self.aclose()
