"""The Connect flow in a real headless Chromium: a user signs in to the gateway's page, presses
Connect for the OAuth-protected notes server, signs in and agrees at its provider, and comes back
connected; their MCP client then calls the server as them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from selenium import webdriver
from selenium.webdriver.common.by import By

from gateway.service import Gateway
from tests.support.access import http_client
from tests.support.browser import axe_violations, describe, screenshot, wait_for_text
from tests.support.granted import KEYS, grant_gateway, until_ready
from tests.support.oauthserver import Provider


@dataclass(frozen=True)
class Served:
    """The notes server and the gateway in front of it, on an event loop in another thread."""

    provider: Provider
    gateway: Gateway
    url: str
    portal: BlockingPortal


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with (
        start_blocking_portal(backend="asyncio") as portal,
        portal.wrap_async_context_manager(grant_gateway(tmp_path)) as (provider, gateway, url, _),
    ):
        yield Served(provider, gateway, url, portal)


def test_a_user_connects_a_server_through_its_provider_and_their_client_then_acts_as_them(
    served: Served, browser: webdriver.Chrome
) -> None:
    browser.get(f"{served.url}/signin")
    browser.find_element(By.ID, "credential").send_keys(KEYS["alice"])
    browser.find_element(By.CSS_SELECTOR, "form[action='/signin'] button").click()
    wait_for_text(browser, "h1", "Catalog")

    browser.find_element(By.LINK_TEXT, "Accounts").click()
    wait_for_text(browser, "h1", "Accounts")
    assert "Not connected" in browser.find_element(By.TAG_NAME, "table").text
    assert axe_violations(browser) == [], describe(axe_violations(browser))
    screenshot(browser, "connections-not-connected")

    browser.find_element(By.CSS_SELECTOR, "button[aria-label='Connect notes']").click()
    wait_for_text(browser, "h1", "Notes wants to know who you are")
    assert browser.current_url.startswith(served.provider.issuer)
    screenshot(browser, "connections-provider-consent")

    browser.find_element(By.CSS_SELECTOR, "button[value='alice']").click()
    wait_for_text(browser, ".notice", "Connected server 'notes'")
    assert browser.current_url == f"{served.url}/connections"
    assert "Connected" in browser.find_element(By.TAG_NAME, "table").text
    assert browser.find_element(By.CSS_SELECTOR, "button[aria-label='Disconnect notes']")
    assert axe_violations(browser) == [], describe(axe_violations(browser))

    async def add_note() -> str:
        await until_ready(served.gateway, "notes")
        async with http_client(served.url, KEYS["alice"]) as client:
            result = await client.call_tool("notes__add_note", {"text": "from the browser"})
        assert not result.is_error, result
        return str(result.content[0].text)  # type: ignore[union-attr]

    assert served.portal.call(add_note) == "kept for alice"
