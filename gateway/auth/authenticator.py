"""Who the caller is: identities, API key hashes, JWT verification, and the `auth` config section.

Pure apart from reading a public key file named in the configuration: the HTTP edge
(gateway/auth/middleware.py) hands this module an `Authorization` header and gets an `Identity` back.
Keys and tokens are never logged, kept in plain text, or echoed in an error.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO, cast

import jwt
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from gateway.config.schema import ConfigProblems, validate_section
from gateway.errors import GatewayError
from gateway.session import state_key

Method = Literal["api_key", "jwt", "anonymous", "local", "stdio"]
ChallengeError = Literal["invalid_request", "invalid_token"]

ANONYMOUS_CALLER = "anonymous"
LOCAL_CALLER = "local"
MIN_KEY_LENGTH = 16
MIN_HS256_SECRET = 32
MIN_RSA_BITS = 2048
# RFC 6750 b64token: the characters a Bearer credential may hold.
TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
CALLER = re.compile(r"[^\x00-\x1f\x7f]{1,256}")
TOKEN68_RULE = "letters, digits and -._~+/ (the characters a Bearer token may hold)"
JWT_ALGORITHMS = ("HS256", "RS256")


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

    @property
    def key(self) -> str:
        """Who this is, unambiguously: how the caller signed in, and as whom.

        `api_key:<caller>`, `jwt:<issuer>:<subject>`, `stdio:<caller>` or, with authentication
        off, `local:local`; every anonymous request has the key `anonymous`, and each anonymous
        session one of its own (`caller_key`).
        """
        if self.method == "anonymous":
            return state_key(self.method)
        if self.method == "jwt":
            return state_key(self.method, self.issuer or "", self.caller)
        return state_key(self.method, self.caller)


def caller_key(identity: Identity, session_id: str) -> str:
    """The key a session's state hangs on: the identity's, or an anonymous session's very own."""
    return state_key(identity.method, session_id) if identity.method == "anonymous" else identity.key


def handle_key(identity: Identity, handle: str) -> str:
    """The id of a stateless-era caller's state under `handle`: distinct for every (caller, handle)."""
    return state_key("stateless", identity.key, handle)


class AuthenticationError(GatewayError):
    """The request carries no usable credential; answered with HTTP 401.

    `error` is the RFC 6750 error code for the challenge: None when no credential was sent,
    "invalid_request" when the header is malformed, "invalid_token" when the credential is bad.
    """

    def __init__(self, message: str, *, error: ChallengeError | None = "invalid_token") -> None:
        super().__init__(message)
        self.error = error


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One accepted API key, held only as the SHA-256 digest of the key."""

    caller: str
    role: str
    digest: bytes


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


@dataclass(frozen=True, slots=True)
class AuthSettings:
    """The validated `auth` section; the default is authentication off."""

    enabled: bool = False
    anonymous_role: str | None = None
    resource_url: str | None = None
    authorization_servers: tuple[str, ...] = ()
    scopes_supported: tuple[str, ...] = ()
    api_keys: tuple[ApiKey, ...] = ()
    jwt: JwtSettings | None = None
    known_roles: frozenset[str] | None = None
    plain_keys: tuple[str, ...] = field(default=(), repr=False)
    """The keys the file gives in plain, kept only so that redaction can hide them."""

    @classmethod
    def from_config(
        cls,
        section: Any,
        *,
        source_file: str,
        base_dir: Path | None = None,
        known_roles: Collection[str] | None = None,
    ) -> AuthSettings:
        """Settings from the (variable-expanded) `auth` section; ConfigProblems names every mistake.

        `base_dir` (default: the file's directory) resolves a relative `rs256_public_key_file`.
        `known_roles`, when given, are the configured role names: roles named here must be among
        them, and a list-valued role claim picks its first known role.
        """
        roles = frozenset(known_roles) if known_roles is not None else None
        if section is None:
            return cls(known_roles=roles)
        # Values are never echoed: the section holds keys and secrets.
        validate_section(section, _SCHEMA, section="auth", source_file=source_file, hide_values=True)
        return _build(section, base_dir or Path(source_file).parent, roles, source_file)


def hash_key(key: str) -> str:
    """The hex SHA-256 of an API key, as written in `key_sha256`."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_problem(key: str) -> str | None:
    """Why `key` cannot serve as an API key, or None when it can."""
    if len(key) < MIN_KEY_LENGTH:
        return f"an API key must be at least {MIN_KEY_LENGTH} characters"
    if not TOKEN68.fullmatch(key):
        return f"an API key may hold only {TOKEN68_RULE}"
    return None


def print_key_hash(key: str | None, *, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    """The `hash-key` command: print the key_sha256 of `key`, or of a key read from stdin; exit status."""
    if key is None:
        # Reading the key keeps it out of shell history and the process list.
        key = getpass.getpass("API key: ") if stdin.isatty() else stdin.readline()
        key = key.strip()
    problem = key_problem(key)
    if problem is not None:
        print(f"error: {problem}", file=stderr)
        return 2
    print(hash_key(key), file=stdout)
    return 0


class Authenticator:
    """Turns an `Authorization` header into an Identity, or raises AuthenticationError."""

    def __init__(self, settings: AuthSettings) -> None:
        self.settings = settings

    def anonymous(self) -> Identity:
        """The identity of a request that carries no credential, when that is allowed."""
        return Identity(ANONYMOUS_CALLER, self.settings.anonymous_role, "anonymous")

    def authenticate(self, authorization_header: str | None) -> Identity:
        """The caller behind `Authorization: Bearer <API key or JWT>`."""
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
                return _verify_jwt(token, self.settings.jwt, self.settings.known_roles)
            raise AuthenticationError("unknown API key (JWTs are not accepted: auth.jwt is not configured)")
        raise AuthenticationError("unknown API key")

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


def _verify_jwt(token: str, settings: JwtSettings, known_roles: frozenset[str] | None) -> Identity:
    """The identity a signed, current JWT for this audience and issuer names."""
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


_STRING = {"type": "string"}
_TEXT = {**_STRING, "minLength": 1}
_URL = {"type": "string", "pattern": r"^https?://[^/?#\s]+[^?#\s]*$", "description": "an http(s) URL"}


def _object(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    """The schema of a map with exactly these keys."""
    return {"type": "object", "additionalProperties": False, "required": list(required), "properties": properties}


_API_KEY = _object(
    {
        "caller": _TEXT,
        "role": _TEXT,
        "key": _STRING,
        "key_sha256": {**_TEXT, "pattern": "^[0-9a-fA-F]{64}$", "description": "64 hex digits"},
    },
    "caller",
    "role",
)
_JWT = _object(
    {
        "issuer": _TEXT,
        "audience": _TEXT,
        "hs256_secret": _STRING,
        "rs256_public_key": _STRING,
        "rs256_public_key_file": _TEXT,
        "role_claim": _TEXT,
        "caller_claim": _TEXT,
        "algorithms": {"type": "array", "minItems": 1, "items": {"enum": list(JWT_ALGORITHMS)}},
        "leeway": {"type": "number", "minimum": 0},
    },
    "issuer",
)
_SCHEMA = _object(
    {
        "enabled": {"type": "boolean"},
        "anonymous_role": {"type": ["string", "null"], "minLength": 1},
        "resource_url": _URL,
        "authorization_servers": {"type": "array", "items": _URL},
        "scopes_supported": {"type": "array", "items": _TEXT},
        "api_keys": {"type": "array", "items": _API_KEY},
        "jwt": _JWT,
    }
)


def _build(section: Mapping[str, Any], base_dir: Path, roles: frozenset[str] | None, source: str) -> AuthSettings:
    """Settings from a section that matches the schema, checking what the schema cannot say."""
    problems: list[tuple[str, str]] = []

    def check_role(role: str, path: str) -> None:
        if roles is not None and role not in roles:
            problems.append((path, f"unknown role '{role}'; configured roles: {', '.join(sorted(roles)) or 'none'}"))

    keys: list[ApiKey] = []
    for index, entry in enumerate(section.get("api_keys", [])):
        path = f"auth.api_keys[{index}]"
        if not CALLER.fullmatch(entry["caller"]):
            problems.append((f"{path}.caller", "must be at most 256 characters, without control characters"))
        check_role(entry["role"], f"{path}.role")
        if ("key" in entry) == ("key_sha256" in entry):
            problems.append((path, "give exactly one of 'key' (plain, hashed at load) or 'key_sha256'"))
            continue
        if "key" in entry and (problem := key_problem(entry["key"])) is not None:
            problems.append((f"{path}.key", problem))
            continue
        digest = (
            hashlib.sha256(entry["key"].encode()).digest() if "key" in entry else bytes.fromhex(entry["key_sha256"])
        )
        if any(hmac.compare_digest(digest, other.digest) for other in keys):
            problems.append((path, "the same key is listed twice; each key must name one caller"))
        keys.append(ApiKey(entry["caller"], entry["role"], digest))
    anonymous_role = section.get("anonymous_role")
    if anonymous_role is not None:
        check_role(anonymous_role, "auth.anonymous_role")
    jwt_settings = _jwt(section["jwt"], section.get("resource_url"), base_dir, problems) if "jwt" in section else None
    enabled = section.get("enabled", bool(section.get("api_keys")) or "jwt" in section)
    if enabled and not section.get("api_keys") and "jwt" not in section:
        problems.append(("auth.enabled", "is true, but neither auth.api_keys nor auth.jwt is configured"))
    if problems:
        raise ConfigProblems(source, problems)
    servers = section.get("authorization_servers")
    if servers is None:
        servers = [jwt_settings.issuer] if jwt_settings is not None else []
    return AuthSettings(
        enabled=enabled,
        anonymous_role=anonymous_role,
        resource_url=section.get("resource_url"),
        authorization_servers=tuple(servers),
        scopes_supported=tuple(section.get("scopes_supported", ())),
        api_keys=tuple(keys),
        jwt=jwt_settings,
        known_roles=roles,
        plain_keys=tuple(entry["key"] for entry in section.get("api_keys", []) if "key" in entry),
    )


def _jwt(
    raw: Mapping[str, Any], resource_url: str | None, base_dir: Path, problems: list[tuple[str, str]]
) -> JwtSettings | None:
    """The `auth.jwt` settings, or None after recording why they are unusable."""
    count = len(problems)
    audience = raw.get("audience", resource_url)
    if audience is None:
        problems.append(
            ("auth.jwt", "missing required key 'audience' (it defaults to auth.resource_url when that is set)")
        )
    secret = raw.get("hs256_secret")
    if secret is not None and len(secret) < MIN_HS256_SECRET:
        problems.append(("auth.jwt.hs256_secret", f"must be at least {MIN_HS256_SECRET} characters (256 bits)"))
    public_key = _public_key(raw, base_dir, problems)
    given = {"HS256": secret is not None, "RS256": "rs256_public_key" in raw or "rs256_public_key_file" in raw}
    algorithms = tuple(raw.get("algorithms", [name for name in JWT_ALGORITHMS if given[name]]))
    if not algorithms:
        problems.append(
            ("auth.jwt", "give hs256_secret or rs256_public_key (or rs256_public_key_file) to verify tokens")
        )
    for name in algorithms:
        if not given[name]:
            key_name = "hs256_secret" if name == "HS256" else "rs256_public_key or rs256_public_key_file"
            problems.append(("auth.jwt.algorithms", f"{name} needs auth.jwt.{key_name}"))
    if len(problems) > count or audience is None:
        return None
    return JwtSettings(
        issuer=raw["issuer"],
        audience=audience,
        algorithms=tuple(dict.fromkeys(algorithms)),
        hs256_secret=secret,
        rs256_public_key=public_key,
        role_claim=raw.get("role_claim", "role"),
        caller_claim=raw.get("caller_claim", "sub"),
        leeway=float(raw.get("leeway", 30)),
    )


def _public_key(raw: Mapping[str, Any], base_dir: Path, problems: list[tuple[str, str]]) -> RSAPublicKey | None:
    """The RSA public key given inline or in a file, or None (recording a problem if it is unusable)."""
    if "rs256_public_key" in raw and "rs256_public_key_file" in raw:
        problems.append(("auth.jwt", "give one of rs256_public_key and rs256_public_key_file, not both"))
        return None
    if "rs256_public_key_file" in raw:
        path, file = "auth.jwt.rs256_public_key_file", base_dir / Path(raw["rs256_public_key_file"]).expanduser()
        try:
            pem = file.read_bytes()
        except OSError as error:
            problems.append((path, f"cannot read {file}: {error.strerror}"))
            return None
    elif "rs256_public_key" in raw:
        path, pem = "auth.jwt.rs256_public_key", raw["rs256_public_key"].encode()
    else:
        return None
    try:
        key = load_pem_public_key(pem)
    except ValueError:
        problems.append((path, "is not a PEM public key ('-----BEGIN PUBLIC KEY-----' ...)"))
        return None
    if not isinstance(key, RSAPublicKey):
        problems.append((path, "is not an RSA public key, which RS256 needs"))
        return None
    if key.key_size < MIN_RSA_BITS:
        problems.append((path, f"is a {key.key_size}-bit key; RS256 needs at least {MIN_RSA_BITS} bits"))
        return None
    return key
