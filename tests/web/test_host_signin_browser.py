"""The sign-in link `serve` prints, opened in a real headless Chromium against a real `serve` process on
the embedded defaults: that browser becomes an admin who approves a parked call on the page, once."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client
from selenium import webdriver
from selenium.webdriver.common.by import By

from gateway.config.loading import default_config_path
from gateway.runtime.hostaccess import HOST_FILE
from tests.support.browser import axe_violations, describe, wait_for_text
from tests.support.harness import gateway_process, until_listed

LINK = re.compile(r"Admin sign-in for the web page, works once: (\S+)")


class Served:
    """A `serve` process of the embedded defaults, reached from blocking code through `portal`."""

    def __init__(self, portal: BlockingPortal, url: str, output: Path) -> None:
        self.portal = portal
        self.url = url
        self.output = output

    def link(self) -> str:
        """The sign-in link the process printed."""
        found = LINK.search(self.output.read_text())
        assert found is not None, self.output.read_text()
        return found.group(1)

    def park(self) -> str:
        """A model's write to the SQLite database, parked for approval; the approval's id."""

        async def call() -> str:
            async with Client(f"{self.url}/mcp") as client:
                await until_listed(client, "sqlite__execute")
                parked = await client.call_tool("sqlite__execute", {"sql": "CREATE TABLE notes (body TEXT)"})
            assert parked.is_error and parked.meta is not None
            return str(parked.meta["io.mcp-gateway/approval"]["id"])

        return self.portal.call(call)


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    """`python -m gateway serve` with its data under `tmp_path`, once it has written its host file."""
    monkeypatch.setenv("GATEWAY_DATA_DIR", str(tmp_path / "data"))
    output = tmp_path / "serve.log"
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(gateway_process(default_config_path(), output)) as process,
    ):
        # Written while the app's lifespan starts the gateway, before it answers anything.
        assert (tmp_path / "data" / HOST_FILE).exists()
        yield Served(portal, process.url, output)


def test_the_sign_in_link_serve_prints_makes_that_browser_an_admin_who_approves_once(
    served: Served, browser: webdriver.Chrome
) -> None:
    approval = served.park()
    link = served.link()

    browser.get(f"{served.url}/approvals")
    wait_for_text(browser, "#main", approval)
    assert f"python -m gateway approvals approve {approval}" in browser.find_element(By.ID, "main").text
    assert not browser.find_elements(By.CSS_SELECTOR, f"button[aria-label='Approve {approval}']")

    browser.get(link)
    wait_for_text(browser, "h1", "Approvals")
    assert not axe_violations(browser), describe(axe_violations(browser))
    browser.find_element(By.CSS_SELECTOR, f"button[aria-label='Approve {approval}']").click()
    wait_for_text(browser, "#main", "The approval is now approved.")

    browser.delete_all_cookies()
    browser.get(link)
    wait_for_text(browser, "#main", "This sign-in link was used already")
