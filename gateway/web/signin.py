"""Web sign-in: server-side sessions behind a cookie that holds a random id, never the credential.

A person pastes an API key or a JWT; the gateway's `Authenticator` verifies it, and the session keeps
the resulting `Identity`, the SHA-256 of an API key (so that a key removed from the configuration
ends its sessions at once) and a JWT's expiry (a session never outlives its token). Signing in starts
a new session id, so an id planted before sign-in is worth nothing after it. Sessions end on sign-out
and after `IDLE_SECONDS` without a request.

Nothing is kept before sign-in: the sign-in form's CSRF token is signed, not stored (`csrf`), so
requests without a credential cannot crowd anyone out. Signed-in sessions are bounded per caller
(past `MAX_SESSIONS_PER_CALLER` a caller's own least recently used one ends) and in total (past
`MAX_SESSIONS` a newcomer is refused): nobody's sign-ins end another caller's sessions. The sessions
an open page gives visitors without a credential (authentication off, or an anonymous role) are
counted apart, and past `MAX_SESSIONS` only the least recently used of those end.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from gateway.auth import codeflow
from gateway.auth.authenticator import Authenticator
from gateway.auth.identity import AuthenticationError, Identity
from gateway.web import csrf

COOKIE = "gateway_session"
IDLE_SECONDS = 8 * 3600.0
MAX_SESSIONS = 10_000
MAX_SESSIONS_PER_CALLER = 16
FORM_SECONDS = 3600.0
"""How long a sign-in form may be left open before it must be reloaded."""


def signed(identity: Identity) -> bool:
    """Whether `identity` signed in with a credential (rather than being let in without one)."""
    return identity.method in ("api_key", "jwt", "host")


@dataclass(slots=True)
class WebSession:
    """One browser's session: who it is and its CSRF token."""

    id: str
    csrf: str
    identity: Identity
    last_seen: float
    key_digest: bytes | None = None
    expires: float | None = None
    """A JWT's `exp` (epoch seconds); None for an API key or no credential."""
    context: str = ""
    """The id of the MCP session context its calls run in, so budgets, loops and approvals see one session."""
    flash: str = ""
    """What the last action did, said once on the page its redirect leads to (set by the action, taken by that page)."""


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
        per_caller: int = MAX_SESSIONS_PER_CALLER,
    ) -> None:
        self._authenticator = authenticator
        self._clock = clock
        self._wall_clock = wall_clock
        self._idle = idle
        self._limit = limit
        self._per_caller = per_caller
        # Signed forms need no storage; a restart, which ends every session anyway, voids the open ones.
        self._key = secrets.token_bytes(32)
        # Each kept least recently used first.
        self._signed: OrderedDict[str, WebSession] = OrderedDict()
        self._visitors: OrderedDict[str, WebSession] = OrderedDict()

    def count(self) -> int:
        """How many sessions are kept."""
        return len(self._signed) + len(self._visitors)

    def get(self, session_id: str | None) -> WebSession | None:
        """The live session `session_id`, touched; None when unknown, idle too long, or its credential lapsed."""
        pool = self._signed if (session_id or "") in self._signed else self._visitors
        session = pool.get(session_id or "")
        if session is None:
            return None
        now = self._clock()
        if now - session.last_seen > self._idle or not self._still_valid(session):
            self.end(session.id)
            return None
        session.last_seen = now
        pool.move_to_end(session.id)
        return session

    def form_token(self, nonce: str) -> str:
        """The sign-in form's CSRF token for the browser whose pre-sign-in cookie holds `nonce`."""
        return csrf.signin_token(self._key, nonce, int(self._wall_clock() + FORM_SECONDS))

    def check_form(self, nonce: str | None, submitted: object) -> None:
        """Raise `CsrfError` unless `submitted` is a token of `form_token(nonce)` still good."""
        csrf.check_signin(self._key, nonce, submitted, self._wall_clock())

    def seal_flow(self, target: str) -> tuple[codeflow.Flow, str]:
        """A new OpenID Connect sign-in returning to `target`, and the cookie value that carries it."""
        flow = codeflow.start(target, self._wall_clock())
        return flow, codeflow.seal(self._key, flow)

    def open_flow(self, sealed: str | None, state: str | None) -> codeflow.Flow:
        """The sign-in a provider's answer with `state` belongs to (AuthenticationError when none)."""
        return codeflow.unseal(self._key, sealed, state, self._wall_clock())

    def _still_valid(self, session: WebSession) -> bool:
        if session.expires is not None and self._wall_clock() >= session.expires:
            return False
        if session.key_digest is None:
            return True
        keys = self._authenticator().settings.api_keys
        return any(hmac.compare_digest(session.key_digest, key.digest) for key in keys)

    def start(self, identity: Identity) -> WebSession:
        """A new session for `identity`. Raises `AuthenticationError` when signed-in sessions are at
        their limit and none of them is this caller's."""
        pool = self._signed if signed(identity) else self._visitors
        now = self._clock()
        while pool and now - next(iter(pool.values())).last_seen > self._idle:
            pool.popitem(last=False)
        if pool is self._visitors:
            while len(pool) >= self._limit:
                pool.popitem(last=False)
        else:
            mine = [held.id for held in pool.values() if held.identity.key == identity.key]
            if len(mine) >= self._per_caller:
                del pool[mine[0]]
            elif len(pool) >= self._limit:
                raise AuthenticationError(f"the page holds {self._limit} signed-in sessions, its limit: retry later")
        session = WebSession(
            id=secrets.token_urlsafe(32),
            csrf=secrets.token_urlsafe(32),
            identity=identity,
            last_seen=now,
            context=f"web-{secrets.token_hex(8)}",
        )
        pool[session.id] = session
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
        self._signed.pop(session_id, None)
        self._visitors.pop(session_id, None)
