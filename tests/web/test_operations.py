"""Operating the gateway from its page: an admin adds a server that a connected MCP client sees
without reconnecting, and an approval given on the page lets a parked call run exactly once."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.api.registration import RegistrationPolicy
from gateway.config.loading import load_config
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
