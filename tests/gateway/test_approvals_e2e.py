"""Pending approvals through a real gateway over real HTTP with real API keys: a call of a client that
cannot elicit is parked, a person decides it through the CLI or `/api/v1/approvals`, and the model's
retry runs it exactly once; nothing the model sends can stand for that decision. Each test runs on
each store backend; two gateways sharing one database run an approved call once between them."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any, cast

import anyio
import httpx2
import mcp_types as types
import pytest
import yaml
from mcp.client.context import ClientRequestContext

from gateway.config.loading import load_config
from gateway.config.model import GatewayConfig
from gateway.pipeline.chain import ToolCall
from gateway.pipeline.confirmation import APPROVAL_KEY, ARGUMENT, binding_of
from gateway.stores import Database, StoreSettings, open_database
from tests.support.access import KEYS, auth_section, http_client
from tests.support.databases import Backend
from tests.support.harness import REPO, http_gateway
from tests.support.launches import launches
from tests.support.services import postgres_server
from tests.support.skills import text, write_skill

pytestmark = pytest.mark.anyio

TOOL = "local__launch"
TTL = 300.0
CONFIRMATION_META = "io.mcp-gateway/confirmation"
ROLES: dict[str, Any] = {
    "admin": {"allow": ["*"], "admin": True},
    "analyst": {"allow": ["*"], "approve": "own"},
    "intern": {"allow": ["*"]},
}
ADMIN, ANALYST, INTERN = KEYS["admin"], KEYS["analyst"], KEYS["intern"]
CLIENT_LOGGERS = ("mcp.client", "httpx2", "httpcore2")


class Clock:
    """A hand-moved wall clock for the gateway's approvals, so expiry is tested without waiting."""

    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        return self.now


class Setup:
    """A configuration file (for the gateway and the CLI), its data directory and store, and the launch log."""

    def __init__(self, tmp_path: Path, backend: Backend) -> None:
        skills = write_skill(tmp_path / "skills", "notes").parent
        document = {
            # A skill, so that the meta-tools (Use_Tool among them) are served.
            "gateway": {"data_dir": str(tmp_path / "data"), "skill_dirs": [str(skills)]},
            "local_tools": ["tests.support.launches"],
            "auth": auth_section(),
            "roles": ROLES,
            "confirmation": {"ttl_seconds": TTL},
            "store": backend.config_section(),
        }
        self.backend = backend
        self.file = tmp_path / "gateway.yaml"
        self.file.write_text(yaml.safe_dump(document), encoding="utf-8")
        self.data_dir = tmp_path / "data"
        self.log = tmp_path / "launches.log"

    def config(self) -> GatewayConfig:
        """The configuration as the gateway loads it."""
        return load_config(self.file)

    def database(self, store: str) -> Database:
        """A connection to `store`'s database, where the gateway keeps it."""
        return open_database(self.backend.settings, self.data_dir, store)

    def arguments(self, target: str = "moon") -> dict[str, Any]:
        """The arguments of one launch."""
        return {"log": str(self.log), "target": target}

    def runs(self) -> list[str]:
        """Every launch that really ran."""
        return launches(self.log)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`python -m gateway approvals ...` against this configuration's data directory."""
        command = [sys.executable, "-m", "gateway", "approvals", *args, "--config", str(self.file)]
        return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def setup(tmp_path: Path, store_backend: Backend) -> Setup:
    """A fresh configuration, data directory and store."""
    return Setup(tmp_path, store_backend)


def approval_of(result: types.CallToolResult) -> str:
    """The id of the approval a parked call waits for; the result says nothing ran and holds no token."""
    assert result.is_error, text(result)
    assert "Nothing was done" in text(result)
    assert result.meta is not None and CONFIRMATION_META not in result.meta
    approval: str = result.meta[APPROVAL_KEY]["id"]
    assert approval in text(result)
    assert f"{sys.executable} -m gateway approvals approve {approval}" in text(result)
    assert f"/api/v1/approvals/{approval}/approve" in text(result)
    return approval


@asynccontextmanager
async def api(url: str, key: str) -> AsyncIterator[httpx2.AsyncClient]:
    """An HTTP client of the approvals API presenting `key`."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
        yield http


async def decide(url: str, key: str, approval: str, action: str = "approve") -> httpx2.Response:
    """POST /api/v1/approvals/{approval}/{action} with a JSON body."""
    async with api(url, key) as http:
        return await http.post(f"/api/v1/approvals/{approval}/{action}", json={})


async def listed(url: str, key: str) -> list[str]:
    """The ids GET /api/v1/approvals shows this caller."""
    async with api(url, key) as http:
        response = await http.get("/api/v1/approvals")
    assert response.status_code == 200, response.text
    return [entry["id"] for entry in response.json()["approvals"]]


def approval_rows(setup: Setup) -> list[tuple[Any, ...]]:
    """Every row of the approvals database: id and status."""
    db = setup.database("approvals")
    try:
        return db.fetch_all("SELECT id, status FROM approvals ORDER BY created")
    finally:
        db.close()


async def test_a_parked_call_runs_exactly_once_after_a_person_approves_it(setup: Setup) -> None:
    async with (
        http_gateway(setup.config()) as (gateway, url),
        http_client(url, INTERN) as client,
    ):
        first = approval_of(await client.call_tool(TOOL, setup.arguments()))
        again = await client.call_tool(TOOL, setup.arguments())
        assert approval_of(again) == first and "Still waiting" in text(again)
        assert approval_rows(setup) == [(first, "pending")]
        assert setup.runs() == []
        assert (await decide(url, ADMIN, first)).status_code == 200
        ran = await client.call_tool(TOOL, setup.arguments())
        after = await client.call_tool(TOOL, setup.arguments())
        outcomes = [entry.outcome for entry in await gateway.audit.recent(10, tool=TOOL)]
    assert not ran.is_error and text(ran) == "launched at moon"
    assert setup.runs() == ["moon"]
    # The approval was used up: the next identical call waits for a new one.
    assert approval_of(after) != first
    assert "approved" in outcomes and "ok" in outcomes
    # Waiting is a refusal of its own, not a failure of the tool.
    assert outcomes.count("refused:awaiting_approval") == 3 and "error" not in outcomes


async def test_a_declined_call_is_told_so_and_never_runs(setup: Setup) -> None:
    async with (
        http_gateway(setup.config()) as (gateway, url),
        http_client(url, INTERN) as client,
    ):
        approval = approval_of(await client.call_tool(TOOL, setup.arguments()))
        declined = await decide(url, ADMIN, approval, "decline")
        retries = [await client.call_tool(TOOL, setup.arguments()) for _ in range(2)]
        late = await decide(url, ADMIN, approval, "approve")
        outcomes = [entry.outcome for entry in await gateway.audit.recent(10, tool=TOOL)]
    assert declined.status_code == 200 and declined.json()["approval"]["status"] == "declined"
    for retry in retries:
        assert retry.is_error and "declined" in text(retry) and approval in text(retry)
    assert late.status_code == 409 and "already declined" in late.json()["error"]
    assert setup.runs() == []
    assert "declined" in outcomes and "refused:declined" in outcomes


async def test_an_expired_approval_cannot_be_approved_and_the_retry_waits_for_a_new_one(setup: Setup) -> None:
    clock = Clock()
    async with (
        http_gateway(setup.config(), wall_clock=clock) as (_, url),
        http_client(url, INTERN) as client,
    ):
        old = approval_of(await client.call_tool(TOOL, setup.arguments()))
        clock.now += TTL
        late = await decide(url, ADMIN, old)
        retry = await client.call_tool(TOOL, setup.arguments())
        new = approval_of(retry)
        clock.now += TTL - 1
        still = await client.call_tool(TOOL, setup.arguments())
    assert late.status_code == 409 and "expired" in late.json()["error"]
    assert new != old and "Still waiting" not in text(retry)
    assert approval_of(still) == new
    assert setup.runs() == []


async def test_two_approvals_and_concurrent_retries_run_the_call_exactly_once(setup: Setup) -> None:
    answers: list[int] = []
    results: list[types.CallToolResult] = []
    async with http_gateway(setup.config()) as (_, url):

        async def call() -> types.CallToolResult:
            # The stateless era keys the session on the caller: every client here makes the same call.
            async with http_client(url, INTERN, mode="2026-07-28") as client:
                return await client.call_tool(TOOL, setup.arguments())

        approval = approval_of(await call())

        async def approve() -> None:
            answers.append((await decide(url, ADMIN, approval)).status_code)

        async def retry() -> None:
            results.append(await call())

        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(approve)
        cli = setup.cli("approve", approval)
        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(retry)
    assert sorted(answers) == [200, 409, 409]
    assert cli.returncode == 1 and "already approved" in cli.stderr
    assert [result.is_error for result in results].count(False) == 1
    assert setup.runs() == ["moon"]


async def test_an_approval_given_while_the_gateway_is_down_runs_once_after_a_restart(setup: Setup) -> None:
    async def call() -> types.CallToolResult:
        # A new gateway each time, on the same data directory; the stateless era keys the session on the caller.
        async with (
            http_gateway(setup.config()) as (_, url),
            http_client(url, INTERN, mode="2026-07-28") as client,
        ):
            return await client.call_tool(TOOL, setup.arguments())

    approval = approval_of(await call())
    listed_by_cli = setup.cli("list")
    approved = setup.cli("approve", approval)
    after_restart = await call()
    after_another = await call()
    assert approval in listed_by_cli.stdout and TOOL in listed_by_cli.stdout
    assert approved.returncode == 0, approved.stderr
    assert not after_restart.is_error and setup.runs() == ["moon"]
    assert approval_of(after_another) != approval
    assert setup.runs() == ["moon"]


async def test_a_token_the_model_sends_never_runs_the_call(setup: Setup) -> None:
    async with (
        http_gateway(setup.config()) as (gateway, url),
        http_client(url, INTERN) as client,
    ):
        parked = await client.call_tool(TOOL, setup.arguments())
        session = gateway.sessions.live()[0]
        # A token the gateway really issued for exactly this call, as a 2026-era client would get it
        # as its request state: the model must not be able to redeem it through its own channels.
        call = ToolCall(session, gateway.calls.resolve(session, TOOL), setup.arguments())
        issued = await gateway.confirmations.issue(binding_of(call), time.time(), TTL)
        by_argument = await client.call_tool(TOOL, {**setup.arguments(), ARGUMENT: issued})
        forged = await client.call_tool(TOOL, {**setup.arguments(), ARGUMENT: "forged-0123456789"})
        meta = cast(types.RequestParamsMeta, {CONFIRMATION_META: issued})
        by_meta = await client.call_tool(TOOL, setup.arguments(), meta=meta)
        use_tool = {"name": TOOL, "arguments": {**setup.arguments(), ARGUMENT: issued}}
        through_use_tool = await client.call_tool("Use_Tool", use_tool)
        approval = approval_of(parked)
    assert setup.runs() == []
    for retry in (by_argument, forged, by_meta, through_use_tool):
        assert approval_of(retry) == approval
    assert approval_rows(setup) == [(approval, "pending")]


async def test_the_cli_lists_approves_and_declines_parked_calls(setup: Setup) -> None:
    async with http_gateway(setup.config()) as (_, url), http_client(url, INTERN) as client:
        first = approval_of(await client.call_tool(TOOL, setup.arguments("moon")))
        second = approval_of(await client.call_tool(TOOL, setup.arguments("mars")))
        listing = setup.cli("list")
        approved = setup.cli("approve", first)
        declined = setup.cli("decline", second)
        again = setup.cli("decline", first)
        unknown = setup.cli("approve", "ap-000000000000")
        missing = setup.cli("approve")
        emptied = setup.cli("list")
        to_moon = await client.call_tool(TOOL, setup.arguments("moon"))
        to_mars = await client.call_tool(TOOL, setup.arguments("mars"))
    assert listing.returncode == 0
    assert first in listing.stdout and second in listing.stdout and '"mars"' in listing.stdout
    assert approved.returncode == 0 and f"{first} approved" in approved.stdout
    assert declined.returncode == 0 and f"{second} declined" in declined.stdout
    assert again.returncode == 1 and "already approved" in again.stderr
    assert unknown.returncode == 1 and "No approval ap-000000000000" in unknown.stderr
    assert missing.returncode == 2
    assert emptied.returncode == 0 and first not in emptied.stdout and second not in emptied.stdout
    assert not to_moon.is_error and to_mars.is_error and "declined" in text(to_mars)
    assert setup.runs() == ["moon"]


async def test_who_may_see_and_decide_an_approval_follows_the_role(setup: Setup) -> None:
    async with http_gateway(setup.config()) as (_, url), http_client(url, INTERN) as intern:
        interns = approval_of(await intern.call_tool(TOOL, setup.arguments("intern")))
        async with http_client(url, ANALYST) as analyst:
            analysts = approval_of(await analyst.call_tool(TOOL, setup.arguments("analyst")))
            seen = {key: await listed(url, key) for key in (ADMIN, ANALYST, INTERN)}
            # An intern's role leaves approval to admins; another caller's approval is as good as unknown.
            own_refused = await decide(url, INTERN, interns)
            hidden = await decide(url, ANALYST, interns)
            unknown = await decide(url, ANALYST, "ap-000000000000")
            hidden_decline = await decide(url, INTERN, analysts, "decline")
            # The analyst's role says `approve: own`.
            own_approved = await decide(url, ANALYST, analysts)
            ran = await analyst.call_tool(TOOL, setup.arguments("analyst"))
        by_admin = await decide(url, ADMIN, interns)
        intern_ran = await intern.call_tool(TOOL, setup.arguments("intern"))
    assert seen[ADMIN] == [interns, analysts]
    assert seen[ANALYST] == [analysts]
    assert seen[INTERN] == [interns]
    assert own_refused.status_code == 403
    assert hidden.status_code == unknown.status_code == hidden_decline.status_code == 404
    assert hidden.json() == unknown.json() == hidden_decline.json()
    assert own_approved.status_code == 200 and own_approved.json()["approval"]["decided_by"] == "api:api_key:ann"
    assert by_admin.status_code == 200
    assert not ran.is_error and not intern_ran.is_error
    assert setup.runs() == ["analyst", "intern"]


async def test_the_approvals_api_has_the_same_guards_as_mcp(setup: Setup) -> None:
    async with http_gateway(setup.config()) as (_, url):
        async with http_client(url, INTERN) as client:
            approval = approval_of(await client.call_tool(TOOL, setup.arguments()))
        async with httpx2.AsyncClient(base_url=url, timeout=30) as http:
            anonymous = await http.get("/api/v1/approvals")
        async with api(url, ADMIN) as http:
            path = f"/api/v1/approvals/{approval}/approve"
            foreign_origin = await http.post(path, json={}, headers={"Origin": "https://evil.example"})
            foreign_host = await http.post(path, json={}, headers={"Host": "evil.example"})
            not_json = await http.post(path, content=b"approve=1", headers={"Content-Type": "text/plain"})
            still_pending = await http.get("/api/v1/approvals")
    assert anonymous.status_code == 401
    assert foreign_origin.status_code == 403
    assert foreign_host.status_code == 421
    assert not_json.status_code == 400
    assert [entry["id"] for entry in still_pending.json()["approvals"]] == [approval]
    assert setup.runs() == []


def every_value(setup: Setup) -> Iterator[str]:
    """Every value of every row of every table the stores wrote (the SQLite files under the data
    directory, or the test's PostgreSQL schema), as text."""
    if setup.backend.kind == "sqlite":
        for path in sorted(setup.data_dir.rglob("*.db")):
            with closing(sqlite3.connect(path)) as db:
                tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                for table in tables:
                    for row in db.execute(f'SELECT * FROM "{table}"'):
                        yield from (str(value) for value in row)
        return
    db = setup.database("audit")
    try:
        query = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        for (table,) in db.fetch_all(query):
            for row in db.fetch_all(f'SELECT * FROM "{table}"'):
                yield from (str(value) for value in row)
    finally:
        db.close()


async def test_no_token_is_kept_in_clear_in_any_database_or_the_log(
    setup: Setup, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)
    tokens: list[str] = ["sent-by-the-model-0123456789"]

    async def person(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    async with http_gateway(setup.config()) as (gateway, url):
        issue = gateway.confirmations.issue

        # A spy on the real store: the only way to learn the request-state tokens a client holds.
        async def recording(*args: Any) -> str:
            token = await issue(*args)
            tokens.append(token)
            return token

        monkeypatch.setattr(gateway.confirmations, "issue", recording)
        async with http_client(url, INTERN, mode="2026-07-28", elicitation_callback=person) as client:
            asked = await client.call_tool(TOOL, setup.arguments("asked"))
        async with http_client(url, INTERN) as client:
            for target in ("a", "b", "c"):
                result = await client.call_tool(TOOL, setup.arguments(target))
                carried = (result.meta or {}).get(CONFIRMATION_META)
                if isinstance(carried, dict):
                    tokens.append(carried["token"])
            await client.call_tool(TOOL, {**setup.arguments("a"), ARGUMENT: tokens[0]})
            await client.call_tool(
                "Use_Tool", {"name": TOOL, "arguments": {**setup.arguments("b"), ARGUMENT: tokens[0]}}
            )
        stored = list(every_value(setup))
    assert not asked.is_error
    assert len(tokens) >= 2
    assert stored
    leaks = [(token, value) for token in tokens for value in stored if token in value]
    assert leaks == []
    # The test's own client logs what it sends at DEBUG; the gateway's log is everything else.
    gateway_log = [record.getMessage() for record in caplog.records if not record.name.startswith(CLIENT_LOGGERS)]
    assert gateway_log
    assert [token for token in tokens for line in gateway_log if token in line] == []


async def test_two_gateways_sharing_the_store_run_an_approved_call_once_between_them(setup: Setup) -> None:
    async with http_gateway(setup.config()) as (_, first), http_gateway(setup.config()) as (_, second):

        async def call(url: str) -> types.CallToolResult:
            # The stateless era keys the session on the caller, so both gateways bind the same call.
            async with http_client(url, INTERN, mode="2026-07-28") as client:
                return await client.call_tool(TOOL, setup.arguments())

        approval = approval_of(await call(first))
        assert approval_of(await call(second)) == approval
        approved = await decide(second, ADMIN, approval)
        again = await decide(first, ADMIN, approval)
        results: list[types.CallToolResult] = []

        async def retry(url: str) -> None:
            results.append(await call(url))

        async with anyio.create_task_group() as group:
            for url in (first, second, first, second):
                group.start_soon(retry, url)
    assert approved.status_code == 200 and again.status_code == 409
    assert [result.is_error for result in results].count(False) == 1
    assert setup.runs() == ["moon"]


async def test_listing_and_deciding_approvals_while_postgresql_is_down_answer_503_saying_the_store_is_out(
    tmp_path: Path,
) -> None:
    with postgres_server() as server:
        setup = Setup(tmp_path, Backend("postgresql", StoreSettings(url=server.url), tmp_path / "data"))
        async with http_gateway(setup.config()) as (_, url), api(url, ADMIN) as http:
            server.stop()
            # The pool waits out its connect timeout before it gives up on the database.
            listing = await http.get("/api/v1/approvals", timeout=60)
            deciding = await http.post("/api/v1/approvals/ap-0123456789ab/approve", json={}, timeout=60)
    for answer in (listing, deciding):
        assert answer.status_code == 503, answer.text
        assert "store cannot be read or written now" in answer.json()["error"]
