"""An MCP Apps example server nobody here wrote (`@modelcontextprotocol/server-basic-vanillajs`) behind a
real gateway over stdio, under a namespace: its tool's `_meta.ui` names the view under the exposed URI,
the view reads back as the server gives it, and the web page renders it, the view's own call included."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.browser import WAIT, ServedGateway, served_gateway, wait_for_text
from tests.support.harness import http_gateway, make_config
from tests.support.node import require_node_command

VIEW = "ui://get-time/mcp-app.html"
EXPOSED_VIEW = "ui://apps+get-time/mcp-app.html"
APP_MIME = "text/html;profile=mcp-app"


def _server() -> StdioServerParameters:
    return StdioServerParameters(command=str(require_node_command("mcp-server-basic-vanillajs")), args=["--stdio"])


def _config(tmp_path: Path) -> Any:
    launch = _server()
    return make_config(tmp_path, {"apps": {"command": launch.command, "args": list(launch.args)}})


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_basic_vanillajs_s_tool_names_its_view_under_the_exposed_uri_which_reads_back(
    tmp_path: Path, mode: str
) -> None:
    async with Client(_server(), mode="legacy") as direct:
        listed = {tool.name: tool for tool in (await direct.list_tools()).tools}
        page = (await direct.read_resource(VIEW)).contents[0]
    async with http_gateway(_config(tmp_path)) as (_, url), Client(f"{url}/mcp", mode=mode) as client:
        tool = {tool.name: tool for tool in (await client.list_tools()).tools}["apps__get-time"]
        resources = [resource.uri for resource in (await client.list_resources()).resources]
        read = (await client.read_resource((tool.meta or {})["ui"]["resourceUri"])).contents[0]
        result = await client.call_tool("apps__get-time", {})
    direct_meta = listed["get-time"].meta or {}
    assert direct_meta["ui"]["resourceUri"] == direct_meta["ui/resourceUri"] == VIEW
    assert tool.meta == {
        **direct_meta,
        "ui": {**direct_meta["ui"], "resourceUri": EXPOSED_VIEW},
        "ui/resourceUri": EXPOSED_VIEW,
    }
    assert tool.output_schema == listed["get-time"].output_schema and tool.title == listed["get-time"].title
    assert resources == [EXPOSED_VIEW]
    assert isinstance(read, types.TextResourceContents) and isinstance(page, types.TextResourceContents)
    assert read.uri == EXPOSED_VIEW and read.mime_type == page.mime_type == APP_MIME and read.text == page.text
    assert not result.is_error and "time" in (result.structured_content or {})


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServedGateway]:
    """The example server over stdio behind a gateway served over HTTP (the page open, authentication off)."""
    with served_gateway(_config(tmp_path)) as gateway:
        yield gateway


def test_basic_vanillajs_s_view_renders_on_the_tool_page_and_its_button_calls_the_server(
    served: ServedGateway, browser: webdriver.Chrome
) -> None:
    browser.get(f"{served.url}/tools/apps__get-time")
    wait_for_text(browser, "dl.facts", EXPOSED_VIEW)
    browser.find_element(By.XPATH, "//button[starts-with(text(), 'Call apps__get-time')]").click()
    wait_for_text(browser, "#result", "Structured content")
    shown = json.loads(browser.find_elements(By.CSS_SELECTOR, "#result pre.output")[-1].text)
    browser.switch_to.frame(browser.find_element(By.ID, "app-view"))
    try:
        # The view shows the result the page told it, then asks the server again through the page.
        wait_for_text(browser, "#server-time", shown["time"][:4])
        rendered = browser.find_element(By.ID, "server-time").text
        browser.find_element(By.ID, "get-time-btn").click()
        WebDriverWait(browser, WAIT).until(
            lambda driver: driver.find_element(By.ID, "server-time").text not in (rendered, "[ERROR]"),
            "the view's own call did not come back",
        )
        again = browser.find_element(By.ID, "server-time").text
    finally:
        browser.switch_to.default_content()
    assert rendered == shown["time"] and again > rendered
    outcomes = [entry.outcome for entry in served.portal.call(served.gateway.audit.recent, 10, None, "apps__get-time")]
    assert outcomes == ["ok", "ok"]
