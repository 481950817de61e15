"""The authorization-code flow of the web sign-in (OpenID Connect with PKCE): its secrets and their cookie.

Pure. A flow is a random `state` (the answer must be this browser's), `nonce` (the ID token must be
made for this flow) and PKCE `verifier` (the code is worthless to whoever steals it), the page to
return to, and an expiry. Nothing is stored on the server before sign-in: the flow travels in a cookie
of its own, sealed with an HMAC under a key of this process, so the browser can neither forge one
nor change what it holds. The verifier in it is useless without the code, which only the provider's
redirect to this browser carries, and both are used once.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import asdict, dataclass
from urllib.parse import urlencode

from gateway.auth.identity import AuthenticationError

FLOW_SECONDS = 600.0
"""How long a person may take at the provider before the flow must start again."""


@dataclass(frozen=True, slots=True)
class Flow:
    """One sign-in in progress."""

    state: str
    nonce: str
    verifier: str
    target: str
    expires: float


def start(target: str, now: float) -> Flow:
    """A new flow returning to `target`, good for FLOW_SECONDS."""
    return Flow(
        secrets.token_urlsafe(32), secrets.token_urlsafe(32), secrets.token_urlsafe(48), target, now + FLOW_SECONDS
    )


def challenge(verifier: str) -> str:
    """The PKCE S256 code challenge of `verifier` (RFC 7636 section 4.2)."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).rstrip(b"=").decode("ascii")


def authorization_url(endpoint: str, client_id: str, redirect_uri: str, scopes: tuple[str, ...], flow: Flow) -> str:
    """Where the browser goes to sign in at the provider."""
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": " ".join(scopes),
        "state": flow.state,
        "nonce": flow.nonce,
        "code_challenge": challenge(flow.verifier),
        "code_challenge_method": "S256",
    }
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(query)}"


def seal(key: bytes, flow: Flow) -> str:
    """The flow as a cookie value: its JSON, base64url, then its HMAC-SHA256."""
    body = base64.urlsafe_b64encode(json.dumps(asdict(flow)).encode()).decode().rstrip("=")
    return f"{body}.{_mac(key, body)}"


def unseal(key: bytes, sealed: str | None, state: str | None, now: float) -> Flow:
    """The flow a callback belongs to; AuthenticationError when its cookie is missing, forged or
    expired, or the provider's `state` is not this browser's."""
    body, _, mac = (sealed or "").partition(".")
    if not body or not hmac.compare_digest(_mac(key, body).encode(), mac.encode()):
        raise AuthenticationError(
            "this sign-in did not start in this browser (or the gateway restarted): sign in again"
        )
    data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    flow = Flow(**data)
    if flow.expires <= now:
        raise AuthenticationError("the sign-in took too long: sign in again")
    if state is None or not hmac.compare_digest(flow.state.encode(), state.encode()):
        raise AuthenticationError("the provider's answer is not for this sign-in (its state differs): sign in again")
    return flow


def _mac(key: bytes, body: str) -> str:
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
