"""Turning an `Authorization` header into an `Identity`: an API key, a JWT, or no credential at all.

`authenticate` is pure: it verifies with the keys at hand. `identify`, which the HTTP edge
(gateway/auth/middleware.py) calls, does the same and, when a token names a signing key the
issuer's cached key set lacks, fetches that set again once (`gateway.auth.oidc`). Keys and tokens
are never logged, kept in plain text, or echoed in an error.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from functools import partial
from typing import TypeVar

import anyio

from gateway.auth.apikeys import TOKEN68, TOKEN68_RULE, ApiKey
from gateway.auth.identity import ANONYMOUS_CALLER, HOST_CALLER, LOCAL_CALLER, AuthenticationError, Identity
from gateway.auth.oidc import IssuerKeys
from gateway.auth.settings import AuthSettings
from gateway.auth.tokens import JwtSettings, KeysUnavailableError, UnknownKeyError, identity_of, verified_claims
from gateway.auth.verified import VerifiedTokens
from gateway.runtime.background import Report
from gateway.runtime.hostaccess import HostAccess

KeysFactory = Callable[[str, tuple[str, ...]], IssuerKeys]
T = TypeVar("T")
KEYS_LOOP = "identity_provider"
"""The background loop keeping the issuer's keys fresh, as `/readyz` names it."""


class Authenticator:
    """Turns an `Authorization` header into an Identity, or raises AuthenticationError.

    `keys` builds the key cache of an issuer (`auth.jwt` with discovery); tests pass one with their clock.
    `wall_clock` tells when a token verified earlier expires (`gateway.auth.verified`).
    """

    def __init__(
        self,
        settings: AuthSettings,
        host: HostAccess | None = None,
        keys: KeysFactory = IssuerKeys,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._host = host
        self._make_keys = keys
        self._wall_clock = wall_clock
        self._verified = VerifiedTokens()
        self.keys: IssuerKeys | None = None
        """The issuer's key cache when `auth.jwt` uses discovery."""
        self._changed: anyio.Event | None = None
        """Set when a reload changes the issuer, while `maintain_keys` runs."""
        self._settings = settings
        self.settings = settings

    @property
    def settings(self) -> AuthSettings:
        """The `auth` section in effect; a reload sets it, keeping the key cache while the issuer stays."""
        return self._settings

    @settings.setter
    def settings(self, settings: AuthSettings) -> None:
        self._settings = settings
        self._verified.clear()
        jwt = settings.jwt
        if jwt is None or not jwt.discovery:
            self.keys = None
        elif self.keys is None or (self.keys.issuer, self.keys.algorithms) != (jwt.issuer, frozenset(jwt.algorithms)):
            self.keys = self._make_keys(jwt.issuer, jwt.algorithms)
        else:
            return
        if self._changed is not None:
            self._changed.set()

    async def identify(self, authorization_header: str | None) -> Identity:
        """`authenticate`, fetching the issuer's keys once more when the token names a key not held
        (rate-limited by the cache) or none were ever fetched."""
        return await self.with_fresh_keys(lambda: self.authenticate(authorization_header))

    async def with_fresh_keys(self, attempt: Callable[[], T]) -> T:
        """`attempt()`; when it fails for want of the issuer's key, once more after fetching the keys."""
        try:
            return attempt()
        except (UnknownKeyError, KeysUnavailableError):
            if self.keys is None or not await self.keys.refresh_for_unknown_key():
                raise
        return attempt()

    async def maintain_keys(self, report: Report) -> None:
        """Keep the current issuer's keys fresh (`IssuerKeys.maintain`), following reloads."""
        while True:
            self._changed = changed = anyio.Event()
            async with anyio.create_task_group() as group:
                if self.keys is not None:
                    group.start_soon(self.keys.maintain, partial(report, KEYS_LOOP))
                else:
                    report(KEYS_LOOP, None)
                await changed.wait()
                group.cancel_scope.cancel()

    def anonymous(self) -> Identity:
        """The identity of a request that carries no credential, when that is allowed."""
        return Identity(ANONYMOUS_CALLER, self.settings.anonymous_role, "anonymous")

    def authenticate(self, authorization_header: str | None) -> Identity:
        """The caller behind `Authorization: Bearer <API key, JWT or host token>`."""
        if authorization_header is not None and self._is_host(authorization_header):
            # The person at the host, whether or not authentication is on (see gateway.runtime.hostaccess).
            return Identity(HOST_CALLER, None, "host")
        if not self.settings.enabled:
            # Without authentication the gateway serves one trusted party (it listens on loopback):
            # one caller whose state lasts across requests, unlike the anonymous strangers of an
            # `anonymous_role`, who share nothing.
            return Identity(LOCAL_CALLER, self.settings.anonymous_role, "local")
        if authorization_header is None:
            if self.settings.anonymous_role is not None:
                return self.anonymous()
            raise AuthenticationError(
                "authentication required: send 'Authorization: Bearer <API key or token>'", error=None
            )
        token = _bearer_token(authorization_header)
        identity = self._by_key(token)
        if identity is not None:
            return identity
        if token.count(".") == 2:
            if self.settings.jwt is not None:
                return self._by_jwt(token, self.settings.jwt)
            raise AuthenticationError("unknown API key (JWTs are not accepted: auth.jwt is not configured)")
        raise AuthenticationError("unknown API key")

    def _by_jwt(self, token: str, settings: JwtSettings) -> Identity:
        """The identity of a JWT: remembered from an earlier request while the key set stays, else verified."""
        generation = 0 if self.keys is None else self.keys.generation
        identity = self._verified.get(token, generation, self._wall_clock())
        if identity is None:
            claims = verified_claims(token, settings, self.keys)
            identity = identity_of(claims, settings, self.settings.known_roles)
            self._verified.put(token, generation, identity, float(claims["exp"]))
        return identity

    def _is_host(self, header: str) -> bool:
        scheme, _, token = header.strip().partition(" ")
        return self._host is not None and scheme.lower() == "bearer" and self._host.matches(token.strip())

    def _by_key(self, token: str) -> Identity | None:
        """The identity whose key digest matches, comparing against every key in constant time."""
        digest = hashlib.sha256(token.encode("utf-8")).digest()
        found: ApiKey | None = None
        for key in self.settings.api_keys:
            # No early exit, so the time taken does not tell which key (if any) matched.
            if hmac.compare_digest(digest, key.digest):
                found = key
        return None if found is None else Identity(found.caller, found.role, "api_key")


def _bearer_token(header: str) -> str:
    """The credential of a `Bearer` Authorization header."""
    scheme, _, rest = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        raise AuthenticationError("the Authorization header must use the Bearer scheme", error="invalid_request")
    token = rest.strip()
    if not token:
        raise AuthenticationError("the Bearer token is empty", error="invalid_request")
    if not TOKEN68.fullmatch(token):
        raise AuthenticationError(f"the Bearer token may hold only {TOKEN68_RULE}", error="invalid_request")
    return token
