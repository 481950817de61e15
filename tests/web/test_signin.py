"""Web sessions: a new id at sign-in, and an end at sign-out, after idling, when the key leaves the
configuration or when the token expires; bounds that keep one caller's or anonymous traffic from
ending anyone else's; and the sign-in form's signed token, for which nothing is stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import httpx2
import pytest

from gateway.auth.authenticator import Authenticator
from gateway.auth.identity import AuthenticationError, Identity
from gateway.config.loading import parse_config
from gateway.service import Gateway
from gateway.web.app import web_app
from gateway.web.csrf import CsrfError
from gateway.web.pages import Web
from gateway.web.signin import FORM_SECONDS, WebSessions
from tests.support.access import KEYS, access_config, auth_section, token_for
from tests.support.webclient import WebClient, csrf_of

VISITOR = Identity("anonymous", "intern", "anonymous")


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
    before = sessions.start(VISITOR)
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


def test_a_callers_sign_ins_past_its_limit_end_only_its_own_least_recently_used_session() -> None:
    sessions = WebSessions(authenticator, per_caller=2)
    admin = sessions.sign_in(None, KEYS["admin"])
    first, second, third = (sessions.sign_in(None, KEYS["intern"]) for _ in range(3))
    assert sessions.get(first.id) is None
    assert [sessions.get(session.id) for session in (admin, second, third)] == [admin, second, third]


def test_a_newcomer_is_refused_when_signed_in_sessions_are_at_their_limit_and_nobody_is_signed_out() -> None:
    sessions = WebSessions(authenticator, limit=2)
    admin, intern = sessions.sign_in(None, KEYS["admin"]), sessions.sign_in(None, KEYS["intern"])
    with pytest.raises(AuthenticationError, match="2 signed-in sessions, its limit"):
        sessions.sign_in(None, KEYS["analyst"])
    assert sessions.get(admin.id) is admin and sessions.get(intern.id) is intern


def test_sessions_idle_too_long_make_room_for_a_newcomer() -> None:
    clock = Clock()
    sessions = WebSessions(authenticator, clock=clock, idle=60, limit=1)
    old = sessions.sign_in(None, KEYS["admin"])
    clock.now += 61
    new = sessions.sign_in(None, KEYS["intern"])
    assert sessions.get(new.id) is new and sessions.get(old.id) is None and sessions.count() == 1


def test_visitors_without_a_credential_crowd_out_only_each_other() -> None:
    sessions = WebSessions(authenticator, limit=2)
    admin = sessions.sign_in(None, KEYS["admin"])
    first, second, third = (sessions.start(VISITOR) for _ in range(3))
    assert sessions.get(first.id) is None
    assert [sessions.get(session.id) for session in (admin, second, third)] == [admin, second, third]


def test_a_sign_in_token_is_good_only_with_its_cookie_and_until_it_expires() -> None:
    wall = Clock()
    sessions = WebSessions(authenticator, wall_clock=wall)
    token = sessions.form_token("cookie-of-this-browser")
    sessions.check_form("cookie-of-this-browser", token)
    expires, _, mac = token.partition(".")
    for nonce, forged in [
        ("cookie-of-another-browser", token),
        (None, token),
        ("cookie-of-this-browser", f"{int(expires) + 3600}.{mac}"),
        ("cookie-of-this-browser", f"{expires}.{'0' * len(mac)}"),
        ("cookie-of-this-browser", WebSessions(authenticator, wall_clock=wall).form_token("cookie-of-this-browser")),
        ("cookie-of-this-browser", None),
        ("cookie-of-this-browser", "²."),
    ]:
        with pytest.raises(CsrfError, match="sign-in form expired or is not this browser's"):
            sessions.check_form(nonce, forged)
    wall.now = int(expires) - 1
    sessions.check_form("cookie-of-this-browser", token)
    wall.now = int(expires)
    with pytest.raises(CsrfError):
        sessions.check_form("cookie-of-this-browser", token)


@asynccontextmanager
async def page_of(
    tmp_path: Path, sessions: WebSessions | None = None
) -> AsyncIterator[tuple[Web, httpx2.ASGITransport]]:
    """A gateway with the test keys, and its web page (its sessions `sessions`) to reach in process:
    ten thousand requests over a socket would take a loaded machine minutes."""
    async with Gateway(access_config(tmp_path, {})) as gateway:
        web = Web(gateway, sessions or WebSessions(lambda: gateway.authenticator))
        yield web, httpx2.ASGITransport(app=web_app(gateway, web))


@asynccontextmanager
async def browser(transport: httpx2.ASGITransport) -> AsyncIterator[WebClient]:
    """A browser of its own: its own cookies."""
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1", follow_redirects=False) as http:
        yield WebClient(http)


@pytest.mark.anyio
async def test_ten_thousand_anonymous_sign_in_pages_and_failed_sign_ins_store_nothing_and_sign_nobody_out(
    tmp_path: Path,
) -> None:
    async with page_of(tmp_path) as (web, transport), browser(transport) as admin, browser(transport) as stranger:
        assert (await admin.sign_in(KEYS["admin"])).status_code == 303
        kept = web.sessions.count()
        for round in range(10_050):
            stranger.http.cookies.clear()
            shown = await stranger.get("/signin")
            assert shown.status_code == 200
            if round % 50 == 0:
                token = csrf_of(shown.text)
                wrong = await stranger.http.post("/signin", data={"csrf": token, "credential": "not-a-key-0123456789"})
                forged = await stranger.http.post("/signin", data={"csrf": "1.forged", "credential": KEYS["intern"]})
                assert (wrong.status_code, forged.status_code) == (401, 403)
        assert web.sessions.count() == kept == 1
        catalog = await admin.get("/")
    assert catalog.status_code == 200 and "Sign out" in catalog.text


@pytest.mark.anyio
async def test_the_sign_in_form_works_with_its_token_and_refuses_another_browsers_or_an_expired_one(
    tmp_path: Path,
) -> None:
    wall = Clock()
    async with (
        page_of(tmp_path, WebSessions(authenticator, wall_clock=wall)) as (web, transport),
        browser(transport) as person,
        browser(transport) as attacker,
    ):
        theirs = csrf_of((await attacker.get("/signin")).text)
        replayed = await person.http.post("/signin", data={"csrf": theirs, "credential": KEYS["admin"]})
        mine = csrf_of((await person.get("/signin")).text)
        wall.now += FORM_SECONDS
        expired = await person.http.post("/signin", data={"csrf": mine, "credential": KEYS["admin"]})
        signed = await person.sign_in(KEYS["admin"])
        catalog = await person.get("/")
    assert replayed.status_code == expired.status_code == 403
    assert "reload the page" in expired.text
    assert signed.status_code == 303 and catalog.status_code == 200 and web.sessions.count() == 1
