"""Browser fixtures: a headless Chromium for each test, which keeps a screenshot of where the test
ended; without Chromium, its driver or axe-core the tests skip, and under CI=true they fail."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from selenium import webdriver

from tests.support.browser import BrowserTools, find_tools, screenshot, start_chrome


@pytest.fixture(scope="session")
def browser_tools() -> BrowserTools:
    """The installed browser tools; under CI=true a missing one fails instead of skipping."""
    tools, problem = find_tools()
    if tools is None:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    return tools


@pytest.fixture
def browser(browser_tools: BrowserTools, request: pytest.FixtureRequest) -> Iterator[webdriver.Chrome]:
    """A fresh headless Chromium (no cookies or storage from other tests); the page it shows when the
    test ends is kept as `<test name>-desktop.png` and `-narrow.png`."""
    driver = start_chrome(browser_tools)
    try:
        yield driver
        screenshot(driver, request.node.name)
    finally:
        driver.quit()
