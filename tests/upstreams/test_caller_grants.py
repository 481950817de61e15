"""Servers that act as each user: an MCP server protected by OAuth through the SDK's own server-side
auth, behind a real gateway over HTTP, connected on the connections page by two users, each then
calling it with their own grant."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import AnyUrl

from gateway.upstreams.connection import State
from gateway.upstreams.oauthflow import REFRESH_AHEAD
from tests.support.access import http_client
from tests.support.granted import KEYS, connect, grant_config, grant_gateway, until_ready
from tests.support.harness import http_gateway, make_config
from tests.support.oauthserver import ACCESS_LIFETIME, notes_server
from tests.support.webclient import web_client

pytestmark = pytest.mark.anyio


async def call(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> tuple[bool, str]:
    result = await client.call_tool(tool, arguments or {})
    text = result.content[0].text if result.content and hasattr(result.content[0], "text") else ""
    return result.is_error, text


async def test_two_users_who_connect_a_server_each_see_their_own_data(tmp_path: Path) -> None:
    async with grant_gateway(tmp_path) as (provider, gateway, base, _):
        assert "Connected" in await connect(base, "alice", provider)
        await until_ready(gateway, "notes")
        await connect(base, "bob", provider)
        async with http_client(base, KEYS["alice"]) as alice, http_client(base, KEYS["bob"]) as bob:
            assert await call(alice, "notes__add_note", {"text": "buy milk"}) == (False, "kept for alice")
            assert await call(bob, "notes__add_note", {"text": "call mum"}) == (False, "kept for bob")
            assert await call(alice, "notes__my_notes") == (False, "alice: buy milk")
            assert await call(bob, "notes__my_notes") == (False, "bob: call mum")
        # One client registered dynamically for the gateway, each user's grant kept apart.
        assert len(provider.clients) == 1
        assert {grant.caller for grant in gateway.grants.store.grants("notes")} == {"api_key:alice", "api_key:bob"}


async def test_a_configured_client_connects_where_the_authorization_server_offers_no_registration(
    tmp_path: Path,
) -> None:
    oauth = {"client_id": "gateway-client", "client_secret": "a-secret-of-the-gateway-client"}
    async with grant_gateway(tmp_path, oauth=oauth) as (provider, gateway, base, _):
        provider.clients["gateway-client"] = OAuthClientInformationFull(
            client_id="gateway-client",
            client_secret="a-secret-of-the-gateway-client",
            redirect_uris=[AnyUrl(f"{base}/connections/callback")],
            token_endpoint_auth_method="client_secret_post",
        )
        assert "Connected" in await connect(base, "alice", provider)
        await until_ready(gateway, "notes")
        async with http_client(base, KEYS["alice"]) as alice:
            assert await call(alice, "notes__add_note", {"text": "configured"}) == (False, "kept for alice")
        assert list(provider.clients) == ["gateway-client"]


async def test_a_user_who_has_not_connected_the_server_is_told_where_to_connect_it(tmp_path: Path) -> None:
    async with grant_gateway(tmp_path) as (provider, gateway, base, _):
        await connect(base, "alice", provider)
        await until_ready(gateway, "notes")
        async with http_client(base, KEYS["bob"]) as bob:
            failed, text = await call(bob, "notes__my_notes")
        assert failed
        assert "you have not connected yours: connect it at" in text
        assert f"{base}/connections" in text
        assert provider.refreshed == 0


async def test_grants_are_sealed_at_rest(tmp_path: Path) -> None:
    async with grant_gateway(tmp_path) as (provider, _gateway, base, _):
        await connect(base, "alice", provider)
        access = next(iter(provider.access))
    stored = sqlite3.connect(tmp_path / "data" / "grants.db").execute("SELECT tokens FROM upstream_grants").fetchall()
    assert len(stored) == 1
    assert access not in stored[0][0]
    assert (tmp_path / "data" / "grants.db").read_bytes().find(access.encode()) == -1


async def test_an_access_token_about_to_expire_is_refreshed_before_the_call(tmp_path: Path) -> None:
    async with grant_gateway(tmp_path) as (provider, gateway, base, clock):
        await connect(base, "alice", provider)
        await until_ready(gateway, "notes")
        async with http_client(base, KEYS["alice"]) as alice:
            assert await call(alice, "notes__add_note", {"text": "one"}) == (False, "kept for alice")
            clock.offset = ACCESS_LIFETIME - REFRESH_AHEAD / 2
            assert await call(alice, "notes__my_notes") == (False, "alice: one")
        assert provider.refreshed == 1


async def test_a_refresh_token_the_provider_revoked_asks_the_user_to_connect_again(tmp_path: Path) -> None:
    async with grant_gateway(tmp_path) as (provider, gateway, base, clock):
        await connect(base, "alice", provider)
        await until_ready(gateway, "notes")
        async with http_client(base, KEYS["alice"]) as alice:
            assert await call(alice, "notes__add_note", {"text": "one"}) == (False, "kept for alice")
            provider.revoke_refresh_tokens("alice")
            provider.access.clear()
            clock.offset = ACCESS_LIFETIME
            failed, text = await call(alice, "notes__my_notes")
            assert failed
            assert "Your connection to server 'notes' no longer works" in text
            assert f"connect it again at {base}/connections" in text
            assert "Traceback" not in text
            # Asked again, it says the same at once; connecting again brings the notes back.
            assert (await call(alice, "notes__my_notes"))[1] == text
            clock.offset = 0
            await connect(base, "alice", provider)
            assert await call(alice, "notes__my_notes") == (False, "alice: one")


async def test_a_user_disconnects_and_an_admin_revokes_a_grant_here_and_at_the_provider(tmp_path: Path) -> None:
    async with grant_gateway(tmp_path) as (provider, gateway, base, _):
        await connect(base, "alice", provider)
        await connect(base, "bob", provider)
        await until_ready(gateway, "notes")
        assert gateway.grants.listed_with["notes"] == "api_key:alice"
        async with web_client(base) as web:
            await web.sign_in(KEYS["alice"])
            done = await web.submit("/connections", "/connections/notes/disconnect")
            assert done.status_code == 303
        # Revoked at the provider too, and the server's tools are listed with a grant its owner kept.
        assert [held.subject for held in provider.refresh.values()] == ["bob"]
        await until_ready(gateway, "notes")
        assert gateway.grants.listed_with["notes"] == "api_key:bob"
        async with http_client(base, KEYS["alice"]) as alice:
            failed, text = await call(alice, "notes__my_notes")
        assert failed and "you have not connected yours" in text
        assert {grant.caller for grant in gateway.grants.store.grants("notes")} == {"api_key:bob"}
        async with web_client(base) as web:
            await web.sign_in(KEYS["bob"])
            refused = await web.submit("/connections", "/connections/notes/revoke", {"caller": "api_key:alice"})
            assert refused.status_code == 403
            await web.sign_in(KEYS["ada"])
            page = await web.get("/connections")
            assert "api_key:bob" in page.text
            done = await web.submit("/connections", "/connections/notes/revoke", {"caller": "api_key:bob"})
            assert done.status_code == 303
        async with http_client(base, KEYS["bob"]) as bob:
            failed, text = await call(bob, "notes__my_notes")
        assert failed and "you have not connected yours" in text
        assert gateway.grants.store.grants("notes") == []
        assert provider.refresh == {}
        upstream = gateway.upstreams["notes"]
        with anyio.fail_after(30):
            while "no user has connected server 'notes' yet" not in (upstream.status().error or ""):
                await anyio.sleep(0.02)
        assert upstream.status().state != State.READY


async def test_a_client_that_opens_urls_is_offered_the_page_and_the_call_runs_once_connected(tmp_path: Path) -> None:
    async with grant_gateway(tmp_path) as (provider, gateway, base, _), anyio.create_task_group() as group:
        await connect(base, "alice", provider)
        await until_ready(gateway, "notes")
        asked: list[types.ElicitRequestURLParams] = []

        async def open_page(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
            # The user agrees to open the page and connects there, while the call waits.
            assert isinstance(params, types.ElicitRequestURLParams)
            asked.append(params)
            group.start_soon(connect, base, "bob", provider)
            return types.ElicitResult(action="accept")

        async with http_client(base, KEYS["bob"], elicitation_callback=open_page) as bob:
            assert await call(bob, "notes__add_note", {"text": "first"}) == (False, "kept for bob")
        assert [params.url for params in asked] == [f"{base}/connections"]
        assert "you have not connected yours" in asked[0].message


async def test_a_user_who_declines_to_open_the_page_gets_the_answer_naming_it(tmp_path: Path) -> None:
    async with grant_gateway(tmp_path) as (provider, gateway, base, _):
        await connect(base, "alice", provider)
        await until_ready(gateway, "notes")

        async def decline(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
            return types.ElicitResult(action="decline")

        async with http_client(base, KEYS["bob"], elicitation_callback=decline) as bob:
            failed, text = await call(bob, "notes__my_notes")
        assert failed and f"connect it at {base}/connections" in text


async def test_a_server_that_asks_for_oauth_without_oauth_in_its_entry_says_what_it_needs(tmp_path: Path) -> None:
    async with notes_server() as (_, url):
        config = make_config(tmp_path, {"notes": {"url": url}})
        async with http_gateway(config) as (gateway, _):
            status = gateway.upstreams["notes"].status()
    assert status.state == State.FAILED
    assert status.error is not None
    assert "the server asks for an OAuth token" in status.error
    assert "/.well-known/oauth-protected-resource" in status.error
    assert "oauth: {}" in status.error


async def test_a_stateless_era_client_calls_with_its_callers_grant_and_is_told_when_it_has_none(tmp_path: Path) -> None:
    async with grant_gateway(tmp_path) as (provider, gateway, base, _):
        await connect(base, "alice", provider)
        await until_ready(gateway, "notes")
        async with (
            http_client(base, KEYS["alice"], mode="2026-07-28") as alice,
            http_client(base, KEYS["bob"], mode="2026-07-28") as bob,
        ):
            assert await call(alice, "notes__add_note", {"text": "stateless"}) == (False, "kept for alice")
            failed, text = await call(bob, "notes__my_notes")
        assert failed and f"connect it at {base}/connections" in text


async def test_a_connect_whose_metadata_names_another_resource_is_refused_and_registers_nothing(
    tmp_path: Path,
) -> None:
    # The entry reaches the server as localhost; its metadata says its tokens are for 127.0.0.1.
    async with notes_server() as (provider, url):
        config = grant_config(tmp_path, url.replace("127.0.0.1", "localhost"), {})
        async with http_gateway(config) as (_, base), web_client(base) as web:
            await web.sign_in(KEYS["alice"])
            refused = await web.submit("/connections", "/connections/notes/connect")
    assert refused.status_code == 400
    assert "did not start" in refused.text and "does not match" in refused.text
    assert provider.clients == {}
