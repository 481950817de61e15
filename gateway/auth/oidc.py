"""An OpenID provider's signing keys: found by discovery, fetched over HTTPS, cached and refreshed.

The I/O edge of `auth.jwt` with an issuer and no static key. `refresh` reads
`<issuer>/.well-known/openid-configuration`, checks that it names the configured issuer, and fetches
its `jwks_uri`; the keys are used until their `Cache-Control: max-age` (or `jwks.DEFAULT_LIFETIME`)
runs out, when `maintain` fetches them again. A token naming a key not in the set fetches it again at
once (the provider rotated its key), but at most once per `UNKNOWN_KID_INTERVAL`, so tokens with made-up
key ids cannot turn the gateway against its provider. A failed fetch keeps the keys it had, is logged,
and shows in `/readyz` through `maintain`'s report; callers are told only that the token cannot be
verified now. Plain http is allowed for a loopback issuer only (the tests' provider).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

import anyio

from gateway.auth.jwks import JwksError, KeySet, lifetime, parse_jwks
from gateway.errors import GatewayError

if TYPE_CHECKING:
    import httpx2
    from jwt import PyJWK

log = logging.getLogger(__name__)

UNKNOWN_KID_INTERVAL = 30.0
"""The shortest time between two fetches caused by tokens naming unknown keys."""
RETRY_SECONDS = 30.0
"""How soon `maintain` tries again after a failed fetch."""
FETCH_TIMEOUT = 10.0
MAX_DOCUMENT_BYTES = 1 << 20
DISCOVERY_PATH = "/.well-known/openid-configuration"
LOOPBACK_NAMES = ("localhost",)


class IdentityProviderError(GatewayError):
    """The provider's discovery document or key set cannot be had or used."""


def url_problem(url: str) -> str | None:
    """Why keys may not be fetched from `url`, or None: https, or http to a loopback host only."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname is not None and _loopback(parts.hostname):
        return None
    return "must be an https URL (plain http is accepted for a loopback host only)"


def _loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


ClientFactory = Callable[[], "httpx2.AsyncClient"]


def _client() -> httpx2.AsyncClient:
    import httpx2

    # Redirects are not followed: the provider's documents live at the URLs it names.
    return httpx2.AsyncClient(timeout=FETCH_TIMEOUT, follow_redirects=False)


class IssuerKeys:
    """The current signing keys of one issuer, and how their last fetch went."""

    def __init__(
        self,
        issuer: str,
        algorithms: Collection[str],
        *,
        client: ClientFactory = _client,
        clock: Callable[[], float] = time.monotonic,
        unknown_kid_interval: float = UNKNOWN_KID_INTERVAL,
    ) -> None:
        self.issuer = issuer
        self.algorithms = frozenset(algorithms)
        self.client = client
        self._clock = clock
        self._interval = unknown_kid_interval
        self._keys = KeySet()
        self._expires = 0.0
        self._last_attempt: float | None = None
        self._fetches = 0
        self.generation = 0
        """Counts the key sets fetched: what was verified with an earlier one is verified again."""
        self._lock = anyio.Lock()
        self.error: str | None = None
        """Why the last fetch failed, or None once one succeeded."""
        self.loaded = False
        """Whether keys were ever fetched."""
        self.authorization_endpoint: str | None = None
        self.token_endpoint: str | None = None
        """The provider's endpoints for the web sign-in, from its discovery document (None when it names none)."""

    def key(self, kid: str | None, algorithm: str) -> PyJWK | None:
        """The cached key for a token's `kid` and `alg`, or None."""
        return self._keys.key(kid, algorithm)

    def kids(self) -> list[str]:
        """The key ids held now."""
        return self._keys.kids()

    def seconds_left(self) -> float:
        """Seconds until the keys should be fetched again (0: now)."""
        if self.error is not None and self._last_attempt is not None:
            return max(0.0, self._last_attempt + RETRY_SECONDS - self._clock())
        return max(0.0, self._expires - self._clock())

    async def refresh(self) -> None:
        """Fetch the discovery document and the key set; IdentityProviderError says why not.

        Callers that wait while another fetch runs share its outcome instead of fetching again.
        """
        started = self._fetches
        async with self._lock:
            if self._fetches != started:
                if self.error is not None:
                    raise IdentityProviderError(self.error)
                return
            self._last_attempt = self._clock()
            try:
                keys, seconds, endpoints = await self._fetch()
            except IdentityProviderError as error:
                self.error = error.message
                log.warning("the signing keys of %s cannot be fetched: %s", self.issuer, error.message)
                raise
            finally:
                self._fetches += 1
            if self.error is not None or not self.loaded:
                log.info("fetched the signing keys of %s: %s", self.issuer, ", ".join(keys.kids()) or "(no key ids)")
            self._keys, self._expires = keys, self._clock() + seconds
            self.generation += 1
            self.authorization_endpoint, self.token_endpoint = endpoints
            self.error, self.loaded = None, True

    async def refresh_for_unknown_key(self) -> bool:
        """Fetch the keys again because a token names one not held; False when refused by the rate
        limit or when the fetch failed."""
        if self._last_attempt is not None and self._clock() - self._last_attempt < self._interval:
            return False
        try:
            await self.refresh()
        except IdentityProviderError:
            return False
        return True

    async def maintain(self, report: Callable[[str | None], None]) -> None:
        """Keep the keys fresh for as long as it runs: fetch when they expire, retry after a failure."""
        while True:
            if self.seconds_left() <= 0:
                try:
                    await self.refresh()
                    report(None)
                except IdentityProviderError as error:
                    report(f"the signing keys of {self.issuer} cannot be fetched: {error.message}")
            await anyio.sleep(self.seconds_left())

    async def _fetch(self) -> tuple[KeySet, float, tuple[str | None, str | None]]:
        """The keys, how long to use them, and the authorization and token endpoints."""
        import httpx2

        try:
            async with self.client() as client:
                discovery_url = self.issuer.rstrip("/") + DISCOVERY_PATH
                document, _ = await _get_json(client, discovery_url, "the discovery document")
                if not isinstance(document, dict) or document.get("issuer") != self.issuer:
                    named = document.get("issuer") if isinstance(document, dict) else None
                    raise IdentityProviderError(
                        f"the discovery document at {discovery_url} names the issuer {named!r}, not {self.issuer!r}"
                    )
                jwks_uri = document.get("jwks_uri")
                if not isinstance(jwks_uri, str) or (problem := url_problem(jwks_uri)) is not None:
                    raise IdentityProviderError(
                        f"the discovery document's jwks_uri {jwks_uri!r} is unusable: it {problem or 'must be a URL'}"
                    )
                jwks, cache_control = await _get_json(client, jwks_uri, "the key set")
                endpoints = (_endpoint(document, "authorization_endpoint"), _endpoint(document, "token_endpoint"))
        except (httpx2.HTTPError, httpx2.InvalidURL) as error:
            raise IdentityProviderError(f"cannot reach the identity provider: {_describe(error)}") from None
        try:
            return parse_jwks(jwks, self.algorithms), lifetime(cache_control), endpoints
        except JwksError as error:
            raise IdentityProviderError(f"{jwks_uri}: {error.message}") from None


def _endpoint(document: dict[str, object], name: str) -> str | None:
    """An endpoint the discovery document names, when it is a URL keys could be fetched from too."""
    value = document.get(name)
    return value if isinstance(value, str) and url_problem(value) is None else None


async def exchange_code(
    client: ClientFactory,
    token_endpoint: str,
    form: dict[str, str],
    credentials: tuple[str, str] | None,
) -> dict[str, object]:
    """The token response for an authorization code (`form`), the client authenticating with HTTP
    Basic when it has a secret; IdentityProviderError says why there is none."""
    import httpx2

    auth = httpx2.USE_CLIENT_DEFAULT if credentials is None else httpx2.BasicAuth(*credentials)
    try:
        async with client() as http:
            response = await http.post(token_endpoint, data=form, auth=auth, headers={"Accept": "application/json"})
    except (httpx2.HTTPError, httpx2.InvalidURL) as error:
        raise IdentityProviderError(f"cannot reach the identity provider: {_describe(error)}") from None
    try:
        answer = json.loads(response.content)
    except ValueError:
        answer = None
    if response.status_code != 200 or not isinstance(answer, dict):
        code = answer.get("error") if isinstance(answer, dict) else None
        raise IdentityProviderError(
            f"the token endpoint refused the code (HTTP {response.status_code}, {code or 'no error code'})"
        )
    return answer


async def _get_json(client: httpx2.AsyncClient, url: str, what: str) -> tuple[object, str | None]:
    """The JSON document at `url` and its Cache-Control header; IdentityProviderError when unusable."""
    response = await client.get(url, headers={"Accept": "application/json"})
    if response.status_code != 200:
        raise IdentityProviderError(f"{what} at {url} answered HTTP {response.status_code}")
    if len(response.content) > MAX_DOCUMENT_BYTES:
        raise IdentityProviderError(f"{what} at {url} is larger than {MAX_DOCUMENT_BYTES} bytes")
    try:
        return json.loads(response.content), response.headers.get("cache-control")
    except ValueError:
        raise IdentityProviderError(f"{what} at {url} is not JSON") from None


def _describe(error: Exception) -> str:
    """An httpx error as a short sentence (its class when it has no text)."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
