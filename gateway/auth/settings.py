"""The `auth` section of the configuration: its schema, and the checked `AuthSettings` built from it.

Reads a public key file the section names; nothing else here touches the outside.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.auth.apikeys import ApiKey, key_problem
from gateway.auth.identity import CALLER
from gateway.auth.oidc import url_problem
from gateway.auth.roles import RoleRule
from gateway.auth.tokens import DISCOVERY_ALGORITHMS, JWT_ALGORITHMS, STATIC_ALGORITHMS, JwtSettings
from gateway.problems import ConfigProblems, validate_section

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

MIN_HS256_SECRET = 32
MIN_RSA_BITS = 2048


@dataclass(frozen=True, slots=True)
class WebSignin:
    """`auth.web_signin`: the web page's client at the issuer of `auth.jwt`, for OpenID Connect sign-in."""

    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    scopes: tuple[str, ...] = ("openid",)


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
    web_signin: WebSignin | None = None
    known_roles: frozenset[str] | None = None
    plain_keys: tuple[str, ...] = field(default=(), repr=False)
    """The keys (and the web client's secret) the file gives in plain, kept only so that redaction can hide them."""

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
_ROLE_RULE = {
    **_object({"claim": _TEXT, "value": _TEXT, "role": _TEXT}, "role"),
    "dependentRequired": {"claim": ["value"], "value": ["claim"]},
}
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
        "role_rules": {"type": "array", "minItems": 1, "items": _ROLE_RULE},
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
        "web_signin": _object(
            {
                "client_id": _TEXT,
                "client_secret": _TEXT,
                "scopes": {"type": "array", "items": _TEXT, "contains": {"const": "openid"}},
            },
            "client_id",
        ),
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
    for index, rule in enumerate(section.get("jwt", {}).get("role_rules", [])):
        check_role(rule["role"], f"auth.jwt.role_rules[{index}].role")
    signin = section.get("web_signin")
    if signin is not None and (jwt_settings is None or not jwt_settings.discovery):
        problems.append(("auth.web_signin", "needs auth.jwt with an issuer whose keys are found by discovery"))
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
        web_signin=None
        if signin is None
        else WebSignin(signin["client_id"], signin.get("client_secret"), tuple(signin.get("scopes", ["openid"]))),
        known_roles=roles,
        plain_keys=tuple(entry["key"] for entry in section.get("api_keys", []) if "key" in entry)
        + tuple(secret for secret in [(signin or {}).get("client_secret")] if secret),
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
    # Without a configured key, the keys are the issuer's, found by OpenID discovery.
    discovery = not any(given.values())
    if discovery:
        algorithms = tuple(raw.get("algorithms", DISCOVERY_ALGORITHMS))
        if (problem := url_problem(raw["issuer"])) is not None:
            problems.append(
                ("auth.jwt.issuer", f"{problem}: its signing keys are fetched from it (or configure a key)")
            )
        for name in algorithms:
            if name not in DISCOVERY_ALGORITHMS:
                problems.append(("auth.jwt.algorithms", f"{name} needs auth.jwt.hs256_secret"))
    else:
        algorithms = tuple(raw.get("algorithms", [name for name in STATIC_ALGORITHMS if given[name]]))
        for name in algorithms:
            if name not in STATIC_ALGORITHMS:
                problems.append(("auth.jwt.algorithms", f"{name} needs the issuer's keys: configure no static key"))
            elif not given[name]:
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
        discovery=discovery,
        role_rules=tuple(
            RoleRule(rule["role"], rule.get("claim"), rule.get("value")) for rule in raw.get("role_rules", ())
        ),
    )


def _public_key(raw: Mapping[str, Any], base_dir: Path, problems: list[tuple[str, str]]) -> RSAPublicKey | None:
    """The RSA public key given inline or in a file, or None (recording a problem if it is unusable)."""
    # Loaded here, not at import: only a configuration with an RS256 key needs cryptography.
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

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
