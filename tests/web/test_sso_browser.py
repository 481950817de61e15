"""Web sign-in with the organisation's OpenID provider, in a real headless Chromium: a real
`oidc-provider`, the authorization-code flow with PKCE, state and nonce, and the roles the same
rules give MCP callers. API-key sign-in stays beside it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.support.access import CALLERS, KEYS, ROLES, access_config, toy_entry
from tests.support.browser import ServedGateway, axe_violations, describe, screenshot, served_gateway, wait_for_text
from tests.support.harness import in_memory
from tests.support.oidc import AUDIENCE, WEB_CLIENT, WEB_SECRET, OpenIdProvider, openid_provider
from tests.support.toy import build_server as toy


@pytest.fixture
def signin(tmp_path: Path) -> Iterator[tuple[OpenIdProvider, ServedGateway]]:
    """A provider, and a gateway whose page signs people in with it (its callback registered there)."""
    with openid_provider() as provider:
        auth: dict[str, Any] = {
            "resource_url": AUDIENCE,
            "api_keys": [{"caller": CALLERS["intern"], "role": "intern", "key": KEYS["intern"]}],
            "jwt": {
                "issuer": provider.issuer,
                "role_rules": [{"claim": "groups", "value": "ops", "role": "admin"}, {"role": "intern"}],
            },
            "web_signin": {"client_id": WEB_CLIENT, "client_secret": WEB_SECRET, "scopes": ["openid", "groups"]},
        }
        roles = {**ROLES, "admin": {**ROLES["admin"], "admin": True}}
        config = access_config(tmp_path, {"toy": toy_entry()}, auth=auth, roles=roles)
        with served_gateway(config, transports=in_memory({"toy": toy("toy")})) as served:
            served.portal.call(provider.redirect_to, f"{served.url}/signin/oidc/callback")
            yield provider, served


def sign_in_at_the_provider(browser: webdriver.Chrome, login: str) -> None:
    """Fill in the provider's login form, then agree to its consent prompt."""
    wait_for_text(browser, "body", "Sign-in")
    browser.find_element(By.CSS_SELECTOR, "input[name=login]").send_keys(login)
    browser.find_element(By.CSS_SELECTOR, "input[name=password]").send_keys("any password")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for_text(browser, "body", "Authorize")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()


def test_a_person_signs_in_with_the_provider_and_gets_the_role_the_groups_rule_gives(
    signin: tuple[OpenIdProvider, ServedGateway], browser: webdriver.Chrome
) -> None:
    _, served = signin
    browser.get(f"{served.url}/audit")
    wait_for_text(browser, "h1", "Sign in")
    assert not axe_violations(browser), describe(axe_violations(browser))
    screenshot(browser, "sso-signin-page")
    browser.find_element(By.LINK_TEXT, "Sign in with your organisation").click()
    sign_in_at_the_provider(browser, "ops-olga")
    # Back on the page it asked for, as the person the ID token names, an admin by the groups rule.
    wait_for_text(browser, "h1", "Audit")
    assert browser.current_url == f"{served.url}/audit"
    wait_for_text(browser, "header", "ops-olga (admin)")


def test_a_person_outside_the_ops_group_gets_the_default_role_and_api_keys_still_sign_in(
    signin: tuple[OpenIdProvider, ServedGateway], browser: webdriver.Chrome
) -> None:
    _, served = signin
    browser.get(f"{served.url}/signin")
    browser.find_element(By.LINK_TEXT, "Sign in with your organisation").click()
    sign_in_at_the_provider(browser, "sam")
    wait_for_text(browser, "header", "sam (intern)")
    browser.find_element(By.CSS_SELECTOR, "header button[type=submit]").click()  # sign out
    wait_for_text(browser, "h1", "Sign in")
    browser.find_element(By.ID, "credential").send_keys(KEYS["intern"])
    browser.find_element(By.CSS_SELECTOR, "form[action='/signin'] button[type=submit]").click()
    wait_for_text(browser, "header", f"{CALLERS['intern']} (intern)")


def test_an_answer_that_did_not_start_in_this_browser_is_refused_on_the_sign_in_page(
    signin: tuple[OpenIdProvider, ServedGateway], browser: webdriver.Chrome
) -> None:
    _, served = signin
    browser.get(f"{served.url}/signin/oidc/callback?code=stolen&state=forged")
    wait_for_text(browser, "#sso-error", "did not start in this browser")
    assert "Sign in with your organisation" in browser.find_element(By.ID, "main").text
    assert not axe_violations(browser), describe(axe_violations(browser))
