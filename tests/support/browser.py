"""Browser tests' tools: Debian's Chromium under Selenium, screenshots at two widths, axe-core, and a
gateway served over HTTP from a background event loop so that blocking Selenium calls can reach it."""

from __future__ import annotations

import base64
import os
import re
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from gateway.config.model import GatewayConfig
from gateway.service import Gateway
from gateway.upstreams.transports import TransportFactory
from tests.support.harness import REPO, http_gateway

AXE_FILE = REPO / ".cache" / "axe-core" / "axe.min.js"
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
INSTALL_HINT = "install with `.ci/browser.sh` (as root)"
# The window every test starts in, and the two widths every screenshot is taken at.
DESKTOP = (1280, 900)
NARROW = (375, 812)
# Bound on any one wait in a browser test: far above what a page takes, so only a hang trips it.
WAIT = 30


@dataclass(frozen=True)
class BrowserTools:
    """Where the installed Chromium, its driver and axe-core are."""

    chromium: str
    chromedriver: str


def find_tools() -> tuple[BrowserTools | None, str]:
    """The installed browser tools, or what is missing and how to install it."""
    chromium = shutil.which("chromium")
    chromedriver = shutil.which("chromedriver")
    missing = [name for name, path in (("chromium", chromium), ("chromedriver", chromedriver)) if path is None]
    if not AXE_FILE.is_file():
        missing.append(f"axe-core ({AXE_FILE.relative_to(REPO)})")
    if missing or chromium is None or chromedriver is None:
        return None, f"{', '.join(missing)} not installed; {INSTALL_HINT}"
    return BrowserTools(chromium, chromedriver), ""


def start_chrome(tools: BrowserTools) -> webdriver.Chrome:
    """Headless Chromium at the desktop size, driven through the installed driver (never fetched)."""
    options = webdriver.ChromeOptions()
    options.binary_location = tools.chromium
    options.add_argument("--headless=new")
    options.add_argument(f"--window-size={DESKTOP[0]},{DESKTOP[1]}")
    # Containers give /dev/shm a few MB, too little for Chromium's shared memory.
    options.add_argument("--disable-dev-shm-usage")
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium refuses to start its sandbox as root
    driver = webdriver.Chrome(options=options, service=Service(executable_path=tools.chromedriver))
    driver.set_script_timeout(WAIT)
    driver.set_page_load_timeout(WAIT)
    return driver


def wait_for_text(driver: webdriver.Chrome, css: str, text: str) -> None:
    """Wait until the element `css` selects shows `text` (pages load and scripts run after `get`)."""
    condition = expected_conditions.text_to_be_present_in_element((By.CSS_SELECTOR, css), text)
    WebDriverWait(driver, WAIT).until(condition, f"no {text!r} in {css} of {driver.current_url}")


def sign_in(browser: webdriver.Chrome, url: str, key: str) -> None:
    """Paste `key` into the sign-in form and wait for the catalog."""
    browser.get(f"{url}/signin")
    browser.find_element(By.ID, "credential").send_keys(key)
    browser.find_element(By.CSS_SELECTOR, "form[action='/signin'] button").click()
    wait_for_text(browser, "h1", "Catalog")


def screenshot(driver: webdriver.Chrome, name: str) -> tuple[Path, Path]:
    """Save the whole page as `<name>-desktop.png` (1280 px wide) and `<name>-narrow.png` (375 px, as
    a phone lays it out) under test-artifacts/screenshots/; returns both paths."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")
    paths = (SCREENSHOTS / f"{stem}-desktop.png", SCREENSHOTS / f"{stem}-narrow.png")
    try:
        for path, (width, height), mobile in zip(paths, (DESKTOP, NARROW), (False, True), strict=True):
            metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}
            driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
            path.write_bytes(_full_page_png(driver, width, height))
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    return paths


def _full_page_png(driver: webdriver.Chrome, width: int, height: int) -> bytes:
    """The page from top to bottom, not just the part in view, and wider than `width` when its content
    overflows sideways (which a narrow screenshot should show)."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": max(width, size["width"]), "height": max(height, size["height"]), "scale": 1}
    capture = {"format": "png", "captureBeyondViewport": True, "clip": clip}
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", capture)
    return base64.b64decode(shot["data"])


_RUN_AXE = """
const done = arguments[arguments.length - 1];
axe.run(document, {resultTypes: ["violations"]}).then(
  (results) => done(results.violations),
  (error) => done({axeError: String(error)}),
);
"""


@cache
def _axe_source() -> str:
    """axe-core's script, as .ci/browser.sh installed it."""
    return AXE_FILE.read_text(encoding="utf-8")


def axe_violations(
    driver: webdriver.Chrome, impacts: tuple[str, ...] = ("serious", "critical")
) -> list[dict[str, Any]]:
    """axe-core's violations of the current page whose impact is one of `impacts`. The script is
    injected through the driver, which a page's Content-Security-Policy does not restrain."""
    if not driver.execute_script("return typeof window.axe !== 'undefined'"):
        driver.execute_script(_axe_source())
    outcome = driver.execute_async_script(_RUN_AXE)
    if isinstance(outcome, dict):
        raise AssertionError(f"axe-core failed on {driver.current_url}: {outcome['axeError']}")
    return [violation for violation in outcome if violation["impact"] in impacts]


def describe(violations: list[dict[str, Any]]) -> str:
    """axe-core violations as lines a failed assertion can show: rule, impact, help and the elements."""
    lines = []
    for violation in violations:
        targets = ", ".join(" ".join(node["target"]) for node in violation["nodes"])
        lines.append(f"{violation['id']} ({violation['impact']}): {violation['help']} at {targets}")
    return "\n".join(lines)


@dataclass(frozen=True)
class ServedGateway:
    """A gateway serving HTTP from its own event loop thread, and the portal to run its coroutines."""

    gateway: Gateway
    url: str
    portal: BlockingPortal


@contextmanager
def served_gateway(
    config: GatewayConfig, *, transports: Mapping[str, TransportFactory] | None = None, **options: Any
) -> Iterator[ServedGateway]:
    """`http_gateway` run on an event loop in another thread: a test's blocking driver calls then
    cannot stall the server they wait on. Reach the gateway's async API with `portal.call`."""
    with (
        start_blocking_portal(backend="asyncio") as portal,
        portal.wrap_async_context_manager(http_gateway(config, transports=transports, **options)) as (gateway, url),
    ):
        yield ServedGateway(gateway, url, portal)
