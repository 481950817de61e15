"""The client side's one seam to the `mcp` SDK's internals: every private name of the SDK that the
upstream side uses is used here, and nowhere else (`tests/test_sdk_seam.py` fails otherwise).

Each use says what it buys, the public API that would replace it (proposed upstream in
docs/sdk-seam.md), and when to remove it. `SDK_PRIVATE` lists the names with the signature each is
used with; the same test checks them against the installed SDK, so a release that moves or
changes one fails there, by name, before anything runs against it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, TextIO

import mcp_types as types
from anyio.abc import Process
from mcp.client.session import ClientSession, _later_revision_fields
from mcp.client.stdio import (
    _create_platform_compatible_process,
    _drain_stdout,
    _get_executable_command,
    _stop_server_process,
)
from mcp.shared.dispatcher import CallOptions

SDK_PRIVATE: Final[Mapping[str, str]] = {
    # A function or method: its parameters and return as the SDK's source writes them; an
    # attribute: its annotation there, or "attribute" where it has none.
    "mcp.client.stdio:_get_executable_command": "(command: str) -> str",
    "mcp.client.stdio:_create_platform_compatible_process": (
        "(command: str, args: list[str], env: dict[str, str] | None=None, errlog: TextIO=sys.stderr, "
        "cwd: Path | str | None=None) -> ServerProcess"
    ),
    "mcp.client.stdio:_drain_stdout": "(process: ServerProcess) -> None",
    "mcp.client.stdio:_stop_server_process": "(process: ServerProcess) -> None",
    "mcp.client.session:_later_revision_fields": "(method: str, version: str) -> frozenset[str]",
    "mcp.client.session:ClientSession._stamp": "Callable[[dict[str, Any], CallOptions], None]",
    "mcp.client.session:ClientSession._dispatcher": "Dispatcher[Any]",
    "mcp.client.session:ClientSession._intercept_notification": (
        "(self, method: str, params: Mapping[str, Any] | None) -> bool"
    ),
}

Intercept = Callable[[str, Mapping[str, Any] | None], bool]
"""Takes a notification in the order it arrived, before any response after it; True consumes it."""


async def executable_command(command: str) -> str:
    """`command` as the SDK's `stdio_client` runs it (on Windows, resolved to an executable).

    Buys: the stdio transport (`gateway.upstreams.stdio`) starts a server exactly as the SDK's would.
    That transport is the gateway's own for two gains: messages framed in linear time and capped
    in size (a 20 MB result cost the SDK's reader 2.4 s of the event loop's 2.8 s, every session
    waiting), and the pipe tap of direct calls (`gateway.upstreams.directcalls`).
    Public replacement: `stdio_client` with a linear-time reader and a message cap, or the SDK's
    spawn and stop helpers made public. Remove when both gains are the SDK's, or the stdio
    transport is dropped.
    """
    return await _get_executable_command(command)


async def open_server_process(
    command: str, args: list[str], env: dict[str, str], errlog: TextIO, cwd: str | Path | None
) -> Process:
    """The server's process started as the SDK starts it: its own process group (a Job Object on
    Windows), pipes for stdin and stdout. Linux uses `gateway.upstreams.spawn` instead (vfork and a
    pidfd); this is the other platforms' way.

    Buys, public replacement and removal: as `executable_command`.
    """
    process = await _create_platform_compatible_process(command=command, args=args, env=env, errlog=errlog, cwd=cwd)
    assert isinstance(process, Process)  # a Windows fallback process has no place on the platforms we serve
    return process


async def drain_stdout(process: Process) -> None:
    """Read and drop what the server still writes, so that a server flushing its output at exit is
    not blocked on a full pipe (the SDK's shutdown, shielded).

    Buys, public replacement and removal: as `executable_command`.
    """
    await _drain_stdout(process)


async def stop_server_process(process: Process) -> None:
    """Stop the server as the SDK does, following the specification's shutdown: close its stdin,
    wait out the grace period, end its whole process group, reap it.

    Buys, public replacement and removal: as `executable_command`; the escalation's timing stays
    the SDK's policy rather than a copy of it.
    """
    await _stop_server_process(process)


def later_revision_fields(method: str, version: str) -> frozenset[str]:
    """The result fields of revisions later than `version` for `method`, which the SDK drops from a
    result before it parses it (the version-free result types would otherwise judge them by the
    later revision's rules).

    Buys: a direct call's result is parsed exactly as the SDK's `send_request` parses it
    (`gateway.upstreams.directcalls.ResultParser`), which lets a plain call to a stdio server
    skip the SDK's client session: 0.18 ms of the gateway's CPU a call (docs/decisions/0013).
    Public replacement: a public function that checks a raw result as `send_request` does, or
    `send_request` with a raw result type (docs/sdk-seam.md). Remove when direct calls go.
    """
    return _later_revision_fields(method, version)


async def send_as_is(session: ClientSession, request: types.Request[Any, Any]) -> dict[str, Any]:
    """Send `request` on `session`, stamped as the session stamps every request (its protocol
    version header and `_meta`); the answer's result as the server sent it, unchecked.

    Buys: what `send_request` cannot do, since it checks every answer against the result type of
    its method: task-augmented calls and `tasks/*` (2025-11-25), which the SDK sends none of, and
    `tools/list` read as JSON (thousands of models built and dropped per listing of 2,000 tools;
    `gateway.upstreams.listing`). The SDK's own `mcp.client.subscriptions` reaches past
    `send_request` the same way. Public replacement: `send_request` with a raw result type
    (docs/sdk-seam.md). Remove when the SDK has it.
    """
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    options: CallOptions = {}
    session._stamp(data, options)
    answer: dict[str, Any] = await session._dispatcher.send_raw_request(data["method"], data.get("params"), options)
    return answer


class InterceptingSession(ClientSession):
    """The SDK's client session, with `intercept` seeing each notification in the order it arrived.

    Buys: a server's log messages reach the client of the call they belong to before that call's
    answer (a 2026-era call carries them on its own stream, docs/decisions/0061). The SDK handles
    each notification in a task of its own and resolves the answer at once, so a message sent just
    before the answer would otherwise arrive after it. `_intercept_notification` is the hook the
    dispatcher runs synchronously in wire order, before it resolves a response read after the
    message (the SDK's own `subscriptions/listen` bookkeeping uses it). Public replacement: a
    notification hook run in wire order (docs/sdk-seam.md). Remove when the SDK has one.
    """

    def __init__(self, *args: Any, intercept: Intercept | None = None, **options: Any) -> None:
        super().__init__(*args, **options)
        self._gateway_intercept = intercept

    def _intercept_notification(self, method: str, params: Mapping[str, Any] | None) -> bool:
        intercept = self._gateway_intercept
        if intercept is not None and intercept(method, params):
            return True
        return super()._intercept_notification(method, params)
