"""A JSON Web Key Set as the gateway verifies with it: one key for each (key id, algorithm).

Pure: `gateway.auth.oidc` fetches the document; this reads it. A key whose JWK names no `alg`
serves every accepted algorithm of its type (an RSA key both RS256 and PS256), and a key whose JWK
names one serves that algorithm only, so a token cannot pick the algorithm a key is used with.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gateway.errors import GatewayError

if TYPE_CHECKING:
    from jwt import PyJWK

KEY_TYPES = {"RS256": "RSA", "PS256": "RSA", "ES256": "EC", "EdDSA": "OKP"}
"""The algorithms a key set may serve, and the JWK key type each needs."""
CURVES = {"ES256": "P-256", "EdDSA": "Ed25519"}
MIN_RSA_BITS = 2048
DEFAULT_LIFETIME = 3600.0
"""How long a key set is used before it is fetched again, when its response sets no max-age."""
MIN_LIFETIME = 60.0
MAX_LIFETIME = 86400.0
_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d+)", re.IGNORECASE)


class JwksError(GatewayError):
    """A key set document holds no key the gateway can verify with."""


@dataclass(frozen=True, slots=True)
class KeySet:
    """The usable keys of one JWKS, by (kid, algorithm); a key without a kid is filed under None."""

    keys: Mapping[tuple[str | None, str], PyJWK] = field(default_factory=dict)

    def key(self, kid: str | None, algorithm: str) -> PyJWK | None:
        """The key a token with this `kid` and `alg` header names; without a kid, the set's only key
        for that algorithm."""
        if kid is not None:
            return self.keys.get((kid, algorithm))
        serving = [key for (_, name), key in self.keys.items() if name == algorithm]
        return serving[0] if len(serving) == 1 else None

    def kids(self) -> list[str]:
        """The key ids in the set, each once, for messages and `/readyz`."""
        return sorted({kid for kid, _ in self.keys if kid is not None})


def parse_jwks(document: object, algorithms: Collection[str]) -> KeySet:
    """The keys of a JWKS document that serve one of `algorithms`; JwksError when none does."""
    from jwt import PyJWK
    from jwt.exceptions import PyJWTError

    if not isinstance(document, Mapping) or not isinstance(document.get("keys"), list):
        raise JwksError("the key set is not a JSON object with a 'keys' list")
    keys: dict[tuple[str | None, str], PyJWK] = {}
    for jwk in document["keys"]:
        if not isinstance(jwk, Mapping) or jwk.get("use", "sig") != "sig":
            continue
        kid = jwk.get("kid") if isinstance(jwk.get("kid"), str) else None
        for algorithm in _algorithms(jwk, algorithms):
            try:
                key = PyJWK(dict(jwk), algorithm=algorithm)
            except PyJWTError:
                continue  # a malformed or unsupported key is skipped, as RFC 7517 section 5 asks
            if jwk.get("kty") == "RSA" and getattr(key.key, "key_size", 0) < MIN_RSA_BITS:
                continue
            keys[(kid, algorithm)] = key
    if not keys:
        raise JwksError(f"the key set holds no usable signing key for {', '.join(sorted(algorithms))}")
    return KeySet(keys)


def _algorithms(jwk: Mapping[str, Any], accepted: Collection[str]) -> list[str]:
    """The accepted algorithms this JWK can serve."""
    named = jwk.get("alg")
    candidates = [named] if named is not None else list(KEY_TYPES)
    return [
        name
        for name in candidates
        if name in accepted
        and KEY_TYPES.get(name) == jwk.get("kty")
        and (name not in CURVES or jwk.get("crv") == CURVES[name])
    ]


def lifetime(cache_control: str | None) -> float:
    """How long to use a fetched key set: its `max-age`, kept between MIN_LIFETIME and MAX_LIFETIME."""
    found = _MAX_AGE.search(cache_control or "")
    if found is None:
        return DEFAULT_LIFETIME
    return min(max(float(found.group(1)), MIN_LIFETIME), MAX_LIFETIME)
