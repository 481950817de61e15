"""Page loads timed in a real browser: Debian's Chromium (headless, under Selenium, as the browser
tests drive it; `.ci/browser.sh` installs both) signs in with an API key and opens pages, and each
load is read from the Navigation Timing API: the wait for the first byte of the page (the server's
render and the network), and the time to the `load` event (stylesheet, script and SVG charts
drawn). Used by `python -m benchmarks.dashboard --browser`."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

WAIT = 60
"""Bound on any one page load, in seconds: far above what a page takes, so only a hang trips it."""
_TIMING = "return performance.getEntriesByType('navigation')[0].toJSON()"


@dataclass(frozen=True, slots=True)
class Load:
    """One page load, in ms from its start."""

    first_byte: float
    loaded: float


def chrome() -> webdriver.Chrome:
    """Headless Chromium at a desktop size through the installed driver (never fetched)."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        raise SystemExit("chromium and chromedriver are needed for --browser; install them with .ci/browser.sh")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    options.add_argument("--headless=new")
    options.add_argument("--window-size=1280,900")
    options.add_argument("--disable-dev-shm-usage")
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium refuses to start its sandbox as root
    browser = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    browser.set_page_load_timeout(WAIT)
    return browser


def page_loads(base: str, key: str, pages: Mapping[str, str], runs: int) -> dict[str, list[Load]]:
    """Each of `pages` (label: path and query) loaded `runs` times in turn, signed in with `key` at `base`."""
    browser = chrome()
    try:
        browser.get(f"{base}/signin")
        browser.find_element(By.ID, "credential").send_keys(key)
        browser.find_element(By.CSS_SELECTOR, "form[action='/signin'] button").click()
        WebDriverWait(browser, WAIT).until(
            expected_conditions.text_to_be_present_in_element((By.TAG_NAME, "h1"), "Catalog")
        )
        loads: dict[str, list[Load]] = {label: [] for label in pages}
        for _ in range(runs):
            for label, path in pages.items():
                browser.get(f"{base}{path}")
                WebDriverWait(browser, WAIT).until(lambda driver: driver.execute_script(_TIMING)["loadEventEnd"] > 0)
                timing: dict[str, Any] = browser.execute_script(_TIMING)
                loads[label].append(Load(float(timing["responseStart"]), float(timing["loadEventEnd"])))
        return loads
    finally:
        browser.quit()
