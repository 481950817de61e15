"""Web sign-in: server-side sessions behind a cookie that holds a random id, never the credential.

A person pastes an API key or a JWT; the gateway's `Authenticator` verifies it, and the session keeps
the resulting `Identity`, the SHA-256 of an API key (so that a key removed from the configuration
ends its sessions at once) and a JWT's expiry (a session never outlives its token). Signing in starts
a new session id, so an id planted before sign-in is worth nothing after it. Sessions end on sign-out,
after `IDLE_SECONDS` without a request, and the oldest go first past `MAX_SESSIONS`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from gateway.auth.authenticator import Authenticator
from gateway.auth.identity import AuthenticationError, Identity

COOKIE = "gateway_session"
IDLE_SECONDS = 8 * 3600.0
MAX_SESSIONS = 10_000


@dataclass(slots=True)
class WebSession:
    """One browser's session: who signed in (None before sign-in) and its CSRF token."""

    id: str
    csrf: str
    identity: Identity | None
    last_seen: float
    key_digest: bytes | None = None
    expires: float | None = None
    """A JWT's `exp` (epoch seconds); None for an API key or no credential."""
    context: str = ""
    """The id of the MCP session context its calls run in, so budgets, loops and approvals see one session."""


class WebSessions:
    """The live web sessions, in memory: a restart signs everyone out."""

    def __init__(
        self,
        authenticator: Callable[[], Authenticator],
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        idle: float = IDLE_SECONDS,
        limit: int = MAX_SESSIONS,
    ) -> None:
        self._authenticator = authenticator
        self._clock = clock
        self._wall_clock = wall_clock
        self._idle = idle
        self._limit = limit
        self._sessions: OrderedDict[str, WebSession] = OrderedDict()

    def get(self, session_id: str | None) -> WebSession | None:
        """The live session `session_id`, touched; None when unknown, idle too long, or its credential lapsed."""
        session = self._sessions.get(session_id or "")
        if session is None:
            return None
        now = self._clock()
        if now - session.last_seen > self._idle or not self._still_valid(session):
            self.end(session.id)
            return None
        session.last_seen = now
        self._sessions.move_to_end(session.id)
        return session

    def _still_valid(self, session: WebSession) -> bool:
        if session.expires is not None and self._wall_clock() >= session.expires:
            return False
        if session.key_digest is None:
            return True
        keys = self._authenticator().settings.api_keys
        return any(hmac.compare_digest(session.key_digest, key.digest) for key in keys)

    def start(self, identity: Identity | None = None) -> WebSession:
        """A new session for `identity` (None: not signed in yet, only a CSRF token for the sign-in form)."""
        while len(self._sessions) >= self._limit:
            self._sessions.popitem(last=False)
        session = WebSession(
            id=secrets.token_urlsafe(32),
            csrf=secrets.token_urlsafe(32),
            identity=identity,
            last_seen=self._clock(),
            context=f"web-{secrets.token_hex(8)}",
        )
        self._sessions[session.id] = session
        return session

    def sign_in(self, previous: WebSession | None, credential: str) -> WebSession:
        """A new session for whoever `credential` (an API key or a JWT, `Bearer ` optional) names;
        `previous` ends. Raises `AuthenticationError` with the reason when it names nobody."""
        token = credential.strip().removeprefix("Bearer ").strip()
        if not token:
            raise AuthenticationError("paste an API key or a token")
        identity = self._authenticator().authenticate(f"Bearer {token}")
        if previous is not None:
            self.end(previous.id)
        session = self.start(identity)
        if identity.method == "api_key":
            session.key_digest = hashlib.sha256(token.encode("utf-8")).digest()
        elif identity.method == "jwt":
            # The signature was verified just now; only the expiry is read again. PyJWT loads on first use.
            import jwt

            claims = jwt.decode(token, options={"verify_signature": False})
            session.expires = float(claims["exp"]) if "exp" in claims else None
        return session

    def end(self, session_id: str) -> None:
        """End the session `session_id` (sign-out); unknown ids are ignored."""
        self._sessions.pop(session_id, None)
