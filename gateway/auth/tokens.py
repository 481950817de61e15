"""Bearer JWTs: verifying a token's signature and claims and naming the identity it carries."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from gateway.auth.identity import CALLER, AuthenticationError, Identity

if TYPE_CHECKING:
    # PyJWT and cryptography load only when a JWT is verified: importing them costs start-up time.
    import jwt
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

JWT_ALGORITHMS = ("HS256", "RS256")


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


def verify_jwt(token: str, settings: JwtSettings, known_roles: frozenset[str] | None) -> Identity:
    """The identity a signed, current JWT for this audience and issuer names."""
    import jwt

    try:
        algorithm = jwt.get_unverified_header(token).get("alg")
    except jwt.InvalidTokenError:
        raise AuthenticationError("the token is neither a known API key nor a well-formed JWT") from None
    if algorithm not in settings.algorithms:
        accepted = ", ".join(settings.algorithms)
        raise AuthenticationError(f"the token's signing algorithm is not accepted (accepted: {accepted})")
    key = settings.hs256_secret if algorithm == "HS256" else settings.rs256_public_key
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key=cast(Any, key),
            algorithms=[algorithm],
            audience=settings.audience,
            issuer=settings.issuer,
            leeway=settings.leeway,
            options={"require": ["exp", "iss", "aud"]},
        )
    except jwt.InvalidTokenError as error:
        raise AuthenticationError(_jwt_problem(error, settings)) from None
    caller, role = _caller(claims, settings.caller_claim), _role(claims, settings.role_claim, known_roles)
    return Identity(caller, role, "jwt", issuer=settings.issuer)


def _jwt_problem(error: jwt.InvalidTokenError, settings: JwtSettings) -> str:
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
        return f"the token is not meant for this gateway (audience must be {settings.audience})"
    if isinstance(error, jwt.MissingRequiredClaimError):
        return f"the token has no '{error.claim}' claim, which is required"
    if isinstance(error, jwt.exceptions.InvalidSubjectError):
        return "the token's 'sub' claim is not a string"
    return "the token is not a well-formed JWT"


def _claim(claims: Mapping[str, Any], dotted: str) -> Any:
    """The value at a dotted claim path (`realm_access.role`), or None."""
    value: Any = claims
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _caller(claims: Mapping[str, Any], name: str) -> str:
    """The caller name a token's caller claim gives."""
    value = _claim(claims, name)
    if value is None:
        raise AuthenticationError(f"the token has no '{name}' claim naming the caller")
    if not isinstance(value, str) or not CALLER.fullmatch(value):
        raise AuthenticationError(f"the token's '{name}' claim is not a usable caller name")
    return value


def _role(claims: Mapping[str, Any], name: str, known_roles: frozenset[str] | None) -> str:
    """The role a token's role claim gives: a string, or the first known role of a list."""
    value = _claim(claims, name)
    if value is None:
        raise AuthenticationError(f"the token has no '{name}' claim naming the caller's role")
    candidates = value if isinstance(value, list) else [value]
    if not all(isinstance(item, str) for item in candidates):
        raise AuthenticationError(f"the token's '{name}' claim is not a role name or a list of role names")
    for item in candidates:
        if item and (known_roles is None or item in known_roles):
            return cast(str, item)
    raise AuthenticationError(f"the token's '{name}' claim names no configured role")
