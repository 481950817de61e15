"""Operating the gateway from its page: an admin adds a server that a connected MCP client sees
without reconnecting, and an approval given on the page lets a parked call run exactly once."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config.loading import load_config
from gateway.config.registration import RegistrationPolicy
from tests.support.access import KEYS, access_config, auth_section, http_client, recording_upstream, toy_entry
from tests.support.harness import http_gateway, in_memory, until_listed
from tests.support.launches import launches
from tests.support.skills import text
from tests.support.toy import build_server as toy
from tests.support.webclient import web_client

pytestmark = pytest.mark.anyio

ADMIN, INTERN = KEYS["admin"], KEYS["intern"]
ROLES: dict[str, Any] = {
    "admin": {"allow": ["*"], "admin": True},
    "analyst": {"allow": ["*"]},
    "intern": {"allow": ["*"]},
}


async def test_an_admin_adds_a_server_through_the_form_and_a_connected_client_sees_its_tool(tmp_path: Path) -> None:
    policy = RegistrationPolicy(allow_urls=("http://127.0.0.1:*/**",))
    config = replace(access_config(tmp_path, {"toy": toy_entry()}, roles=ROLES), registration=policy)
    async with (
        recording_upstream(tmp_path / "headers.log") as upstream,
        http_gateway(config, transports=in_memory({"toy": toy("toy")})) as (_, url),
        http_client(url, ADMIN) as client,
        web_client(url) as page,
    ):
        await client.list_tools()
        await page.sign_in(ADMIN)
        refused = await page.submit("/servers", "/servers/add", {"form": "fields", "name": "remote", "url": "ftp://x"})
        added = await page.submit("/servers", "/servers/add", {"form": "fields", "name": "remote", "url": upstream})
        await until_listed(client, "remote__echo")
        servers = await page.get("/servers/rows")
    assert refused.status_code == 422 and 'id="s-url-error"' in refused.text
    assert added.status_code == 303 and added.headers["location"] == "/servers"
    assert "remote" in servers.text


async def test_a_pasted_body_with_a_problem_is_answered_next_to_the_field(tmp_path: Path) -> None:
    config = access_config(tmp_path, {"toy": toy_entry()}, roles=ROLES)
    async with (
        http_gateway(config, transports=in_memory({"toy": toy("toy")})) as (_, url),
        web_client(url) as page,
    ):
        await page.sign_in(ADMIN)
        broken = await page.submit("/servers", "/servers/add", {"form": "paste", "body": "{not json"})
        taken = await page.submit("/servers", "/servers/add", {"form": "paste", "body": '{"name": "toy", "url": "x"}'})
        await page.sign_in(INTERN)
        forbidden = await page.submit("/servers", "/servers/add", {"form": "paste", "body": "{}"})
    assert broken.status_code == 422 and 'id="body-error"' in broken.text and "not valid JSON" in broken.text
    assert taken.status_code == 422 and "exists already" in taken.text
    assert forbidden.status_code == 403


async def test_an_approval_given_on_the_page_lets_a_parked_call_run_exactly_once(tmp_path: Path) -> None:
    document = {
        "gateway": {"data_dir": str(tmp_path / "data")},
        "local_tools": ["tests.support.launches"],
        "auth": auth_section(),
        "roles": ROLES,
    }
    file = tmp_path / "gateway.yaml"
    file.write_text(yaml.safe_dump(document), encoding="utf-8")
    log = tmp_path / "launches.log"
    arguments = {"log": str(log), "target": "moon"}
    async with (
        http_gateway(load_config(file)) as (_, url),
        http_client(url, INTERN) as client,
        web_client(url) as page,
    ):
        parked = await client.call_tool("local__launch", arguments)
        await page.sign_in(ADMIN)
        listed = await page.get("/approvals")
        approval = re.search(r'action="/approvals/([^/"]+)/approve"', listed.text)
        assert approval is not None, listed.text
        decided = await page.submit("/approvals", f"/approvals/{approval.group(1)}/approve")
        ran = await client.call_tool("local__launch", arguments)
        again = await client.call_tool("local__launch", arguments)
        after = await page.get("/approvals")
    assert parked.is_error and approval.group(1) in text(parked)
    assert "local__launch" in listed.text and "moon" in listed.text
    assert decided.status_code == 303
    assert not ran.is_error and text(ran) == "launched at moon"
    assert again.is_error and "Nothing was done" in text(again)
    assert launches(log) == ["moon"]
    # The retry that was parked again waits for a new approval; the decided one is gone from the list.
    assert f"/approvals/{approval.group(1)}/approve" not in after.text


async def test_a_file_server_offers_only_restart_and_refuses_disable_and_remove_with_where_to_edit_it(
    tmp_path: Path,
) -> None:
    config = access_config(tmp_path, {"toy": toy_entry()}, roles=ROLES)
    async with (
        http_gateway(config, transports=in_memory({"toy": toy("toy")})) as (_, url),
        web_client(url) as page,
    ):
        await page.sign_in(ADMIN)
        rows = await page.get("/servers/rows")
        disabled = await page.submit("/servers", "/servers/toy/disable")
        confirm = await page.get("/servers/toy/remove")
        restarted = await page.submit("/servers", "/servers/toy/restart")
        after = await page.get("/servers")
    assert "config file" in rows.text and "Edited in the config file" in rows.text
    assert re.findall(r'action="/servers/toy/(\w+)"', rows.text) == ["restart"]
    assert disabled.status_code == 409 and "defined in the config file: disable it there" in disabled.text
    assert "Not possible here" in disabled.text and "Something is wrong" not in disabled.text
    assert confirm.status_code == 409 and "remove it there" in confirm.text
    assert restarted.status_code == 303
    assert "Server &#39;toy&#39; was restarted." in after.text


async def test_removing_an_api_server_asks_first_and_then_says_it_was_removed(tmp_path: Path) -> None:
    policy = RegistrationPolicy(allow_urls=("http://127.0.0.1:*/**",))
    config = replace(access_config(tmp_path, {"toy": toy_entry()}, roles=ROLES), registration=policy)
    async with (
        recording_upstream(tmp_path / "headers.log") as upstream,
        http_gateway(config, transports=in_memory({"toy": toy("toy")})) as (gateway, url),
        web_client(url) as page,
    ):
        await page.sign_in(ADMIN)
        await page.submit("/servers", "/servers/add", {"form": "fields", "name": "remote", "url": upstream})
        added = await page.get("/servers")
        rows = await page.get("/servers/rows")
        unconfirmed = await page.submit("/servers", "/servers/remote/remove")
        kept = [status.name for status in gateway.servers.statuses()]
        asked = await page.get("/servers/remote/remove")
        removed = await page.submit("/servers/remote/remove", "/servers/remote/remove", {"confirmed": "yes"})
        said = await page.get("/servers")
        said_once = await page.get("/servers")
    assert "Added &#39;remote&#39;" in added.text
    assert re.findall(r'action="/servers/remote/(\w+)"', rows.text) == ["disable", "restart", "remove"]
    assert "API" in rows.text
    assert unconfirmed.status_code == 303 and unconfirmed.headers["location"] == "/servers/remote/remove"
    assert "remote" in kept
    assert asked.status_code == 200 and "Remove server remote?" in asked.text
    assert "Its 12 tools leave the catalog" in asked.text
    assert removed.status_code == 303 and removed.headers["location"] == "/servers"
    assert "remote" not in [status.name for status in gateway.servers.statuses()]
    assert "Server &#39;remote&#39; was removed." in said.text and 'role="status"' in said.text
    assert "was removed" not in said_once.text
