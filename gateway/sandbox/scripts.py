"""Code mode's channel, the gateway's side: one script run in a sandbox container, its tool calls
answered over the container's attached stdin/stdout (see `gateway.sandbox.scriptrunner`).

The container's side is untrusted: each line out is parsed as a `call` (handed to `on_call`, whose
answer goes back as one line) or as `done`; anything else ends the run as a failure. Nothing else
crosses the channel, so a script can call tools and nothing more.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketStream

from gateway.errors import ToolExecutionError, ToolTimeoutError
from gateway.sandbox.containers import STDOUT, FrameDecoder, SandboxContainer
from gateway.skills.codemode import OnCall, ScriptOutcome

RUNNER = Path(__file__).with_name("scriptrunner.py")
"""The runner's source, handed to the image's `python3 -c`."""
# A call line carries arguments and a done line the printed output: room for both, JSON-escaped.
_LINE_CAP_FACTOR = 8


@functools.cache
def runner_command() -> tuple[str, ...]:
    """The container's command: the image's Python running the runner's source."""
    return ("python3", "-c", RUNNER.read_text())


async def run_script(
    handle: SandboxContainer,
    start: Mapping[str, Any],
    deadline: float,
    max_output: int,
    on_call: OnCall,
) -> ScriptOutcome:
    """Send `start` to the runner in `handle`'s container and serve its calls until `done`, at most
    `deadline` seconds in all; the container is left for the caller to dispose of."""
    stream = await SocketStream.from_socket(handle.socket.dup())
    calls = 0
    cap = _LINE_CAP_FACTOR * max_output + 64 * 1024
    async with stream:
        with anyio.move_on_after(deadline) as scope:
            await stream.send(json.dumps(start, separators=(",", ":")).encode() + b"\n")
            decoder, line = FrameDecoder(), bytearray()
            while True:
                try:
                    data = await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    raise ToolExecutionError(
                        "The script's process ended without a result: it was killed, most likely by the "
                        "sandbox's memory or process limit",
                        hint="Use less memory or fewer processes, or split the work into smaller scripts.",
                    ) from None
                for kind, payload in decoder.feed(data):
                    if kind != STDOUT:
                        continue
                    line += payload
                    while (end := line.find(b"\n")) >= 0:
                        message, line = _parse(bytes(line[:end])), line[end + 1 :]
                        if message.get("done") is True:
                            return _outcome(message, calls)
                        calls += 1
                        reply = await on_call(str(message.get("tool", "")), _arguments(message))
                        await stream.send(json.dumps(reply, separators=(",", ":")).encode() + b"\n")
                    if len(line) > cap:
                        raise ToolExecutionError(f"The script sent a message over {cap} bytes to the gateway")
    assert scope.cancelled_caught
    raise ToolTimeoutError(
        f"The script ran past its {deadline:g} s deadline and was stopped after {calls} tool calls",
        hint="Make the script do less per run, or narrow what its tool calls ask for.",
    )


def _parse(line: bytes) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except ValueError:
        message = None
    if not isinstance(message, dict) or not ("done" in message or "call" in message):
        raise ToolExecutionError("The script's runner sent something the gateway does not understand")
    return message


def _arguments(message: Mapping[str, Any]) -> dict[str, Any]:
    arguments = message.get("arguments")
    return arguments if isinstance(arguments, dict) else {}


def _outcome(message: Mapping[str, Any], calls: int) -> ScriptOutcome:
    error = message.get("error")
    return ScriptOutcome(
        output=str(message.get("output", "")),
        value=message.get("value"),
        error=str(error) if error is not None else None,
        message=str(message.get("message", "")),
        cut=bool(message.get("cut", False)),
        calls=calls,
    )
