"""Any Authorization header gives an Identity or an AuthenticationError, never another exception."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.auth.authenticator import Authenticator
from gateway.auth.identity import AuthenticationError, Identity
from gateway.auth.settings import AuthSettings

from . import RUNS, TEXT, json_values

API_KEY = "alice-key-0123456789abcdef"
SECRET = "s" * 40
ISSUER = "https://issuer.example"
AUDIENCE = "mcp-gateway"
AUTHENTICATOR = Authenticator(
    AuthSettings.from_config(
        {
            "api_keys": [{"caller": "alice", "role": "admin", "key": API_KEY}],
            "jwt": {"issuer": ISSUER, "audience": AUDIENCE, "hs256_secret": SECRET},
        },
        source_file="/etc/gateway.yaml",
    )
)


def segment(value: Any) -> str:
    """One unpadded base64url JWT segment around `value` (JSON text, or raw bytes)."""
    raw = value if isinstance(value, bytes) else json.dumps(value).encode("utf-8", "surrogatepass")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


CLAIM_VALUES = st.one_of(
    json_values(6),
    st.sampled_from([ISSUER, AUDIENCE, [AUDIENCE], "admin", int(time.time()) + 600, 10**400, 1e308, "sub"]),
)
CLAIMS = st.fixed_dictionaries(
    {},
    optional={name: CLAIM_VALUES for name in ("iss", "aud", "exp", "nbf", "iat", "sub", "role", "jti")},
).flatmap(lambda known: st.dictionaries(TEXT, json_values(4), max_size=3).map(lambda extra: {**extra, **known}))
HEADERS = st.one_of(
    json_values(6),
    st.fixed_dictionaries({"alg": st.one_of(st.sampled_from(["HS256", "RS256", "none", "HS512"]), json_values(3))}),
    st.just({"alg": "HS256", "typ": "JWT"}),
)
FORGED = st.builds(
    lambda header, payload, signature: f"{segment(header)}.{segment(payload)}.{signature}",
    st.one_of(HEADERS, st.binary(max_size=40), st.just(b"[" * 5000 + b"]" * 5000)),
    st.one_of(CLAIMS, st.binary(max_size=40)),
    st.text(alphabet="ABCabc012-_", max_size=50),
)


def signed(claims: dict[str, Any]) -> str:
    """A token this gateway's secret signs: only its claims can be wrong (signed by hand, as PyJWT checks claims)."""
    content = f"{segment({'alg': 'HS256', 'typ': 'JWT'})}.{segment(claims)}"
    signature = hmac.new(SECRET.encode(), content.encode(), hashlib.sha256).digest()
    return f"{content}.{base64.urlsafe_b64encode(signature).decode().rstrip('=')}"


TOKENS = st.one_of(
    TEXT,
    st.text(alphabet="ABCabc012-._~+/=", max_size=100),
    st.just(API_KEY),
    FORGED,
    CLAIMS.map(signed),
    st.just("a" * 100_000),
)
AUTHORIZATION = st.one_of(
    TEXT,
    TOKENS.map(lambda token: f"Bearer {token}"),
    st.tuples(st.sampled_from(["bearer", "BEARER", "Basic", "Bearer\t", " Bearer  "]), TOKENS).map(" ".join),
    st.none(),
)


@RUNS
def test_any_authorization_header_gives_an_identity_or_an_authentication_error(runs: settings) -> None:
    @runs
    @given(AUTHORIZATION)
    def check(header: str | None) -> None:
        try:
            identity = AUTHENTICATOR.authenticate(header)
        except AuthenticationError as error:
            assert API_KEY not in str(error) and SECRET not in str(error)
            return
        assert isinstance(identity, Identity)

    check()


def test_a_valid_token_still_gives_its_identity() -> None:
    claims = {"iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 600, "sub": "bob", "role": "admin"}
    assert AUTHENTICATOR.authenticate(f"Bearer {signed(claims)}") == Identity("bob", "admin", "jwt", issuer=ISSUER)
