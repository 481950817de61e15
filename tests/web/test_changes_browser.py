"""A rug pull seen in a real headless Chromium: an upstream changes a tool's description, an admin
reads the diff on the changes page (which axe-core finds nothing serious on) and accepts it, and a
connected client is told and gets the new text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from gateway.config.loading import parse_config
from tests.support.access import KEYS, auth_section, http_client
from tests.support.browser import ServedGateway, axe_violations, describe, served_gateway, sign_in, wait_for_text
from tests.support.harness import collector, in_memory, listening, told_tools_changed
from tests.support.turncoat import HONEST, POISONED, turncoat
from tests.support.waiting import poll_until
from tests.web.test_browser import ROLES

ADMIN = KEYS["admin"]
TOOL = "notes__read_note"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServedGateway]:
    """A gateway whose `notes` server (reached in memory) holds changed tools, with the test roles and keys."""
    document = {
        "gateway": {"data_dir": str(tmp_path / "data")},
        "servers": {"notes": {"command": "unused", "on_tool_change": "hold"}},
        "auth": auth_section(),
        "roles": ROLES,
    }
    config = parse_config(document, source=str(tmp_path / "gateway.yaml"), base_dir=tmp_path)
    with served_gateway(config, transports=in_memory({"notes": turncoat()})) as gateway:
        yield gateway


def test_an_admin_accepts_a_changed_description_on_the_page_and_the_client_gets_the_new_text(
    served: ServedGateway, browser: webdriver.Chrome
) -> None:
    portal = served.portal
    received, handle = collector()
    with portal.wrap_async_context_manager(http_client(served.url, ADMIN, message_handler=handle)) as client:
        tools = {tool.name: tool for tool in portal.call(client.list_tools).tools}
        assert tools[TOOL].description == HONEST
        portal.call(poll_until, lambda: listening(served.gateway), "the client's notification stream")
        portal.call(client.call_tool, "notes__turn", {})
        portal.call(received.until, lambda: told_tools_changed(received), "a tools/list_changed notification")
        assert TOOL not in {tool.name for tool in portal.call(client.list_tools).tools}

        sign_in(browser, served.url, ADMIN)
        browser.find_element(By.LINK_TEXT, "Changes").click()
        wait_for_text(browser, "pre.diff", "~/.ssh/id_rsa")
        removed = browser.find_element(By.CSS_SELECTOR, "pre.diff .removed").text
        added = [line.text for line in browser.find_elements(By.CSS_SELECTOR, "pre.diff .added")]
        assert removed == f"-  {HONEST}" and f"+  {POISONED}" in added
        assert "Clients do not see this tool until the change is accepted" in browser.find_element(By.ID, "main").text
        assert not axe_violations(browser), describe(axe_violations(browser))
        received.clear()
        browser.find_element(By.XPATH, "//button[text()='Accept']").click()
        wait_for_text(browser, "p.notice", "accepted")

        portal.call(received.until, lambda: told_tools_changed(received), "a tools/list_changed notification")
        tools = {tool.name: tool for tool in portal.call(client.list_tools).tools}
    assert tools[TOOL].description == POISONED
    assert "No change waits for a decision" in browser.find_element(By.ID, "main").text
