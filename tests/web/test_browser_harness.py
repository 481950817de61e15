"""The browser test tools themselves: Chromium reaches a served gateway, axe-core really runs, and
screenshots are kept at both widths."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.support.browser import axe_violations, describe, screenshot, served_gateway, wait_for_text
from tests.support.harness import in_memory, make_config, placeholder
from tests.support.toy import build_server

# The gateway's pages will forbid inline script; axe-core has to run under such a policy too.
PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'self'; script-src 'self'">
<title>{title}</title>
</head>
<body><main><h1>{title}</h1>{body}</main></body>
</html>
"""


def open_page(driver: webdriver.Chrome, folder: Path, title: str, body: str) -> None:
    """Show a static page and wait until its heading is there."""
    page = folder / f"{title.replace(' ', '-')}.html"
    page.write_text(PAGE.format(title=title, body=body), encoding="utf-8")
    driver.get(page.as_uri())
    wait_for_text(driver, "h1", title)


def png_size(path: Path) -> tuple[int, int]:
    """The pixel width and height in a PNG's header."""
    header = path.read_bytes()[:24]
    assert header.startswith(b"\x89PNG\r\n\x1a\n"), f"{path} is not a PNG"
    width, height = struct.unpack(">II", header[16:24])
    return width, height


def test_the_browser_shows_a_served_gateway_s_health_and_a_server_added_through_its_portal(
    tmp_path: Path, browser: webdriver.Chrome
) -> None:
    config = make_config(tmp_path, placeholder(["toy"]))
    transports = in_memory({"toy": build_server("toy"), "added": build_server("added")})
    with served_gateway(config, transports=transports) as served:
        browser.get(f"{served.url}/healthz")
        wait_for_text(browser, "body", "ok")
        served.portal.call(served.gateway.servers.add, {"name": "added", **placeholder(["added"])["added"]})
        browser.get(f"{served.url}/readyz")
        wait_for_text(browser, "body", "ready")
        readiness = json.loads(browser.find_element(By.TAG_NAME, "body").text)
        assert readiness["ready"] is True
        assert set(readiness["servers"]) == {"toy", "added"}
        assert readiness["servers"]["toy"]["state"] == "ready"


def test_axe_finds_nothing_serious_on_an_accessible_page(tmp_path: Path, browser: webdriver.Chrome) -> None:
    body = '<form><label for="q">Search tools</label> <input id="q" name="q"> <button>Search</button></form>'
    open_page(browser, tmp_path, "Accessible", body)
    violations = axe_violations(browser)
    assert violations == [], describe(violations)


def test_axe_finds_an_image_without_alt_text_and_a_button_without_a_name(
    tmp_path: Path, browser: webdriver.Chrome
) -> None:
    body = '<img src="logo.png"> <button id="nameless"></button>'
    open_page(browser, tmp_path, "Inaccessible", body)
    violations = axe_violations(browser)
    assert {violation["id"] for violation in violations} == {"image-alt", "button-name"}, describe(violations)
    assert "#nameless" in describe(violations)


def test_a_screenshot_keeps_the_whole_page_laid_out_at_desktop_and_narrow_widths(
    tmp_path: Path, browser: webdriver.Chrome
) -> None:
    sentence = "A paragraph long enough to take one line on a desktop and several on a phone. "
    rows = "".join(f"<p>{number}. {sentence * 2}</p>" for number in range(40))
    open_page(browser, tmp_path, "Long page", rows)
    desktop, narrow = screenshot(browser, "long page")
    assert (desktop.name, narrow.name) == ("long-page-desktop.png", "long-page-narrow.png")
    (desktop_width, desktop_height), (narrow_width, narrow_height) = png_size(desktop), png_size(narrow)
    assert (desktop_width, narrow_width) == (1280, 375)
    # The window is 900 px high and the 40 paragraphs reach below it, further still when they wrap.
    assert 900 < desktop_height < narrow_height
    assert browser.execute_script("return window.innerWidth") == 1280
