"""An MCP App on the tool page in a real headless Chromium: the tool's icon, its view rendered beside
the try-it result in a frame of an opaque origin, the view told the result and calling its own
server's tool through the page, and nothing serious for axe-core."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.support.access import access_config, toy_entry
from tests.support.browser import ServedGateway, axe_violations, describe, served_gateway, sign_in, wait_for_text
from tests.support.faithful import ICON
from tests.support.faithful import build_server as faithful
from tests.support.harness import in_memory
from tests.support.toy import build_server as toy
from tests.web.test_apps import ANALYST, ROLES


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServedGateway]:
    """The faithful server (a view, icons) and the toy, with roles and keys, served over HTTP."""
    config = access_config(tmp_path, {"faithful": {"command": "unused"}, "toy": toy_entry()}, roles=ROLES)
    with served_gateway(config, transports=in_memory({"faithful": faithful(), "toy": toy("toy")})) as gateway:
        yield gateway


def test_a_tool_s_view_renders_beside_the_result_sandboxed_and_calls_its_server_through_the_page(
    served: ServedGateway, browser: webdriver.Chrome
) -> None:
    sign_in(browser, served.url, ANALYST)
    browser.get(f"{served.url}/tools/faithful__clock")
    icon = browser.find_element(By.CSS_SELECTOR, "h1 img.icon")
    assert icon.get_attribute("src") == ICON.src
    # Shown as an image: the browser decoded it.
    assert browser.execute_script("return arguments[0].naturalWidth", icon) == 16
    browser.find_element(By.XPATH, "//button[starts-with(text(), 'Call faithful__clock')]").click()
    wait_for_text(browser, "#result", "12:00")
    frame = browser.find_element(By.ID, "app-view")
    result = browser.find_element(By.ID, "result")
    # Beside the result on a desktop screen, not below it.
    assert frame.location["x"] > result.location["x"] + result.size["width"] - 1
    assert frame.get_attribute("sandbox") == "allow-scripts"
    browser.switch_to.frame(frame)
    try:
        wait_for_text(browser, "#time", "rendered: 12:00")
        wait_for_text(browser, "#called", "called: 12:01")
        origin = browser.execute_script("return window.origin")
        cookie = browser.execute_script("try { return document.cookie } catch (error) { return 'refused' }")
    finally:
        browser.switch_to.default_content()
    assert origin == "null" and cookie == "refused"
    tools = [entry.tool for entry in served.portal.call(served.gateway.audit.recent, 10)]
    assert "faithful__clock" in tools and "faithful__hidden_clock" in tools
    violations = axe_violations(browser)
    assert not violations, describe(violations)
