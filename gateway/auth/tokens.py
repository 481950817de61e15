"""Bearer JWTs: verifying a token's signature and claims and naming the identity it carries."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from gateway.auth.identity import CALLER, AuthenticationError, Identity
from gateway.auth.roles import RoleRule, claim, matching_rule

if TYPE_CHECKING:
    # PyJWT and cryptography load only when a JWT is verified: importing them costs start-up time.
    import jwt
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

    from gateway.auth.oidc import IssuerKeys

JWT_ALGORITHMS = ("HS256", "RS256", "PS256", "ES256", "EdDSA")
STATIC_ALGORITHMS = ("HS256", "RS256")
"""The algorithms of a configured key; the others need keys from the issuer (`discovery`)."""
DISCOVERY_ALGORITHMS = ("RS256", "PS256", "ES256", "EdDSA")


@dataclass(frozen=True, slots=True)
class JwtSettings:
    """How bearer JWTs are verified and mapped to an identity."""

    issuer: str
    audience: str
    algorithms: tuple[str, ...]
    hs256_secret: str | None = field(default=None, repr=False)
    rs256_public_key: RSAPublicKey | None = field(default=None, repr=False)
    role_claim: str = "role"
    caller_claim: str = "sub"
    leeway: float = 30.0
    discovery: bool = False
    """Whether the keys come from the issuer's JWKS (OpenID discovery) rather than the configuration."""
    role_rules: tuple[RoleRule, ...] = ()
    """When given, the only source of a token's role (`gateway.auth.roles`); else `role_claim`."""


class UnknownKeyError(AuthenticationError):
    """The token names a signing key the cached key set does not hold."""

    def __init__(self, kid: str | None, issuer: str) -> None:
        named = f"the key '{kid}'" if kid is not None else "a key without a key id"
        super().__init__(f"the token is signed with {named}, which {issuer} does not publish")
        self.kid = kid


class KeysUnavailableError(AuthenticationError):
    """The issuer's keys have never been fetched, so no token of it can be verified now."""

    def __init__(self, issuer: str) -> None:
        super().__init__(
            f"the gateway cannot verify tokens of {issuer} now: its signing keys cannot be fetched "
            "(the gateway's admins see why in /readyz)"
        )


def verified_claims(
    token: str, settings: JwtSettings, keys: IssuerKeys | None = None, *, audience: str | None = None
) -> dict[str, Any]:
    """The claims of a JWT whose signature, issuer, audience and times check out.

    With `settings.discovery`, the key comes from `keys` (UnknownKeyError when they hold none for the
    token's `kid`). `audience` replaces the configured one (an ID token is for the web client).
    """
    import jwt

    header = _header(token)
    algorithm, kid = header.get("alg"), header.get("kid")
    if algorithm not in settings.algorithms:
        accepted = ", ".join(settings.algorithms)
        raise AuthenticationError(f"the token's signing algorithm is not accepted (accepted: {accepted})")
    key: Any
    if settings.discovery:
        if keys is None or not keys.loaded:
            raise KeysUnavailableError(settings.issuer)
        key = keys.key(kid if isinstance(kid, str) else None, algorithm)
        if key is None:
            raise UnknownKeyError(kid if isinstance(kid, str) else None, settings.issuer)
    else:
        key = settings.hs256_secret if algorithm == "HS256" else settings.rs256_public_key
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key=key,
            algorithms=[algorithm],
            audience=audience or settings.audience,
            issuer=settings.issuer,
            leeway=settings.leeway,
            options={"require": ["exp", "iss", "aud"]},
        )
    except jwt.PyJWTError as error:  # an unusable key too: never a traceback, never access
        raise AuthenticationError(_jwt_problem(error, settings, audience)) from None
    return claims


def _header(token: str) -> dict[str, Any]:
    """The JOSE header of a compact JWT, read only to pick the key: `jwt.decode` checks it all again."""
    try:
        segment = token.partition(".")[0]
        header = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (ValueError, RecursionError):  # binascii.Error and JSONDecodeError among them; arrays nested deep
        header = None
    if not isinstance(header, dict):
        raise AuthenticationError("the token is neither a known API key nor a well-formed JWT")
    return header


def identity_of(claims: Mapping[str, Any], settings: JwtSettings, known_roles: frozenset[str] | None) -> Identity:
    """The identity verified claims name: the caller claim, and the role the rules (or the role claim) give."""
    caller = _caller(claims, settings.caller_claim)
    if settings.role_rules:
        found = matching_rule(claims, settings.role_rules)
        if found is None:
            raise AuthenticationError("the token's claims match no rule of auth.jwt.role_rules, so it has no role")
        role = found[1].role
    else:
        role = _role(claims, settings.role_claim, known_roles)
    return Identity(caller, role, "jwt", issuer=settings.issuer)


def _jwt_problem(error: jwt.PyJWTError, settings: JwtSettings, audience: str | None) -> str:
    """A message for a rejected JWT that names the failed check and never the token."""
    import jwt

    if isinstance(error, jwt.InvalidSignatureError):
        return "the token's signature does not verify"
    if isinstance(error, jwt.ExpiredSignatureError):
        return "the token has expired"
    if isinstance(error, jwt.ImmatureSignatureError):
        return "the token is not valid yet (nbf or iat lies in the future)"
    if isinstance(error, jwt.InvalidIssuerError):
        return f"the token was not issued by {settings.issuer}"
    if isinstance(error, jwt.InvalidAudienceError):
        return f"the token is not meant for this gateway (audience must be {audience or settings.audience})"
    if isinstance(error, jwt.MissingRequiredClaimError):
        return f"the token has no '{error.claim}' claim, which is required"
    if isinstance(error, jwt.exceptions.InvalidSubjectError):
        return "the token's 'sub' claim is not a string"
    return "the token is not a well-formed JWT"


def _caller(claims: Mapping[str, Any], name: str) -> str:
    """The caller name a token's caller claim gives."""
    value = claim(claims, name)
    if value is None:
        raise AuthenticationError(f"the token has no '{name}' claim naming the caller")
    if not isinstance(value, str) or not CALLER.fullmatch(value):
        raise AuthenticationError(f"the token's '{name}' claim is not a usable caller name")
    return value


def _role(claims: Mapping[str, Any], name: str, known_roles: frozenset[str] | None) -> str:
    """The role a token's role claim gives: a string, or the first known role of a list."""
    value = claim(claims, name)
    if value is None:
        raise AuthenticationError(f"the token has no '{name}' claim naming the caller's role")
    candidates = value if isinstance(value, list) else [value]
    if not all(isinstance(item, str) for item in candidates):
        raise AuthenticationError(f"the token's '{name}' claim is not a role name or a list of role names")
    for item in candidates:
        if item and (known_roles is None or item in known_roles):
            return cast(str, item)
    raise AuthenticationError(f"the token's '{name}' claim names no configured role")
