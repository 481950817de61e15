"""Tests for identities, API keys, JWT verification and the `auth` config section."""

from __future__ import annotations

import hashlib
import io
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.auth.apikeys import hash_key
from gateway.auth.authenticator import Authenticator
from gateway.auth.identity import AuthenticationError, Identity
from gateway.auth.settings import AuthSettings
from gateway.cli.main import print_key_hash
from gateway.config.loading import parse_config
from gateway.errors import ConfigError
from gateway.problems import ConfigProblems

SOURCE = "/etc/gateway.yaml"
ALICE_KEY = "alice-key-0123456789abcdef"
BOT_KEY = "bot-key-fedcba9876543210"
SECRET = "s" * 40
ISSUER = "https://issuer.example"
AUDIENCE = "mcp-gateway"


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    """One RSA key for the module: generating it is the slowest step of these tests."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem(key: rsa.RSAPrivateKey) -> str:
    """The PEM text of the public half of `key`."""
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def settings(section: Any, **options: Any) -> AuthSettings:
    """Settings from an `auth` section, as the gateway reads them."""
    return AuthSettings.from_config(section, source_file=SOURCE, **options)


def authenticate(section: Any, header: str | None, **options: Any) -> Identity:
    """The identity an Authorization header gets under `section`."""
    return Authenticator(settings(section, **options)).authenticate(header)


def refusal(section: Any, header: str | None, **options: Any) -> AuthenticationError:
    """The error an Authorization header gets under `section`."""
    with pytest.raises(AuthenticationError) as caught:
        authenticate(section, header, **options)
    return caught.value


def problems(section: Any, **options: Any) -> list[tuple[str, str]]:
    """Every (path, problem) the section is refused with."""
    with pytest.raises(ConfigProblems) as caught:
        settings(section, **options)
    return list(caught.value.problems)


KEYS = {
    "api_keys": [
        {"caller": "alice", "role": "admin", "key_sha256": hash_key(ALICE_KEY)},
        {"caller": "ci-bot", "role": "intern", "key": BOT_KEY},
    ]
}


def hs_section(**jwt_options: Any) -> dict[str, Any]:
    """An auth section accepting HS256 JWTs."""
    return {"jwt": {"issuer": ISSUER, "audience": AUDIENCE, "hs256_secret": SECRET, **jwt_options}}


def token(key: Any = SECRET, algorithm: str = "HS256", **claims: Any) -> str:
    """A signed JWT with sensible claims, overridden (or removed, with None) by `claims`."""
    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "carol", "role": "analyst", "exp": now + 300, "iat": now}
    body.update(claims)
    return jwt.encode({k: v for k, v in body.items() if v is not None}, key, algorithm=algorithm)


def test_hash_key_is_the_hex_sha256_of_the_key() -> None:
    assert hash_key(ALICE_KEY) == hashlib.sha256(ALICE_KEY.encode()).hexdigest()


def test_a_hashed_key_authenticates_its_caller_and_role() -> None:
    assert authenticate(KEYS, f"Bearer {ALICE_KEY}") == Identity("alice", "admin", "api_key")


def test_a_plain_key_authenticates_and_is_not_kept() -> None:
    loaded = settings(KEYS)
    assert Authenticator(loaded).authenticate(f"bearer {BOT_KEY}") == Identity("ci-bot", "intern", "api_key")
    assert BOT_KEY not in repr(loaded)


def test_a_key_from_the_environment_is_read_through_the_gateway_config(tmp_path: Path) -> None:
    data = {"servers": {}, "auth": {"api_keys": [{"caller": "ci-bot", "role": "intern", "key": "${CI_KEY}"}]}}
    config = parse_config(data, source=SOURCE, base_dir=tmp_path, environ={"CI_KEY": BOT_KEY})
    assert Authenticator(config.auth).authenticate(f"Bearer {BOT_KEY}").caller == "ci-bot"


def test_a_wrong_key_is_refused_as_unknown() -> None:
    error = refusal(KEYS, "Bearer not-a-key-of-anyone-here")
    assert error.message == "unknown API key"
    assert error.error == "invalid_token"


def test_a_missing_header_asks_for_credentials_without_an_error_code() -> None:
    error = refusal(KEYS, None)
    assert "authentication required" in error.message
    assert error.error is None


def test_a_missing_header_gets_the_anonymous_role_when_one_is_configured() -> None:
    assert authenticate({**KEYS, "anonymous_role": "guest"}, None) == Identity("anonymous", "guest", "anonymous")


def test_a_bad_credential_never_falls_back_to_the_anonymous_role() -> None:
    assert refusal({**KEYS, "anonymous_role": "guest"}, "Bearer wrong-key-0123456789").message == "unknown API key"


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (f"Basic {ALICE_KEY}", "the Authorization header must use the Bearer scheme"),
        ("Bearer", "the Bearer token is empty"),
        ("Bearer   ", "the Bearer token is empty"),
        ("Bearer a b", "the Bearer token may hold only"),
        ("Bearer key\u00e9", "the Bearer token may hold only"),
    ],
)
def test_a_malformed_header_is_an_invalid_request(header: str, message: str) -> None:
    error = refusal(KEYS, header)
    assert error.message.startswith(message)
    assert error.error == "invalid_request"


def test_without_auth_everyone_is_the_one_local_caller_with_the_anonymous_role() -> None:
    assert authenticate(None, "Bearer anything-at-all-really") == Identity("local", None, "local")
    disabled = {**KEYS, "enabled": False, "anonymous_role": "guest"}
    assert authenticate(disabled, f"Bearer {ALICE_KEY}") == Identity("local", "guest", "local")


def test_an_hs256_jwt_authenticates_its_subject_and_role() -> None:
    assert authenticate(hs_section(), f"Bearer {token()}") == Identity("carol", "analyst", "jwt", issuer=ISSUER)


def test_an_rs256_jwt_authenticates_against_the_public_key(rsa_key: rsa.RSAPrivateKey) -> None:
    section = {"jwt": {"issuer": ISSUER, "audience": AUDIENCE, "rs256_public_key": pem(rsa_key)}}
    assert authenticate(section, f"Bearer {token(rsa_key, 'RS256')}") == Identity(
        "carol", "analyst", "jwt", issuer=ISSUER
    )


def test_an_rs256_public_key_file_is_read_relative_to_the_config(tmp_path: Path, rsa_key: rsa.RSAPrivateKey) -> None:
    (tmp_path / "issuer.pem").write_text(pem(rsa_key))
    section = {"jwt": {"issuer": ISSUER, "audience": AUDIENCE, "rs256_public_key_file": "issuer.pem"}}
    loaded = AuthSettings.from_config(section, source_file=str(tmp_path / "gateway.yaml"))
    assert Authenticator(loaded).authenticate(f"Bearer {token(rsa_key, 'RS256')}").method == "jwt"


def test_keys_and_jwts_are_accepted_side_by_side() -> None:
    section = {**KEYS, **hs_section()}
    assert authenticate(section, f"Bearer {ALICE_KEY}").method == "api_key"
    assert authenticate(section, f"Bearer {token()}").method == "jwt"


def test_the_role_can_come_from_a_nested_claim() -> None:
    header = f"Bearer {token(role=None, realm_access={'role': 'admin'})}"
    assert authenticate(hs_section(role_claim="realm_access.role"), header).role == "admin"


def test_a_list_role_claim_gives_the_first_known_role() -> None:
    header = f"Bearer {token(role=['offline_access', 'intern', 'admin'])}"
    assert authenticate(hs_section(), header, known_roles={"admin", "intern"}).role == "intern"
    assert authenticate(hs_section(), header).role == "offline_access"


def test_the_caller_can_come_from_another_claim() -> None:
    header = f"Bearer {token(email='carol@example.org')}"
    assert authenticate(hs_section(caller_claim="email"), header).caller == "carol@example.org"


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        ({"exp": int(time.time()) - 120}, "the token has expired"),
        ({"iss": "https://elsewhere.example"}, f"the token was not issued by {ISSUER}"),
        ({"aud": "another-service"}, f"the token is not meant for this gateway (audience must be {AUDIENCE})"),
        ({"exp": None}, "the token has no 'exp' claim, which is required"),
        ({"nbf": int(time.time()) + 3600}, "the token is not valid yet (nbf or iat lies in the future)"),
        ({"role": None}, "the token has no 'role' claim naming the caller's role"),
        ({"role": 7}, "the token's 'role' claim is not a role name or a list of role names"),
        ({"role": ["nobody"]}, "the token's 'role' claim names no configured role"),
        ({"sub": None}, "the token has no 'sub' claim naming the caller"),
    ],
)
def test_a_jwt_failing_a_check_is_refused_with_that_check_named(claims: dict[str, Any], message: str) -> None:
    bad = token(**claims)
    error = refusal(hs_section(), f"Bearer {bad}", known_roles={"analyst"})
    assert error.message == message
    assert bad not in error.message
    assert error.error == "invalid_token"


def test_a_jwt_signed_with_another_secret_does_not_verify() -> None:
    assert refusal(hs_section(), f"Bearer {token('x' * 40)}").message == "the token's signature does not verify"


def test_an_expired_token_is_still_accepted_within_the_leeway() -> None:
    header = f"Bearer {token(exp=int(time.time()) - 10)}"
    assert authenticate(hs_section(leeway=60), header).caller == "carol"


def test_a_jwt_with_an_algorithm_not_configured_is_refused(rsa_key: rsa.RSAPrivateKey) -> None:
    section = {"jwt": {"issuer": ISSUER, "audience": AUDIENCE, "rs256_public_key": pem(rsa_key)}}
    unsigned = jwt.encode({"sub": "eve"}, "", algorithm="none")
    for header in (f"Bearer {token()}", f"Bearer {unsigned}"):
        assert refusal(section, header).message == "the token's signing algorithm is not accepted (accepted: RS256)"


def test_a_jwt_is_refused_when_no_jwt_section_is_configured() -> None:
    assert "auth.jwt is not configured" in refusal(KEYS, f"Bearer {token()}").message


def test_a_dotted_token_that_is_not_a_jwt_is_refused_clearly() -> None:
    error = refusal(hs_section(), "Bearer a.b.c")
    assert error.message == "the token is neither a known API key nor a well-formed JWT"


def test_the_audience_defaults_to_the_resource_url_and_the_issuer_is_the_authorization_server() -> None:
    section = {"resource_url": "http://127.0.0.1:8000/mcp", "jwt": {"issuer": ISSUER, "hs256_secret": SECRET}}
    loaded = settings(section)
    assert loaded.jwt is not None
    assert loaded.jwt.audience == "http://127.0.0.1:8000/mcp"
    assert loaded.authorization_servers == (ISSUER,)
    assert loaded.enabled


def test_config_problems_name_each_path() -> None:
    section = {
        "anonymus_role": "guest",
        "api_keys": [
            {"caller": "alice", "role": "admin", "key_sha256": "abc"},
            {"caller": "bob", "role": 3, "key": BOT_KEY},
        ],
        "jwt": {"issuer": ISSUER, "leeway": -1},
    }
    assert problems(section) == [
        ("auth.anonymus_role", "unknown key (did you mean 'anonymous_role'?)"),
        ("auth.api_keys[0].key_sha256", "must be 64 hex digits"),
        ("auth.api_keys[1].role", "expected a string, got the number 3"),
        ("auth.jwt.leeway", "must be at least 0"),
    ]  # fmt: skip


def test_a_config_error_is_a_gateway_config_error_naming_the_file() -> None:
    with pytest.raises(ConfigError) as caught:
        settings({"api_keys": [{"caller": "x", "key": BOT_KEY}]})
    assert str(caught.value) == f"{SOURCE}: auth.api_keys[0]: missing required key 'role'"


@pytest.mark.parametrize(
    ("section", "path", "message"),
    [
        ({"api_keys": [{"caller": "a", "role": "r", "key": "short-secret"}]}, "auth.api_keys[0].key", "at least 16"),
        ({"api_keys": [{"caller": "a", "role": "r", "key": BOT_KEY + "!"}]}, "auth.api_keys[0].key", "may hold only"),
        ({"api_keys": [{"caller": "a", "role": "r"}]}, "auth.api_keys[0]", "give exactly one of 'key'"),
        (
            {"api_keys": [{"caller": "a", "role": "r", "key": BOT_KEY}, {"caller": "b", "role": "r", "key": BOT_KEY}]},
            "auth.api_keys[1]",
            "the same key is listed twice",
        ),
        ({"api_keys": [{"caller": "a\nb", "role": "r", "key": BOT_KEY}]}, "auth.api_keys[0].caller", "control"),
        ({"enabled": True}, "auth.enabled", "neither auth.api_keys nor auth.jwt"),
        ({"jwt": {"issuer": ISSUER, "hs256_secret": SECRET}}, "auth.jwt", "missing required key 'audience'"),
        ({"jwt": {"issuer": ISSUER, "audience": "a", "hs256_secret": "short"}}, "auth.jwt.hs256_secret", "32"),
        ({"jwt": {"issuer": "http://idp.example", "audience": "a"}}, "auth.jwt.issuer", "must be an https URL"),
        (
            {"jwt": {"issuer": ISSUER, "audience": "a", "hs256_secret": SECRET, "algorithms": ["ES256"]}},
            "auth.jwt.algorithms",
            "ES256 needs the issuer's keys",
        ),
        (
            {"jwt": {"issuer": ISSUER, "audience": "a", "role_rules": [{"claim": "groups", "role": "admin"}]}},
            "auth.jwt.role_rules[0]",
            "value",
        ),
        (
            {"jwt": {"issuer": ISSUER, "audience": "a", "hs256_secret": SECRET, "algorithms": ["RS256"]}},
            "auth.jwt.algorithms",
            "RS256 needs auth.jwt.rs256_public_key",
        ),
        ({"jwt": {"issuer": ISSUER, "audience": "a", "algorithms": ["ES512"]}}, "auth.jwt.algorithms[0]", "HS256"),
        ({"jwt": {"issuer": ISSUER, "audience": "a", "rs256_public_key": "nope"}}, "auth.jwt.rs256_public_key", "PEM"),
        (
            {"jwt": {"issuer": ISSUER, "audience": "a", "rs256_public_key_file": "missing.pem"}},
            "auth.jwt.rs256_public_key_file",
            "cannot read",
        ),
        ({"resource_url": "ftp://x"}, "auth.resource_url", "an http(s) URL"),
    ],
)
def test_a_bad_auth_section_is_refused_with_its_path(section: dict[str, Any], path: str, message: str) -> None:
    found = problems(section)
    assert any(where == path and message in text for where, text in found), found
    assert all("short-secret" not in text and BOT_KEY not in text for _, text in found)


def test_a_small_rsa_key_is_refused() -> None:
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    found = problems({"jwt": {"issuer": ISSUER, "audience": "a", "rs256_public_key": pem(small)}})
    assert found == [("auth.jwt.rs256_public_key", "is a 1024-bit key; RS256 needs at least 2048 bits")]


def test_roles_must_be_known_when_the_roles_are_given() -> None:
    section = {**KEYS, "anonymous_role": "guest"}
    assert problems(section, known_roles={"admin"}) == [
        ("auth.api_keys[1].role", "unknown role 'intern'; configured roles: admin"),
        ("auth.anonymous_role", "unknown role 'guest'; configured roles: admin"),
    ]


def test_print_key_hash_prints_the_hash_of_an_argument_or_of_stdin() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert print_key_hash(ALICE_KEY, stdin=io.StringIO(), stdout=out, stderr=err) == 0
    assert print_key_hash(None, stdin=io.StringIO(ALICE_KEY + "\n"), stdout=out, stderr=err) == 0
    assert out.getvalue() == f"{hash_key(ALICE_KEY)}\n" * 2


def test_print_key_hash_refuses_a_short_key() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert print_key_hash(None, stdin=io.StringIO("short\n"), stdout=out, stderr=err) == 2
    assert out.getvalue() == ""
    assert "at least 16 characters" in err.getvalue()


def test_an_identity_s_key_names_how_and_as_whom_it_signed_in_and_is_worked_out_once() -> None:
    jwt_caller = Identity("alice", "dev", "jwt", issuer="https://id.example")
    keys = {
        Identity("alice", "dev", "api_key"): "api_key:alice",
        jwt_caller: "jwt:https%3A//id.example:alice",
        Identity("a:b", None, "stdio"): "stdio:a%3Ab",
        Identity("local", None, "local"): "local:local",
        Identity("anonymous", None, "anonymous"): "anonymous",
    }
    assert {identity: identity.key for identity in keys} == keys
    assert jwt_caller.key is jwt_caller.key
    assert jwt_caller == Identity("alice", "dev", "jwt", issuer="https://id.example")
    assert "key" not in repr(jwt_caller)


def test_the_web_sign_in_needs_an_issuer_with_discovery_and_its_client_secret_is_redacted() -> None:
    signin = {"client_id": "web", "client_secret": "web-client-secret-0123456789"}
    found = problems({"jwt": {"issuer": ISSUER, "audience": "a", "hs256_secret": SECRET}, "web_signin": signin})
    assert ("auth.web_signin", "needs auth.jwt with an issuer whose keys are found by discovery") in found
    settings = AuthSettings.from_config(
        {"jwt": {"issuer": ISSUER, "audience": "a"}, "web_signin": signin}, source_file="gateway.yaml"
    )
    assert settings.web_signin is not None and settings.web_signin.scopes == ("openid",)
    assert "web-client-secret-0123456789" in settings.plain_keys
    assert "web-client-secret" not in repr(settings)
