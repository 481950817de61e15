"""Execution under a deadline: timeouts, retries of safe calls, and translation of stray exceptions."""

from __future__ import annotations

import anyio
import mcp_types as types

from gateway.errors import (
    ToolError,
    ToolExecutionError,
    ToolTimeoutError,
    UpstreamRestartingError,
    UpstreamUnavailableError,
    describe_error,
)
from gateway.pipeline.chain import CallNext, ToolCall
from gateway.runtime import tracing

# What a lost connection looks like from below: our own error, anyio's stream errors, socket errors.
_TRANSPORT_ERRORS = (UpstreamUnavailableError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


class ExecuteWithDeadline:
    """Pipeline step: run the rest of the chain under the tool's deadline.

    The deadline (`tool.timeout`, else `default_timeout`) covers every attempt, because the
    client waits for one answer. Transport failures are retried up to `retries` times, with
    a doubling `backoff`, only for tools that declare themselves read-only or idempotent: a
    write may have taken effect before the connection broke. A call to a restarting server
    waits for it in its source (`Upstream`), within this deadline; when that gives up, the
    answer says when to retry, and no retry follows. Any other exception becomes a
    `ToolExecutionError` carrying its type and text, never a traceback. Cancellation from
    outside is not an exception to translate and propagates untouched.
    """

    def __init__(self, default_timeout: float, retries: int, backoff: float = 0.1) -> None:
        self._default_timeout = default_timeout
        self._retries = retries
        self._backoff = backoff

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        """Run `call_next(call)` with deadline, retries and error translation."""
        limit = call.tool.timeout or self._default_timeout
        try:
            with tracing.span("execute", {"gateway.source": call.tool.source}):
                # A bare cancel scope, not `anyio.fail_after` (the same scope inside two generator context
                # managers): nothing else cancels it, so leaving it without a result means its deadline passed.
                with anyio.CancelScope(deadline=anyio.current_time() + limit):
                    return await self._attempts(call, call_next)
                raise TimeoutError
        except TimeoutError:
            raise ToolTimeoutError(
                f"Tool '{call.tool.name}' did not finish within {limit:g} s and was abandoned"
            ) from None

    async def _attempts(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        retries = self._retries if call.tool.idempotent else 0
        attempt = 0
        while True:
            try:
                return await call_next(call)
            except UpstreamRestartingError:
                raise  # the source already waited for the restart until the deadline
            except _TRANSPORT_ERRORS as error:
                if attempt >= retries:
                    raise _unavailable(call, error) from None
            except ToolError:
                raise
            except Exception as error:
                raise ToolExecutionError(f"Tool '{call.tool.name}' failed: {describe_error(error)}") from None
            await anyio.sleep(self._backoff * 2**attempt)
            attempt += 1
            tracing.annotate("gateway.retries", attempt)


def _unavailable(call: ToolCall, error: BaseException) -> UpstreamUnavailableError:
    if isinstance(error, UpstreamUnavailableError):
        return error
    return UpstreamUnavailableError(f"The server behind '{call.tool.name}' is unreachable: {describe_error(error)}")
