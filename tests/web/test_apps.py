"""The tool page as an MCP Apps host, through a real gateway over HTTP: the view served sandboxed with
the CSP its resource declares, its calls of its own server's tools (and no other's) run as the person,
and a tool's icon shown only from a `data:` URL."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from gateway.service import Gateway
from gateway.web.apps import view_csp
from tests.support.access import KEYS, access_config, toy_entry
from tests.support.faithful import ICON
from tests.support.faithful import build_server as faithful
from tests.support.harness import http_gateway, in_memory
from tests.support.toy import build_server as toy
from tests.support.webclient import WebClient, csrf_of, web_client

pytestmark = pytest.mark.anyio
ROLES: dict[str, Any] = {
    "admin": {"allow": ["*"], "admin": True},
    "analyst": {"allow": ["faithful__*", "toy__*"]},
    "intern": {"allow": ["toy__echo"]},
}
ANALYST, INTERN = KEYS["analyst"], KEYS["intern"]


@asynccontextmanager
async def served(tmp_path: Path) -> AsyncIterator[tuple[Gateway, str]]:
    """The faithful server (a view, icons) and the toy, two roles with keys, over real HTTP."""
    config = access_config(tmp_path, {"faithful": {"command": "unused"}, "toy": toy_entry()}, roles=ROLES)
    async with http_gateway(config, transports=in_memory({"faithful": faithful(), "toy": toy("toy")})) as served:
        yield served


async def _view_call(page: WebClient, name: str, arguments: str = "{}") -> tuple[int, dict[str, Any]]:
    shown = await page.get("/tools/faithful__clock")
    form = {"csrf": csrf_of(shown.text), "name": name, "arguments": arguments}
    answer = await page.http.post("/tools/faithful__clock/app/call", data=form)
    return answer.status_code, answer.json()


def test_a_view_s_csp_is_the_extension_s_default_with_only_the_origins_it_declares() -> None:
    declared = {
        "connectDomains": ["https://api.example.com", "https://x.com; script-src *", "*", "'unsafe-eval'"],
        "resourceDomains": ["https://*.cdn.example.com", "javascript:alert(1)"],
        "frameDomains": ["https://player.example.com:8443"],
    }
    assert view_csp(None) == (
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
        "media-src data:; font-src 'none'; connect-src 'none'; frame-src 'none'; base-uri 'none'; "
        "object-src 'none'; form-action 'none'; frame-ancestors 'self'; sandbox allow-scripts"
    )
    policy = dict(part.split(" ", 1) for part in view_csp({"csp": declared}).split("; "))
    assert policy["connect-src"] == "https://api.example.com"
    assert policy["script-src"] == "'unsafe-inline' https://*.cdn.example.com"
    assert policy["font-src"] == "https://*.cdn.example.com"
    assert policy["frame-src"] == "https://player.example.com:8443"
    assert policy["base-uri"] == "'none'" and policy["sandbox"] == "allow-scripts"


async def test_a_tool_s_view_is_served_sandboxed_with_the_csp_its_resource_declares(tmp_path: Path) -> None:
    async with served(tmp_path) as (_, url), web_client(url) as page:
        await page.sign_in(ANALYST)
        view = await page.get("/tools/faithful__clock/app")
        unlisted = await page.get("/tools/faithful__hidden_clock/app")
        none = await page.get("/tools/toy__echo/app")
    assert view.status_code == 200 and "Clock view of faithful" in view.text
    csp = view.headers["content-security-policy"]
    assert csp == view_csp(
        {"csp": {"connectDomains": ["https://api.example.com"], "resourceDomains": ["https://cdn.example.com"]}}
    )
    assert view.headers["x-frame-options"] == "SAMEORIGIN" and view.headers["x-content-type-options"] == "nosniff"
    assert unlisted.status_code == 200 and "clock-hidden view" in unlisted.text
    assert "sandbox allow-scripts" in unlisted.headers["content-security-policy"]
    assert none.status_code == 404


async def test_a_view_is_not_served_to_a_person_who_may_not_see_its_tool(tmp_path: Path) -> None:
    async with served(tmp_path) as (_, url), web_client(url) as page:
        await page.sign_in(INTERN)
        view = await page.get("/tools/faithful__clock/app")
    assert view.status_code == 404 and "Clock view" not in view.text


async def test_a_view_calls_its_own_server_s_tools_by_their_names_there_through_the_pipeline(tmp_path: Path) -> None:
    async with served(tmp_path) as (gateway, url), web_client(url) as page:
        await page.sign_in(ANALYST)
        status, answer = await _view_call(page, "hidden_clock")
        other_status, other = await _view_call(page, "echo", json.dumps({"text": "hi"}))
        bad_status, bad = await _view_call(page, "hidden_clock", "[1]")
        model_status, model_only = await _view_call(page, "reset_clock")
        audited = [entry.tool for entry in await gateway.audit.recent()]
    assert status == 200 and answer["result"]["structuredContent"] == {"time": "12:01"}
    assert "faithful__hidden_clock" in audited
    assert other_status == 400 and other["error"]["message"] == "Unknown tool: echo"
    assert bad_status == 400 and "JSON object" in bad["error"]["message"]
    # Its `_meta.ui.visibility` is ["model"]: the extension asks hosts to refuse a view's call of it.
    assert model_status == 400 and model_only["error"]["message"] == "Tool reset_clock is not callable by apps"
    assert "faithful__reset_clock" not in audited


async def test_the_page_shows_a_tool_s_data_icon_and_says_it_has_a_view(tmp_path: Path) -> None:
    async with served(tmp_path) as (_, url), web_client(url) as page:
        await page.sign_in(ANALYST)
        tool = await page.get("/tools/faithful__clock")
        catalog = await page.get("/?q=clock")
        servers = await page.get("/servers/rows")
        tried = await page.submit("/tools/faithful__clock", "/tools/faithful__clock/try")
    icon = f'<img src="{ICON.src}" alt="" class="icon"'
    assert icon in tool.text and icon in catalog.text
    assert "ui://faithful+clock/view.html" in tool.text
    # The server's icon is an https: URL: the page loads nothing from elsewhere.
    assert "example.com/faithful.svg" not in servers.text
    assert 'id="app-view" data-src="/tools/faithful__clock/app" sandbox="allow-scripts"' in tried.text
    assert '"structuredContent": {"time": "12:00"}' in tried.text


async def test_the_admin_api_gives_a_tool_s_icons_and_meta_and_a_server_s_icons(tmp_path: Path) -> None:
    headers = {"Authorization": f"Bearer {ANALYST}"}
    async with served(tmp_path) as (_, url), web_client(url) as page:
        tool = (await page.get("/api/v1/tools/faithful__clock", headers=headers)).json()["tool"]
        servers = (await page.get("/api/v1/servers", headers=headers)).json()["servers"]
    assert tool["icons"] == [ICON.model_dump(mode="json", by_alias=True, exclude_none=True)]
    assert tool["_meta"]["ui"]["resourceUri"] == "ui://faithful+clock/view.html"
    assert tool["_meta"]["com.example/owner"] == {"team": "clocks", "tier": 2}
    faithful_server = next(server for server in servers if server["name"] == "faithful")
    assert faithful_server["icons"] == [
        {"src": "https://example.com/faithful.svg", "mimeType": "image/svg+xml", "theme": "light"}
    ]
