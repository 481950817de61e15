"""Who a caller is: an `Identity`, the keys its state hangs on, and the error of a missing credential."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from gateway.clients.session import state_key
from gateway.errors import GatewayError

Method = Literal["api_key", "jwt", "anonymous", "local", "stdio", "host"]
ChallengeError = Literal["invalid_request", "invalid_token"]

ANONYMOUS_CALLER = "anonymous"
LOCAL_CALLER = "local"
HOST_CALLER = "host"
"""The person at the gateway's host, holding its host token (`gateway.runtime.hostaccess`)."""
CALLER = re.compile(r"[^\x00-\x1f\x7f]{1,256}")


@dataclass(frozen=True, slots=True)
class Identity:
    """An authenticated (or knowingly anonymous) caller and the role it acts as.

    `caller` is the name people read; two callers may share it (an API key and a JWT both naming
    `alice`), so state never keys on it: it keys on `key`.
    """

    caller: str
    role: str | None
    method: Method
    issuer: str | None = None
    key: str = field(init=False, repr=False, compare=False)
    """Who this is, unambiguously: how the caller signed in, and as whom.

    `api_key:<caller>`, `jwt:<issuer>:<subject>`, `stdio:<caller>`, `host:host` for the host token
    or, with authentication off, `local:local`; every anonymous request has the key `anonymous`, and
    each anonymous session one of its own (`caller_key`). Worked out once: a call reads it several times.
    """

    def __post_init__(self) -> None:
        if self.method == "anonymous":
            key = state_key(self.method)
        elif self.method == "jwt":
            key = state_key(self.method, self.issuer or "", self.caller)
        else:
            key = state_key(self.method, self.caller)
        object.__setattr__(self, "key", key)


def caller_key(identity: Identity, session_id: str) -> str:
    """The key a session's state hangs on: the identity's, or an anonymous session's very own."""
    return state_key(identity.method, session_id) if identity.method == "anonymous" else identity.key


def handle_key(identity: Identity, handle: str, group: str | None = None) -> str:
    """The id of a stateless-era caller's state under `handle` at the endpoint of `group` (None:
    `/mcp`): distinct for every (caller, handle, group)."""
    return state_key("stateless", identity.key, handle, *(() if group is None else ("group", group)))


class AuthenticationError(GatewayError):
    """The request carries no usable credential; answered with HTTP 401.

    `error` is the RFC 6750 error code for the challenge: None when no credential was sent,
    "invalid_request" when the header is malformed, "invalid_token" when the credential is bad.
    """

    def __init__(self, message: str, *, error: ChallengeError | None = "invalid_token") -> None:
        super().__init__(message)
        self.error = error
