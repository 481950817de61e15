"""`/metrics` over real HTTP: calls, refusals, upstream states, sessions, skills and approvals as a
Prometheus scraper reads them, and who may read them."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx2
import pytest

from gateway.upstreams.connection import State
from tests.support.access import KEYS, ROLES, access_config, http_client, toy_entry
from tests.support.harness import http_gateway, in_memory, make_config, placeholder, toy_stdio
from tests.support.metrics import Samples, growth, parse, value
from tests.support.skills import skill_config
from tests.support.toy import build_server as toy
from tests.support.waiting import containing, logged

pytestmark = pytest.mark.anyio

FAMILIES = {
    "gateway_tool_calls",
    "gateway_tool_call_duration_seconds",
    "gateway_refusals",
    "gateway_upstream_state",
    "gateway_upstream_restarts",
    "gateway_sandbox_runs",
    "gateway_sandbox_run_duration_seconds",
    "gateway_sessions",
    "gateway_skill_loads",
    "gateway_skill_evictions",
    "gateway_approvals_pending",
}
ADMIN_ROLES: dict[str, Any] = {**ROLES, "admin": {**ROLES["admin"], "admin": True}}


async def scrape(url: str, key: str | None = None) -> tuple[set[str], Samples]:
    """GET /metrics and parse it: the family names and every sample's value."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient() as http:
        response = await http.get(f"{url}/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


async def test_every_family_is_exposed_and_calls_count_exactly_by_tool_server_and_outcome(tmp_path: Path) -> None:
    config = make_config(tmp_path, placeholder(["toy"]))
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url), http_client(url) as client:
        _, before = await scrape(url)
        for word in ("a", "b", "c"):
            assert not (await client.call_tool("toy__echo", {"text": word})).is_error
        assert (await client.call_tool("toy__fail", {"message": "no"})).is_error
        assert (await client.call_tool("toy__add", {"a": "one", "b": 2})).is_error
        families, after = await scrape(url)
        assert value(after, "gateway_sessions", transport="http") == 1

    assert families >= FAMILIES
    expected = {("toy__echo", "ok"): 3, ("toy__fail", "error"): 1, ("toy__add", "invalid_arguments"): 1}
    for (tool, outcome), count in expected.items():
        calls = {"tool": tool, "server": "toy", "outcome": outcome}
        assert growth(before, after, "gateway_tool_calls_total", **calls) == count
        timed = {"tool": tool, "server": "toy"}
        assert growth(before, after, "gateway_tool_call_duration_seconds_count", **timed) == count
    assert value(after, "gateway_upstream_state", server="toy", state="ready") == 1
    assert value(after, "gateway_upstream_state", server="toy", state="failed") == 0


async def test_refusals_are_counted_by_reason_and_a_parked_call_shows_as_a_pending_approval(tmp_path: Path) -> None:
    config = access_config(tmp_path, {"toy": toy_entry()}, roles=ADMIN_ROLES, loop_repeat_limit=2)
    transports = in_memory({"toy": toy()})
    async with http_gateway(config, transports=transports) as (_, url), http_client(url, KEYS["admin"]) as client:
        # The admin's client cannot elicit: its high-risk call waits for a person.
        assert (await client.call_tool("toy__increment", {})).is_error
        # The same call again and again: loop detection refuses the repeats past the limit.
        results = [await client.call_tool("toy__echo", {"text": "again"}) for _ in range(4)]
        refused = sum(result.is_error for result in results)
        _, samples = await scrape(url, KEYS["admin"])

    assert 1 <= refused < 4
    assert value(samples, "gateway_refusals_total", reason="loop") == refused
    assert value(samples, "gateway_tool_calls_total", tool="toy__echo", server="toy", outcome="refused") == refused
    assert value(samples, "gateway_tool_calls_total", tool="toy__echo", server="toy", outcome="ok") == 4 - refused
    assert value(samples, "gateway_approvals_pending") == 1


async def test_the_state_gauge_follows_an_upstream_that_was_killed(tmp_path: Path) -> None:
    # A long backoff holds the crashed server in `reconnecting` while the test looks.
    config = make_config(tmp_path, {"toy": toy_stdio()}, restart_backoff_initial=60, restart_backoff_max=60)
    async with http_gateway(config) as (gateway, url), http_client(url) as client:
        _, before = await scrape(url)
        with logged(level=logging.WARNING) as log:
            assert (await client.call_tool("toy__crash", {})).is_error
            # Said once the old process is gone, as the restart is counted.
            await log.until(containing("upstream toy: connection closed"), "the word that the server went")
        assert (gateway.servers.statuses()[0].state, gateway.servers.statuses()[0].restarts) == (State.RECONNECTING, 1)
        _, after = await scrape(url)

    assert value(before, "gateway_upstream_state", server="toy", state="ready") == 1
    assert value(after, "gateway_upstream_state", server="toy", state="ready") == 0
    assert value(after, "gateway_upstream_state", server="toy", state="reconnecting") == 1
    assert value(after, "gateway_upstream_restarts_total", server="toy") == 1


async def test_skill_loads_and_the_skills_they_push_out_are_counted(tmp_path: Path) -> None:
    config = skill_config(tmp_path, skill_capacity=1)
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url), http_client(url) as client:
        for name in ("adding", "echoing", "echoing"):
            assert not (await client.call_tool("Load_Skill", {"name": name})).is_error
        _, samples = await scrape(url)

    assert value(samples, "gateway_skill_loads_total", skill="adding") == 1
    assert value(samples, "gateway_skill_loads_total", skill="echoing") == 1
    assert value(samples, "gateway_skill_evictions_total", skill="adding") == 1
    assert value(samples, "gateway_tool_calls_total", tool="Load_Skill", server="gateway", outcome="ok") == 3


async def test_metrics_are_shown_to_admins_challenged_without_a_key_and_refused_to_other_roles(tmp_path: Path) -> None:
    config = access_config(tmp_path, {"toy": toy_entry()}, roles=ADMIN_ROLES)
    callers = {"nobody": None, "bad key": "no-such-key-0123456789", "analyst": KEYS["analyst"], "admin": KEYS["admin"]}
    async with http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url), httpx2.AsyncClient() as http:
        answers = {}
        for caller, key in callers.items():
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            response = await http.get(f"{url}/metrics", headers=headers)
            answers[caller] = (response.status_code, response.headers.get("www-authenticate", "")[:6], response.text)

    assert answers["nobody"][:2] == answers["bad key"][:2] == (401, "Bearer")
    assert answers["analyst"][0] == 403 and "gateway_" not in answers["analyst"][2]
    assert answers["admin"][0] == 200 and "gateway_tool_calls" in answers["admin"][2]


@pytest.mark.parametrize(("host", "status"), [("127.0.0.1", 200), ("0.0.0.0", 403)], ids=["loopback", "all"])
async def test_without_authentication_metrics_are_shown_only_on_loopback(
    tmp_path: Path, host: str, status: int
) -> None:
    config = make_config(tmp_path, placeholder(["toy"]))
    transports = in_memory({"toy": toy()})
    async with http_gateway(config, transports=transports, host=host) as (_, url), httpx2.AsyncClient() as http:
        response = await http.get(f"{url}/metrics")
    assert response.status_code == status
