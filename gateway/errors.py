"""The gateway's one exception tree.

    GatewayError                      root; carries a message and a hint for the model
    ├── ConfigError                   a configuration file is unreadable or invalid (names file and path)
    ├── OperationError                an operator's request (admin API, CLI) cannot be honoured as asked
    │   ├── NotFoundError             no server, tool, skill, group or session of that name
    │   ├── ConflictError             the name is taken, or the entry is read-only (defined in the config file)
    │   └── ForbiddenError            not an admin, or not allowed by the registration policy
    ├── ProtocolError                 answered as a JSON-RPC error, not as a tool result
    │   └── UnknownToolError          no such tool (also: a tool the caller may not see)
    │       ├── ServerNotConnectedError   the tool's server has not connected yet, so its tools are not known
    │       └── ToolHeldError             the tool's definition changed and awaits an admin's review
    └── ToolError                     answered as a tool result with is_error: true
        ├── ToolInputError            arguments do not match the tool's input schema
        ├── ToolRefusedError          a policy step refused the call (loop, sandbox unavailable, ...)
        │   ├── StateUnavailableError     the state replicas share (Redis) cannot be reached
        │   └── ConnectionNeededError     the caller has not connected their account to the tool's server (OAuth)
        ├── ToolTimeoutError          the call ran past its deadline
        ├── UpstreamUnavailableError  the server behind the tool is not connected
        │   └── UpstreamRestartingError   it is restarting and was not back within the call's deadline
        └── ToolExecutionError        the tool failed while running

Third-party exceptions are translated into these where they enter the gateway; `describe_error`
is how their text is told.
"""

from __future__ import annotations

from collections.abc import Sequence

ECHO_LIMIT = 100


def clip(text: str) -> str:
    """A client-supplied name or value as an error may echo it: at most ECHO_LIMIT characters, `…` marking a cut."""
    return text if len(text) <= ECHO_LIMIT else f"{text[: ECHO_LIMIT - 1]}…"


class GatewayError(Exception):
    """Root of every error the gateway raises on purpose."""

    hint = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = hint

    def client_text(self) -> str:
        """The text a client sees: the message, then the hint when there is one."""
        return f"{self.message}\nHint: {self.hint}" if self.hint else self.message


class ConfigError(GatewayError):
    """A configuration file is unreadable or does not match the schema."""

    def __init__(self, file: str, path: str, problem: str) -> None:
        where = f"{file}: {path}" if path else file
        super().__init__(f"{where}: {problem}")
        self.file = file
        self.path = path
        self.problem = problem


class OperationError(GatewayError):
    """An operator's request (admin API, CLI) that cannot be honoured as asked; `status` is its HTTP status."""

    status = 400


class NotFoundError(OperationError):
    """No server, tool, skill, group or session of that name (or none the caller may see)."""

    status = 404


class ConflictError(OperationError):
    """The name is already taken, or the entry is read-only where it was asked to change."""

    status = 409


class ForbiddenError(OperationError):
    """The caller may not do this: not an admin, or the registration policy does not allow it."""

    status = 403


class ProtocolError(GatewayError):
    """Answered as a JSON-RPC error rather than a tool result."""


class UnknownToolError(ProtocolError):
    """No tool of that name is visible to the caller; `suggestions` are visible tools it nearly names."""

    def __init__(self, name: str, suggestions: Sequence[str] = ()) -> None:
        self.name = name
        self.suggestions = tuple(suggestions)
        super().__init__(f"Unknown tool: {clip(name)!r}{self.did_you_mean}")

    @property
    def did_you_mean(self) -> str:
        """`. Did you mean 'a' or 'b'?` naming the suggestions, or nothing when there are none."""
        if not self.suggestions:
            return ""
        quoted = [repr(suggestion) for suggestion in self.suggestions]
        listed = " or ".join(filter(None, [", ".join(quoted[:-1]), quoted[-1]]))
        return f". Did you mean {listed}?"


class ServerNotConnectedError(UnknownToolError):
    """`name` is under the namespace of a server that has not connected yet (and that the caller may see)."""

    hint = "Its tools are listed once it connects, and clients are told the list changed; try again shortly."

    def __init__(self, name: str, server: str) -> None:
        super().__init__(name)
        self.server = server
        self.message = f"Server {server!r} is not connected yet, so its tool {clip(name)!r} is not known yet"
        self.args = (self.message,)


class ToolHeldError(UnknownToolError):
    """`name` is a tool whose definition changed on its server after it was pinned and that is held
    until an admin accepts the change (and that the caller may see)."""

    hint = "An admin reviews the change; clients are told when the tool is listed again. Use another tool meanwhile."

    def __init__(self, name: str, server: str) -> None:
        super().__init__(name)
        self.server = server
        self.message = f"Tool {clip(name)!r} changed on server {server!r} and is held until an admin reviews the change"
        self.args = (self.message,)


class ToolError(GatewayError):
    """Answered as a tool result with is_error set, so the model can react."""


class ToolInputError(ToolError):
    """The arguments do not match the tool's input schema."""

    hint = "Fix the listed arguments to match the tool's input schema and call again."


class ToolRefusedError(ToolError):
    """A step of the call pipeline refused to run the call."""


class SandboxUnavailableError(ToolRefusedError):
    """Docker is unreachable or the sandbox image is missing; nothing runs on the host instead."""

    reason = "sandbox"
    hint = "Sandboxed tools need Docker and the sandbox image; ask an operator to set them up."


class ToolTimeoutError(ToolError):
    """The call ran past its deadline and was abandoned."""

    hint = "The tool took too long; try a smaller request or a narrower query."


class StateUnavailableError(ToolRefusedError):
    """The state replicas share (Redis) cannot be reached, so the call cannot be counted or run."""

    reason = "shared_state"
    hint = "Retry in a moment; if it persists, tell the user the gateway's shared state is down."


class ConnectionNeededError(ToolRefusedError):
    """The tool's server takes each caller's own OAuth grant, and this caller has none (or lost it);
    `url` is the page where they connect it."""

    reason = "connection_needed"

    def __init__(self, message: str, url: str) -> None:
        super().__init__(
            message,
            hint=f"Tell the user to open {url} and press Connect for this server, then call the tool again.",
        )
        self.url = url


class UpstreamUnavailableError(ToolError):
    """The server that owns the tool is not connected right now."""

    hint = "The server is restarting or down; try again shortly or use another tool."


class UpstreamRestartingError(UpstreamUnavailableError):
    """The server is restarting; the call waited for it until its deadline (so retrying now is pointless)."""


class ToolExecutionError(ToolError):
    """The tool raised or its server failed while running the call."""

    hint = "Check the arguments or try a different approach."


def describe_error(error: BaseException) -> str:
    """An exception as `Type: text`, or only `Type` when it has no text."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
