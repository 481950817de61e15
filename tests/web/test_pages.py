"""The web page through a real gateway over real HTTP: sign-in sessions, CSRF, headers, what each
role sees, hostile text escaped, and the try-it form calling a tool through the pipeline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import pytest
from mcp.server import MCPServer
from pydantic import Field

from gateway.config.loading import parse_config
from gateway.service import Gateway
from gateway.web.headers import SECURITY_HEADERS
from tests.support.access import KEYS, access_config, auth_section, toy_entry
from tests.support.harness import http_gateway, in_memory, make_config
from tests.support.skills import write_skill
from tests.support.toy import PIXEL
from tests.support.toy import build_server as toy
from tests.support.webclient import web_client

pytestmark = pytest.mark.anyio

ROLES: dict[str, Any] = {
    "admin": {"allow": ["*"], "admin": True},
    "analyst": {"allow": ["toy__*", "evil__*"]},
    "intern": {"allow": ["toy__echo", "toy__add"]},
}
ADMIN, ANALYST, INTERN = KEYS["admin"], KEYS["analyst"], KEYS["intern"]
HOSTILE = '<script>alert(1)</script> <img src=x onerror=alert(2)> <a href="javascript:alert(3)">x</a>'
SKILL_BODY = (
    "# Evil\n\n<script>alert(5)</script>\n\n<img src=x onerror=alert(6)>\n\n"
    "[click](javascript:alert(7)) [safe](https://example.com/docs)\n"
)


def hostile(payload: str = HOSTILE) -> MCPServer:
    """A server whose tool's description and schema carry `payload`: script, event handlers, javascript: links."""
    server = MCPServer("evil")

    async def trap(text: str) -> str:
        return text

    # Set as objects: a string annotation could not name this function's `payload`.
    trap.__annotations__ = {"text": Annotated[str, Field(description=payload, default=payload)], "return": str}
    server.tool(name="trap", description=payload, structured_output=False)(trap)

    return server


@asynccontextmanager
async def served(tmp_path: Path) -> AsyncIterator[tuple[Gateway, str]]:
    """The toy and hostile servers, a hostile skill, three roles with keys, over real HTTP."""
    skills = write_skill(tmp_path / "skills", "evil", "evil__*", body=SKILL_BODY).parent
    servers = {"toy": toy_entry(), "evil": {"command": "unused"}}
    config = access_config(tmp_path, servers, roles=ROLES, skill_dirs=[str(skills)])
    transports = in_memory({"toy": toy("toy"), "evil": hostile()})
    async with http_gateway(config, transports=transports) as (gateway, url):
        yield gateway, url


async def test_signing_in_sets_only_an_httponly_strict_session_cookie_and_never_the_key(tmp_path: Path) -> None:
    async with served(tmp_path) as (_, url), web_client(url) as page:
        before = await page.get("/")
        signed = await page.sign_in(ANALYST)
        catalog = await page.get("/")
    assert before.status_code == 303 and before.headers["location"].startswith("/signin")
    assert signed.status_code == 303 and signed.headers["location"] == "/"
    cookies = signed.headers.get_list("set-cookie")
    assert len(cookies) == 1
    cookie = cookies[0]
    assert cookie.startswith("gateway_session=") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "Secure" not in cookie  # plain HTTP on loopback
    assert ANALYST not in cookie and ANALYST not in catalog.text
    assert catalog.status_code == 200 and "toy__echo" in catalog.text


async def test_a_wrong_key_is_refused_on_the_sign_in_page(tmp_path: Path) -> None:
    async with served(tmp_path) as (_, url), web_client(url) as page:
        refused = await page.sign_in("not-a-key-0123456789")
        after = await page.get("/")
    assert refused.status_code == 401 and "unknown API key" in refused.text
    assert after.status_code == 303


async def test_signing_out_ends_the_session(tmp_path: Path) -> None:
    async with served(tmp_path) as (_, url), web_client(url) as page:
        await page.sign_in(ANALYST)
        cookie = page.http.cookies["gateway_session"]
        out = await page.submit("/", "/signout")
        page.http.cookies.set("gateway_session", cookie)
        again = await page.get("/")
    assert out.status_code == 303 and out.headers["location"] == "/signin"
    assert again.status_code == 303 and again.headers["location"].startswith("/signin")


async def test_a_form_without_its_csrf_token_or_with_a_wrong_one_is_refused(tmp_path: Path) -> None:
    async with served(tmp_path) as (_, url), web_client(url) as page:
        await page.sign_in(ADMIN)
        missing = await page.http.post("/tools/toy__add/try", data={"arg.a": "1", "arg.b": "2"})
        wrong = await page.http.post("/signout", data={"csrf": "forged"})
        sign_in = await page.http.post("/signin", data={"credential": ADMIN})
        still = await page.get("/")
        calls = await page.get("/audit?tool=toy__add")
    assert missing.status_code == wrong.status_code == sign_in.status_code == 403
    assert still.status_code == 200
    assert "No entries match" in calls.text


async def test_every_page_carries_the_security_headers(tmp_path: Path) -> None:
    pages = ["/", "/servers", "/servers/rows", "/skills", "/skills/evil", "/connect", "/approvals", "/audit"]
    pages += ["/tools/toy__echo", "/catalog/results?q=echo", "/signin", "/no/such/page", "/static/web.css"]
    async with served(tmp_path) as (_, url), web_client(url) as page:
        await page.sign_in(ADMIN)
        answers = {path: await page.get(path) for path in pages}
    for path, answer in answers.items():
        assert answer.status_code == (404 if path == "/no/such/page" else 200), path
        for name, value in SECURITY_HEADERS.items():
            assert answer.headers.get(name) == value, (path, name)
    assert "'unsafe-inline'" not in SECURITY_HEADERS["Content-Security-Policy"]
    assert "<script>" not in answers["/"].text and 'src="/static/web.js"' in answers["/"].text


async def test_a_guest_sees_only_its_tools_and_a_hidden_tool_page_is_like_an_unknown_one(tmp_path: Path) -> None:
    async with served(tmp_path) as (_, url), web_client(url) as page:
        await page.sign_in(INTERN)
        catalog = await page.get("/")
        hidden = await page.get("/tools/toy__increment")
        unknown = await page.get("/tools/toy__nothing")
        tried = await page.submit("/tools/toy__echo", "/tools/toy__increment/try")
        audit = await page.get("/audit")
    assert "toy__echo" in catalog.text and "toy__add" in catalog.text
    assert "toy__increment" not in catalog.text and "evil__trap" not in catalog.text
    assert "2 of 2 tools" in catalog.text
    assert hidden.status_code == unknown.status_code == tried.status_code == 404
    assert hidden.text.replace("toy__increment", "X") == unknown.text.replace("toy__nothing", "X")
    assert audit.status_code == 403


async def test_search_narrows_the_catalog_on_the_server(tmp_path: Path) -> None:
    async with served(tmp_path) as (_, url), web_client(url) as page:
        await page.sign_in(ADMIN)
        narrowed = await page.get("/catalog/results", params={"q": "integers"})
        risky = await page.get("/", params={"risk": "high"})
    assert "toy__add" in narrowed.text and "toy__echo" not in narrowed.text and "1 of" in narrowed.text
    assert "<html" not in narrowed.text
    assert "toy__increment" in risky.text and "toy__echo" not in risky.text.split('id="results"')[1]


async def test_hostile_descriptions_schemas_and_skills_come_out_escaped(tmp_path: Path) -> None:
    async with served(tmp_path) as (_, url), web_client(url) as page:
        await page.sign_in(ANALYST)
        pages = [await page.get(path) for path in ("/", "/tools/evil__trap", "/skills", "/skills/evil")]
        tried = await page.submit("/tools/evil__trap", "/tools/evil__trap/try", {"arg.text": HOSTILE})
    for answer in [*pages, tried]:
        assert answer.status_code == 200
        html = answer.text
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "javascript:" not in html.replace("javascript:alert", "")
        assert 'href="javascript' not in html
    tool_page, skill_page = pages[1].text, pages[3].text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in tool_page
    assert "&lt;script&gt;alert(5)&lt;/script&gt;" in skill_page
    assert '<a href="https://example.com/docs">safe</a>' in skill_page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in tried.text


async def test_try_it_calls_the_tool_as_the_person_and_the_call_is_audited(tmp_path: Path) -> None:
    async with served(tmp_path) as (gateway, url), web_client(url) as page:
        await page.sign_in(ANALYST)
        shown = await page.get("/tools/toy__add")
        answer = await page.submit("/tools/toy__add", "/tools/toy__add/try", {"arg.a": "2", "arg.b": "40"})
        bad = await page.submit("/tools/toy__add", "/tools/toy__add/try", {"arg.a": "two", "arg.b": "1"})
        invalid = await page.submit("/tools/toy__add", "/tools/toy__add/try", {"arg.a": "1"})
        entries = await gateway.audit.recent(10, tool="toy__add")
    assert "<code>a</code>" in shown.text and "required" in shown.text
    assert answer.status_code == 200 and '<pre class="output">42</pre>' in answer.text
    assert "expected a number" in bad.text
    assert 'class="result failed"' in invalid.text and "b" in invalid.text
    # Newest first: the call the form could not even make is not audited.
    assert [entry.outcome for entry in entries] == ["invalid_arguments", "ok"]
    assert all(entry.caller == "api_key:ann" for entry in entries)


async def test_an_image_the_tool_returns_is_shown_from_a_data_url(tmp_path: Path) -> None:
    async with served(tmp_path) as (_, url), web_client(url) as page:
        await page.sign_in(ANALYST)
        answer = await page.submit("/tools/toy__picture", "/tools/toy__picture/try")
    assert '<pre class="output">a pixel</pre>' in answer.text
    assert f'<img src="data:image/png;base64,{PIXEL}"' in answer.text


async def test_with_authentication_off_the_page_is_open_as_mcp_is(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"toy": toy_entry()})
    async with (
        http_gateway(config, transports=in_memory({"toy": toy("toy")})) as (_, url),
        web_client(url) as page,
    ):
        catalog = await page.get("/")
        servers = await page.get("/servers")
        audit = await page.get("/audit")
    assert catalog.status_code == 200 and "toy__echo" in catalog.text and "Sign out" not in catalog.text
    cookie = catalog.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    # Operating the gateway without authentication needs gateway.admin_without_auth.
    assert servers.status_code == 200 and "Add a server" not in servers.text
    assert audit.status_code == 403


async def test_a_tool_page_says_whether_the_tool_takes_arguments_its_schema_does_not_name(tmp_path: Path) -> None:
    document = {
        "gateway": {"data_dir": str(tmp_path / "data")},
        "servers": {"toy": toy_entry()},
        "local_tools": ["tests.support.launches"],
        "auth": auth_section(),
        "roles": ROLES,
    }
    config = parse_config(document, source=str(tmp_path / "gateway.yaml"), base_dir=tmp_path)
    async with (
        http_gateway(config, transports=in_memory({"toy": toy("toy")})) as (_, url),
        web_client(url) as page,
    ):
        await page.sign_in(ADMIN)
        strict = await page.get("/tools/local__launch")
        loose = await page.get("/tools/toy__add")
    assert "Other arguments: refused; a call naming one gets an error saying which" in strict.text
    assert "Other arguments: accepted and passed to the server unchecked" in loose.text
