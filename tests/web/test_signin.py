"""Web sessions: a new id at sign-in, and an end at sign-out, after idling, when the key leaves the
configuration or when the token expires."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gateway.auth.authenticator import Authenticator
from gateway.auth.identity import AuthenticationError
from gateway.config.loading import parse_config
from gateway.web.signin import WebSessions
from tests.support.access import KEYS, auth_section, token_for


class Clock:
    """A hand-moved clock."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def authenticator() -> Authenticator:
    """The test keys and issuer, with their roles."""
    config = parse_config(
        {"auth": auth_section(), "roles": {role: {"allow": ["*"]} for role in KEYS}}, source="t", base_dir="."
    )
    return Authenticator(config.auth)


def test_signing_in_starts_a_new_session_and_ends_the_one_before() -> None:
    sessions = WebSessions(authenticator)
    before = sessions.start()
    signed = sessions.sign_in(before, f"Bearer {KEYS['admin']}\n")
    assert signed.id != before.id and signed.csrf != before.csrf
    assert sessions.get(before.id) is None
    assert sessions.get(signed.id) is signed and signed.identity is not None and signed.identity.role == "admin"


def test_a_wrong_or_empty_credential_names_nobody() -> None:
    sessions = WebSessions(authenticator)
    with pytest.raises(AuthenticationError, match="unknown API key"):
        sessions.sign_in(None, "nope-0123456789")
    with pytest.raises(AuthenticationError, match="paste"):
        sessions.sign_in(None, "   ")


def test_a_session_ends_at_sign_out_and_after_idling() -> None:
    clock = Clock()
    sessions = WebSessions(authenticator, clock=clock, idle=60)
    first, second = sessions.sign_in(None, KEYS["admin"]), sessions.sign_in(None, KEYS["intern"])
    sessions.end(first.id)
    clock.now += 59
    assert sessions.get(first.id) is None and sessions.get(second.id) is second
    clock.now += 61
    assert sessions.get(second.id) is None


def test_a_session_ends_when_its_key_leaves_the_configuration() -> None:
    current = authenticator()
    sessions = WebSessions(lambda: current)
    signed = sessions.sign_in(None, KEYS["intern"])
    current = Authenticator(replace(current.settings, api_keys=current.settings.api_keys[:1]))
    assert sessions.get(signed.id) is None


def test_a_session_ends_when_its_token_expires() -> None:
    wall = Clock()
    token = token_for("alice", "intern", lifetime=300)
    sessions = WebSessions(authenticator, wall_clock=wall)
    signed = sessions.sign_in(None, token)
    assert signed.expires is not None
    wall.now = signed.expires - 1
    assert sessions.get(signed.id) is signed
    wall.now = signed.expires
    assert sessions.get(signed.id) is None


def test_the_oldest_sessions_go_first_past_the_limit() -> None:
    sessions = WebSessions(authenticator, limit=2)
    first, second, third = sessions.start(), sessions.start(), sessions.start()
    assert sessions.get(first.id) is None and sessions.get(second.id) is second and sessions.get(third.id) is third
