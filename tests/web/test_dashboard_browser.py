"""The dashboard, a tool page and the servers page with their charts in a real headless Chromium,
over the generated hour of `test_dashboard`: charts drawn under the page's CSP, axe-core clean with
the tables behind them open and shut, the panels refreshed in place while the tab is shown and not
while it is hidden. Each test keeps its screenshots (desktop and narrow)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from gateway.config.loading import parse_config
from gateway.service import Gateway
from tests.support.access import KEYS, auth_section, toy_entry
from tests.support.browser import (
    WAIT,
    ServedGateway,
    axe_violations,
    describe,
    screenshot,
    served_gateway,
    sign_in,
    wait_for_text,
)
from tests.support.harness import in_memory
from tests.support.toy import build_server as toy
from tests.web.test_dashboard import NOW, ROLES, write_audit

# Counts the page's fetches and refreshes, so that a test can wait for the next one.
_COUNTING = """
window.fetches = 0; window.refreshes = 0;
const original = window.fetch;
window.fetch = (...args) => { window.fetches += 1; return original(...args); };
document.getElementById("panels").addEventListener("refreshed", () => { window.refreshes += 1; });
"""
_HIDE = """
Object.defineProperty(document, "hidden", {configurable: true, get: () => arguments[0]});
document.dispatchEvent(new Event("visibilitychange"));
"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServedGateway]:
    """The toy server and the generated hour, the gateway's clock a second before the hour ends."""
    document = {
        "gateway": {"data_dir": str(tmp_path / "data")},
        "servers": {"toy": toy_entry()},
        "auth": auth_section(),
        "roles": ROLES,
    }
    config = parse_config(document, source=str(tmp_path / "gateway.yaml"), base_dir=tmp_path)
    with served_gateway(config, transports=in_memory({"toy": toy("toy")}), wall_clock=lambda: float(NOW)) as served:

        async def generate(gateway: Gateway) -> None:
            write_audit(gateway)

        served.portal.call(generate, served.gateway)
        yield served


def clean(browser: webdriver.Chrome) -> None:
    """axe-core finds nothing serious on the page as it is now."""
    violations = axe_violations(browser)
    assert not violations, describe(violations)


def test_the_dashboard_draws_each_chart_with_its_table_and_passes_axe(
    browser: webdriver.Chrome, served: ServedGateway
) -> None:
    sign_in(browser, served.url, KEYS["admin"])
    browser.get(f"{served.url}/dashboard?window=1h")
    wait_for_text(browser, "#calls-summary", "931 calls")
    charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart[role=img]")
    assert len(charts) == 3 + 3 + 3  # calls, latency, health, and a sparkline per tool in each top table
    assert all(chart.get_attribute("aria-label") for chart in charts)
    # Drawn, not blocked: the bars have a size and a colour from the stylesheet.
    bars = browser.find_element(By.CSS_SELECTOR, "svg.stacked path.s-tool-error")
    assert bars.size["width"] > 0 and bars.value_of_css_property("fill") == "rgb(198, 40, 40)"
    clean(browser)
    screenshot(browser, "dashboard-charts")
    # Clicked in one script: the panels are replaced at each refresh, so elements found by the
    # driver before one can be gone by the time each is clicked.
    browser.execute_script("document.querySelectorAll('#panels details summary').forEach((s) => s.click())")
    assert browser.find_element(By.ID, "calls-table").is_displayed()
    clean(browser)
    # Nothing the CSP would block: no style attribute, no inline script.
    assert browser.execute_script("return document.querySelectorAll('[style], script:not([src])').length") == 0


def test_the_dashboard_refreshes_in_place_while_shown_and_not_while_hidden(
    browser: webdriver.Chrome, served: ServedGateway
) -> None:
    sign_in(browser, served.url, KEYS["admin"])
    browser.get(f"{served.url}/dashboard?window=1h")
    wait_for_text(browser, "#calls-summary", "931 calls")
    browser.find_element(By.CSS_SELECTOR, "#panels details summary").click()
    # Refreshes wait while focus is inside the panels (a refresh would pull it away): move on.
    browser.execute_script("document.activeElement.blur()")
    browser.execute_script(_COUNTING)
    WebDriverWait(browser, WAIT).until(lambda driver: driver.execute_script("return window.refreshes") >= 1)
    # A table opened stays open through a refresh, and the page was not reloaded.
    assert browser.find_element(By.ID, "calls-table").is_displayed()
    assert browser.execute_script("return typeof window.fetches") == "number"
    browser.execute_script(_HIDE, True)
    hidden_at = browser.execute_script("return window.fetches")
    # Two refresh periods pass hidden: a slower machine can only make fewer fetches, never more.
    time.sleep(7)
    assert browser.execute_script("return window.fetches") == hidden_at
    browser.execute_script(_HIDE, False)
    WebDriverWait(browser, WAIT).until(lambda driver: driver.execute_script("return window.fetches") > hidden_at)
    clean(browser)


def test_a_tool_page_and_the_servers_page_show_sparklines_and_pass_axe(
    browser: webdriver.Chrome, served: ServedGateway
) -> None:
    sign_in(browser, served.url, KEYS["admin"])
    browser.get(f"{served.url}/servers")
    spark = browser.find_element(By.CSS_SELECTOR, "#server-rows svg.spark")
    assert "931 calls, 81 not ok" in (spark.get_attribute("aria-label") or "")
    clean(browser)
    browser.get(f"{served.url}/tools/toy__add")
    spark = browser.find_element(By.CSS_SELECTOR, ".facts svg.spark")
    assert "330 calls, 30 not ok" in (spark.get_attribute("aria-label") or "")
    assert spark.size["width"] == 96
    clean(browser)
