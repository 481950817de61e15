"""The pure parts of identity: key sets, role rules, remembered tokens and the sign-in flow's cookie."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from gateway.auth import codeflow
from gateway.auth.identity import AuthenticationError, Identity
from gateway.auth.jwks import DEFAULT_LIFETIME, MAX_LIFETIME, MIN_LIFETIME, JwksError, lifetime, parse_jwks
from gateway.auth.oidc import url_problem
from gateway.auth.roles import RoleRule, matching_rule
from gateway.auth.verified import VerifiedTokens

ALL = ("RS256", "PS256", "ES256", "EdDSA")


def jwk(kind: str, **fields: Any) -> dict[str, Any]:
    """The public JWK of a new key of `kind` (rsa, ec or okp)."""
    if kind == "rsa":
        public: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
        data = RSAAlgorithm.to_jwk(public, as_dict=True)
    elif kind == "ec":
        data = ECAlgorithm.to_jwk(ec.generate_private_key(ec.SECP256R1()).public_key(), as_dict=True)
    else:
        data = OKPAlgorithm.to_jwk(ed25519.Ed25519PrivateKey.generate().public_key(), as_dict=True)
    return {**data, **fields}


def test_an_rsa_key_without_alg_serves_rs256_and_ps256_and_one_with_alg_only_that() -> None:
    keys = parse_jwks({"keys": [jwk("rsa", kid="a"), jwk("rsa", kid="b", alg="PS256")]}, ALL)
    assert {pair for pair in keys.keys} == {("a", "RS256"), ("a", "PS256"), ("b", "PS256")}
    assert keys.key("b", "RS256") is None and keys.key("b", "PS256") is not None


def test_ec_and_okp_keys_serve_es256_and_eddsa_and_encryption_keys_are_skipped() -> None:
    document = {"keys": [jwk("ec", kid="e"), jwk("okp", kid="o"), jwk("rsa", kid="x", use="enc"), "junk"]}
    keys = parse_jwks(document, ALL)
    assert set(keys.keys) == {("e", "ES256"), ("o", "EdDSA")}
    assert keys.kids() == ["e", "o"]


def test_a_token_without_kid_uses_the_only_key_of_its_algorithm() -> None:
    keys = parse_jwks({"keys": [jwk("ec"), jwk("rsa", kid="r1"), jwk("rsa", kid="r2")]}, ALL)
    assert keys.key(None, "ES256") is not None
    assert keys.key(None, "RS256") is None  # two RSA keys: a kid must say which


def test_a_key_set_without_a_usable_key_is_refused_with_the_reason() -> None:
    with pytest.raises(JwksError, match="no usable signing key"):
        parse_jwks({"keys": [jwk("ec", kid="e")]}, ("RS256",))
    with pytest.raises(JwksError, match="'keys' list"):
        parse_jwks(["not", "a", "set"], ALL)


def test_a_short_rsa_key_is_not_used() -> None:
    short = rsa.generate_private_key(public_exponent=65537, key_size=1024).public_key()
    with pytest.raises(JwksError):
        parse_jwks({"keys": [{**RSAAlgorithm.to_jwk(short, as_dict=True), "kid": "s"}]}, ALL)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [(None, DEFAULT_LIFETIME), ("public, max-age=600", 600.0), ("max-age=1", MIN_LIFETIME),
     ("max-age=9999999", MAX_LIFETIME)],
)  # fmt: skip
def test_keys_are_used_for_their_max_age_within_bounds(header: str | None, seconds: float) -> None:
    assert lifetime(header) == seconds


@pytest.mark.parametrize(
    ("url", "allowed"),
    [("https://idp.example", True), ("http://127.0.0.1:8080", True), ("http://localhost", True),
     ("http://[::1]:9000", True), ("http://idp.example", False), ("ftp://idp.example", False)],
)  # fmt: skip
def test_keys_are_fetched_over_https_or_from_loopback_only(url: str, allowed: bool) -> None:
    assert (url_problem(url) is None) == allowed


def test_the_first_matching_role_rule_wins_and_a_rule_without_claim_matches_everyone() -> None:
    rules = (RoleRule("admin", "groups", "ops"), RoleRule("viewer", "realm.team", "blue"), RoleRule("user"))
    assert matching_rule({"groups": ["staff", "ops"]}, rules) == (0, rules[0])
    assert matching_rule({"groups": "staff", "realm": {"team": "blue"}}, rules) == (1, rules[1])
    assert matching_rule({}, rules) == (2, rules[2])
    assert matching_rule({"groups": ["staff"]}, rules[:2]) is None


def test_a_remembered_token_lasts_until_it_expires_or_the_key_set_changes() -> None:
    tokens, alice = VerifiedTokens(), Identity("alice", "admin", "jwt", issuer="https://idp")
    tokens.put("t", 1, alice, expires=100.0)
    assert tokens.get("t", 1, now=99.0) == alice
    assert tokens.get("t", 1, now=100.0) is None
    tokens.put("t", 1, alice, expires=100.0)
    assert tokens.get("t", 2, now=50.0) is None
    assert tokens.get("t", 1, now=50.0) is None  # the change dropped it for good


def test_remembered_tokens_are_bounded_least_recently_used_first() -> None:
    tokens, someone = VerifiedTokens(limit=2), Identity("x", None, "jwt", issuer="i")
    for token in ("a", "b"):
        tokens.put(token, 0, someone, 10.0)
    tokens.get("a", 0, 0.0)
    tokens.put("c", 0, someone, 10.0)
    assert [tokens.get(token, 0, 0.0) is not None for token in ("a", "b", "c")] == [True, False, True]


def test_the_sign_in_flow_travels_sealed_and_only_its_own_state_opens_it() -> None:
    key = b"k" * 32
    flow = codeflow.start("/audit", now=1000.0)
    sealed = codeflow.seal(key, flow)
    assert codeflow.unseal(key, sealed, flow.state, now=1001.0) == flow
    with pytest.raises(AuthenticationError, match="state differs"):
        codeflow.unseal(key, sealed, "another-state", now=1001.0)
    with pytest.raises(AuthenticationError, match="took too long"):
        codeflow.unseal(key, sealed, flow.state, now=1000.0 + codeflow.FLOW_SECONDS)
    with pytest.raises(AuthenticationError, match="did not start in this browser"):
        codeflow.unseal(b"x" * 32, sealed, flow.state, now=1001.0)
    body, _, mac = sealed.partition(".")
    forged = base64.urlsafe_b64encode(base64.urlsafe_b64decode(body + "==").replace(b"/audit", b"/evil!")).decode()
    with pytest.raises(AuthenticationError, match="did not start in this browser"):
        codeflow.unseal(key, f"{forged.rstrip('=')}.{mac}", flow.state, now=1001.0)
