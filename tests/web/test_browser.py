"""The web page in a real headless Chromium: signing in, live search, a tool's parameters, try-it,
what a guest may open, adding a server that a connected MCP client then sees, a store that cannot be
written, an approval that lets a parked call run once, hostile text that runs nothing, and axe-core on
every page."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from gateway.config.loading import parse_config
from gateway.config.model import GatewayConfig
from servers.calc import build_server as calc
from tests.gateway.test_poisoning_e2e import HIDDEN, TAGGED, poisoned
from tests.support.access import KEYS, auth_section, http_client, recording_upstream, toy_entry
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
from tests.support.harness import in_memory, until_listed
from tests.support.launches import launches
from tests.support.skills import text, write_skill
from tests.support.toy import build_server as toy
from tests.web.test_pages import hostile

ADMIN, ANALYST, INTERN = KEYS["admin"], KEYS["analyst"], KEYS["intern"]
ROLES: dict[str, Any] = {
    "admin": {"allow": ["*"], "admin": True},
    "analyst": {"allow": ["*"]},
    "intern": {"allow": ["toy__echo", "toy__add", "local__*"]},
}
TITLE_MARK = "pwned"
# Each payload would change the page's title, or open an alert, if it ever ran.
PAYLOAD = (
    f"<script>document.title='{TITLE_MARK}'</script> <img src=x onerror=\"document.title='{TITLE_MARK}'\"> "
    f'<a href="javascript:alert(1)">click</a>'
)
SKILL_BODY = f"# Evil\n\n{PAYLOAD}\n\n[click](javascript:alert(2)) [docs](https://example.com/docs)\n"


def config(tmp_path: Path) -> GatewayConfig:
    """Toy, calc and hostile servers in memory, the launch tool, a hostile skill, three roles with keys."""
    skills = write_skill(tmp_path / "skills", "evil", "evil__*", body=SKILL_BODY).parent
    document = {
        "gateway": {"data_dir": str(tmp_path / "data"), "skill_dirs": [str(skills)]},
        "servers": {
            "toy": toy_entry(),
            "calc": {"command": "unused"},
            "evil": {"command": "unused"},
            "poisoned": {"command": "unused"},
        },
        "local_tools": ["tests.support.launches"],
        "auth": auth_section(),
        "roles": ROLES,
        "registration": {"allow_urls": ["http://127.0.0.1:*/**"]},
    }
    return parse_config(document, source=str(tmp_path / "gateway.yaml"), base_dir=tmp_path)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServedGateway]:
    """The gateway of `config` served over HTTP from its own event loop."""
    transports = in_memory({"toy": toy("toy"), "calc": calc(), "evil": hostile(PAYLOAD), "poisoned": poisoned()})
    with served_gateway(config(tmp_path), transports=transports) as gateway:
        yield gateway


def results(browser: webdriver.Chrome) -> str:
    """The text of the catalog's result list."""
    return browser.find_element(By.ID, "results").text


def test_a_person_signs_in_searches_as_they_type_and_reads_a_tool_s_parameters(
    served: ServedGateway, browser: webdriver.Chrome
) -> None:
    sign_in(browser, served.url, ANALYST)
    assert "toy__echo" in results(browser) and "calc__evaluate" in results(browser)
    browser.find_element(By.ID, "q").send_keys("two integers")
    WebDriverWait(browser, WAIT).until(lambda driver: "toy__echo" not in results(driver), "search did not narrow")
    assert "toy__add" in results(browser) and "1 of" in results(browser)
    assert "q=two+integers" in browser.current_url
    browser.find_element(By.LINK_TEXT, "toy__add").click()
    wait_for_text(browser, "table.params", "required")
    table = browser.find_element(By.CSS_SELECTOR, "table.params").text
    assert "a" in table.split() and "b" in table.split() and "integer" in table


def test_try_it_calls_calc_evaluate_and_shows_the_answer(served: ServedGateway, browser: webdriver.Chrome) -> None:
    sign_in(browser, served.url, ANALYST)
    browser.get(f"{served.url}/tools/calc__evaluate")
    field = browser.find_element(By.CSS_SELECTOR, "[name='arg.expression']")
    field.send_keys("sqrt(16) * (3 + 4)")
    browser.find_element(By.XPATH, "//button[starts-with(text(), 'Call calc__evaluate')]").click()
    wait_for_text(browser, "#result", "28")
    entries = served.portal.call(served.gateway.audit.recent, 5, None, "calc__evaluate")
    assert [entry.outcome for entry in entries] == ["ok"]


def test_a_guest_sees_only_its_tools_and_a_hidden_tool_s_page_is_not_found(
    served: ServedGateway, browser: webdriver.Chrome
) -> None:
    sign_in(browser, served.url, INTERN)
    listed = results(browser)
    assert "toy__echo" in listed and "toy__add" in listed
    assert "calc__evaluate" not in listed and "toy__increment" not in listed
    browser.get(f"{served.url}/tools/calc__evaluate")
    wait_for_text(browser, "h1", "Not found")
    browser.get(f"{served.url}/audit")
    wait_for_text(browser, "h1", "Not allowed")


def test_an_admin_adds_a_server_on_the_page_and_a_connected_client_sees_its_tools(
    served: ServedGateway, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    portal = served.portal
    with (
        portal.wrap_async_context_manager(recording_upstream(tmp_path / "headers.log")) as upstream,
        portal.wrap_async_context_manager(http_client(served.url, ADMIN)) as client,
    ):
        portal.call(client.list_tools)
        sign_in(browser, served.url, ADMIN)
        browser.get(f"{served.url}/servers")
        browser.find_element(By.ID, "s-name").send_keys("remote")
        browser.find_element(By.ID, "s-url").send_keys(upstream)
        browser.find_element(By.XPATH, "//button[text()='Add server']").click()
        wait_for_text(browser, "#server-rows", "remote")
        portal.call(until_listed, client, "remote__echo")
        # The list refreshes itself: the new server's row turns ready without a reload. Each refresh
        # replaces the rows, so the condition reads a row that went stale as not ready yet.
        row = (By.XPATH, "//tbody[@id='server-rows']/tr[th='remote']")
        ready = expected_conditions.text_to_be_present_in_element(row, "ready")
        WebDriverWait(browser, WAIT).until(ready, "the new server's row never showed it ready")


def test_adding_a_server_while_the_store_is_locked_shows_a_503_page_and_adds_nothing(
    served: ServedGateway, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    sign_in(browser, served.url, ADMIN)
    browser.get(f"{served.url}/servers")
    browser.find_element(By.ID, "s-name").send_keys("late")
    browser.find_element(By.ID, "s-url").send_keys("http://127.0.0.1:9/mcp")
    # Another process holds the write lock of the registrations file past SQLite's busy timeout.
    with closing(sqlite3.connect(tmp_path / "data" / "registrations.db", isolation_level=None)) as holder:
        holder.execute("BEGIN IMMEDIATE")
        browser.find_element(By.XPATH, "//button[text()='Add server']").click()
        wait_for_text(browser, "p.error", "store cannot be read or written")
        holder.execute("ROLLBACK")
    assert browser.title.startswith("503")
    assert "late" not in served.portal.call(served.gateway.registrations.entries, "server")
    browser.get(f"{served.url}/servers")
    assert "late" not in browser.find_element(By.ID, "server-rows").text


def test_an_approval_on_the_page_lets_a_parked_call_run_exactly_once(
    served: ServedGateway, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    log = tmp_path / "launches.log"
    arguments = {"log": str(log), "target": "moon"}
    with served.portal.wrap_async_context_manager(http_client(served.url, INTERN)) as client:
        parked = served.portal.call(client.call_tool, "local__launch", arguments)
        assert parked.is_error and "Nothing was done" in text(parked)
        sign_in(browser, served.url, ADMIN)
        browser.get(f"{served.url}/approvals")
        wait_for_text(browser, "table", "local__launch")
        browser.find_element(By.XPATH, "//button[text()='Approve']").click()
        wait_for_text(browser, "p.notice", "approved")
        ran = served.portal.call(client.call_tool, "local__launch", arguments)
        again = served.portal.call(client.call_tool, "local__launch", arguments)
    assert not ran.is_error and text(ran) == "launched at moon"
    assert again.is_error and "Nothing was done" in text(again)
    assert launches(log) == ["moon"]


def test_hostile_descriptions_schemas_and_skills_run_nothing(served: ServedGateway, browser: webdriver.Chrome) -> None:
    sign_in(browser, served.url, ANALYST)
    shown = {"/?q=trap": "<script>", "/tools/evil__trap": "<script>", "/skills": "evil", "/skills/evil": "<script>"}
    for path, expected in shown.items():
        browser.get(f"{served.url}{path}")
        wait_for_text(browser, "main", expected)
        assert TITLE_MARK not in browser.title, path
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018  (reading it is what raises when there is none)
        hrefs = [link.get_attribute("href") or "" for link in browser.find_elements(By.TAG_NAME, "a")]
        assert not any(href.lower().startswith("javascript:") for href in hrefs), path
    browser.get(f"{served.url}/tools/evil__trap")
    browser.find_element(By.CSS_SELECTOR, "[name='arg.text']").send_keys(PAYLOAD)
    browser.find_element(By.XPATH, "//button[starts-with(text(), 'Call evil__trap')]").click()
    wait_for_text(browser, "#result", "<script>")
    assert TITLE_MARK not in browser.title
    assert browser.find_elements(By.CSS_SELECTOR, "#result img") == []


def test_a_flagged_tool_shows_its_badge_in_the_catalog_and_its_hidden_instruction_written_out_on_its_page(
    served: ServedGateway, browser: webdriver.Chrome
) -> None:
    sign_in(browser, served.url, ANALYST)
    browser.get(f"{served.url}/?q=lookup")
    wait_for_text(browser, "#results", "poisoned__lookup")
    badge = browser.find_element(By.CSS_SELECTOR, "#results .flagged").text
    browser.get(f"{served.url}/tools/poisoned__lookup")
    wait_for_text(browser, ".flags", "Flagged")
    flags = browser.find_element(By.CSS_SELECTOR, ".flags").text
    description = browser.find_element(By.CSS_SELECTOR, "p.description").text
    assert badge == "flagged: tag characters, concealment, secret access"
    assert f'<tags "{HIDDEN}">' in flags and "hidden Unicode tag characters" in flags
    assert description == f'Looks a word up.<tags "{HIDDEN}">'
    assert TAGGED[0] not in browser.page_source


def test_axe_finds_nothing_serious_on_any_page(served: ServedGateway, browser: webdriver.Chrome) -> None:
    browser.get(f"{served.url}/signin")
    wait_for_text(browser, "h1", "Sign in")
    found = {"/signin": axe_violations(browser)}
    sign_in(browser, served.url, ADMIN)
    pages = ["/", "/?q=toy", "/tools/toy__add", "/tools/evil__trap", "/tools/poisoned__lookup", "/servers", "/skills"]
    pages += ["/skills/evil"]
    pages += ["/connect", "/approvals", "/audit", "/no/such/page"]
    for path in pages:
        browser.get(f"{served.url}{path}")
        wait_for_text(browser, "main", "")
        found[path] = axe_violations(browser)
    browser.get(f"{served.url}/tools/calc__evaluate")
    browser.find_element(By.CSS_SELECTOR, "[name='arg.expression']").send_keys("1 +")
    browser.find_element(By.XPATH, "//button[starts-with(text(), 'Call calc__evaluate')]").click()
    wait_for_text(browser, "#result", "Error")
    found["try-it error"] = axe_violations(browser)
    assert {path: describe(v) for path, v in found.items() if v} == {}


def test_removing_a_server_on_the_page_asks_first_and_then_says_it_is_gone(
    served: ServedGateway, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    with served.portal.wrap_async_context_manager(recording_upstream(tmp_path / "headers.log")) as upstream:
        sign_in(browser, served.url, ADMIN)
        browser.get(f"{served.url}/servers")
        browser.find_element(By.ID, "s-name").send_keys("remote")
        browser.find_element(By.ID, "s-url").send_keys(upstream)
        browser.find_element(By.XPATH, "//button[text()='Add server']").click()
        wait_for_text(browser, "p.notice", "Added 'remote'")
        toy_row = browser.find_element(By.XPATH, "//tbody[@id='server-rows']/tr[th='toy']").text
        browser.find_element(By.CSS_SELECTOR, "button[aria-label='Remove remote']").click()
        wait_for_text(browser, "h1", "Remove server remote?")
        screenshot(browser, "removing-a-server-confirmation")
        asked = axe_violations(browser, ("serious", "critical", "moderate", "minor"))
        assert "remote" in [status.name for status in served.gateway.servers.statuses()]
        browser.find_element(By.XPATH, "//button[text()='Remove remote']").click()
        wait_for_text(browser, "p.notice", "Server 'remote' was removed.")
        listed = axe_violations(browser)
    assert "config file" in toy_row and "Edited in the config file" in toy_row
    assert "Disable" not in toy_row and "Remove" not in toy_row
    assert "remote" not in [status.name for status in served.gateway.servers.statuses()]
    assert {"confirm": describe(asked), "servers": describe(listed)} == {"confirm": "", "servers": ""}


def test_problems_with_an_added_server_are_announced_without_an_accessibility_violation(
    served: ServedGateway, browser: webdriver.Chrome
) -> None:
    sign_in(browser, served.url, ADMIN)
    browser.get(f"{served.url}/servers")
    browser.find_element(By.ID, "body").send_keys("{not json")
    browser.find_element(By.XPATH, "//button[text()='Add from pasted JSON']").click()
    wait_for_text(browser, "#body-error", "not valid JSON")
    every = ("serious", "critical", "moderate", "minor")
    pasted = axe_violations(browser, every)
    browser.find_element(By.ID, "s-name").send_keys("x")
    browser.find_element(By.XPATH, "//button[text()='Add server']").click()
    wait_for_text(browser, "#s-command-error", "either a command or a URL")
    assert {"pasted": describe(pasted), "fields": describe(axe_violations(browser, every))} == {
        "pasted": "",
        "fields": "",
    }


BROKEN_NAMES = """
return [...document.querySelectorAll("table code")]
  .filter((code) => !/\\s/.test(code.textContent) && code.getClientRects().length > 1)
  .map((code) => code.textContent);
"""


def test_names_in_tables_stay_whole_on_a_narrow_screen(served: ServedGateway, browser: webdriver.Chrome) -> None:
    with served.portal.wrap_async_context_manager(http_client(served.url, ADMIN)) as client:
        served.portal.call(client.call_tool, "toy__add", {"a": 1, "b": 2})
    sign_in(browser, served.url, ADMIN)
    phone = {"width": 375, "height": 812, "deviceScaleFactor": 1, "mobile": True}
    broken = {}
    for path in ("/tools/calc__evaluate", "/tools/toy__add", "/audit", "/servers"):
        browser.get(f"{served.url}{path}")
        wait_for_text(browser, "main", "")
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", phone)
        try:
            broken[path] = browser.execute_script(BROKEN_NAMES)
        finally:
            browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert broken == {"/tools/calc__evaluate": [], "/tools/toy__add": [], "/audit": [], "/servers": []}
