"""Confirmation of high-risk calls through a real gateway over HTTP: elicitation (a server request in
the handshake era, an input-required result in the stateless era), pending approvals a person
decides otherwise, and approvals that survive a restart and work exactly once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext

from gateway.config.model import GatewayConfig
from gateway.pipeline.confirmation import APPROVAL_KEY
from tests.support.access import KEYS, ROLES, access_config, auth_section, http_client, toy_entry
from tests.support.harness import http_gateway, in_memory
from tests.support.skills import text, write_skill
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio

ADMIN = KEYS["admin"]
# The admin role decides approvals through the HTTP API.
APPROVING_ROLES = {**ROLES, "admin": {**ROLES["admin"], "admin": True}}


class Clock:
    """A hand-moved wall clock for the gateway's approvals, so expiry is tested without waiting."""

    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        return self.now


class Person:
    """The person behind a client: answers every confirmation question the same way, and counts them."""

    def __init__(self, approve: bool) -> None:
        self.approve = approve
        self.questions: list[str] = []

    async def __call__(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.questions.append(params.message)
        if self.approve:
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="decline")


def _config(tmp_path: Path, loop_repeat_limit: int = 20, **confirmation: Any) -> GatewayConfig:
    # These tests repeat one call on purpose; the loop detector's default would stop the repetition.
    # A skill, so that the meta-tools (Use_Tool among them) are served.
    skills = write_skill(tmp_path / "skills", "notes").parent
    return access_config(
        tmp_path,
        {"toy": toy_entry()},
        roles=APPROVING_ROLES,
        confirmation=confirmation or None,
        loop_repeat_limit=loop_repeat_limit,
        skill_dirs=[str(skills)],
    )


def _approval(result: types.CallToolResult) -> str:
    """The id of the approval a parked call waits for; nothing ran."""
    assert result.is_error
    assert "Nothing was done" in text(result)
    assert result.meta is not None
    approval: str = result.meta[APPROVAL_KEY]["id"]
    assert approval in text(result)
    return approval


async def _decide(url: str, approval: str, action: str = "approve") -> httpx2.Response:
    """A person (the admin) decides a parked call through the HTTP API."""
    async with httpx2.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30) as http:
        return await http.post(f"/api/v1/approvals/{approval}/{action}", json={})


async def _count(client: Client, url: str) -> str:
    """Run the increment once a person approved it; its answer is how many increments ran."""
    approval = _approval(await client.call_tool("toy__increment", {}))
    assert (await _decide(url, approval)).status_code == 200
    return text(await client.call_tool("toy__increment", {}))


async def test_an_approving_person_lets_a_high_risk_call_run_over_http(tmp_path: Path) -> None:
    person = Person(approve=True)
    async with (
        http_gateway(_config(tmp_path), transports=in_memory({"toy": toy()})) as (_, url),
        http_client(url, ADMIN, elicitation_callback=person) as client,
    ):
        with anyio.fail_after(10):
            result = await client.call_tool("toy__increment", {})
            low = await client.call_tool("toy__echo", {"text": "no question"})
    assert not result.is_error
    assert text(result) == "1"
    assert text(low) == "no question"
    (question,) = person.questions
    assert "toy__increment" in question and "high-risk" in question


async def test_a_declining_person_stops_the_call_before_it_runs(tmp_path: Path) -> None:
    person = Person(approve=False)
    async with http_gateway(_config(tmp_path), transports=in_memory({"toy": toy()})) as (gateway, url):
        async with http_client(url, ADMIN, elicitation_callback=person) as client:
            refused = await client.call_tool("toy__increment", {})
        async with http_client(url, ADMIN) as client:
            assert await _count(client, url) == "1"
        outcomes = [entry.outcome for entry in await gateway.audit.recent(10, tool="toy__increment")]
    assert refused.is_error
    assert "declined" in text(refused)
    assert len(person.questions) == 1
    assert any("declined" in outcome or "refused" in outcome for outcome in outcomes), outcomes


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_without_elicitation_an_approval_runs_exactly_that_call_once(tmp_path: Path, mode: str) -> None:
    async with (
        http_gateway(_config(tmp_path), transports=in_memory({"toy": toy()})) as (_, url),
        http_client(url, ADMIN, mode=mode) as client,
    ):

        async def approved(name: str, arguments: dict[str, Any]) -> None:
            approval = _approval(await client.call_tool(name, arguments))
            assert (await _decide(url, approval)).status_code == 200

        await approved("toy__increment", {})
        ran = await client.call_tool("toy__increment", {})
        replay = await client.call_tool("toy__increment", {})
        await approved("toy__fail", {"message": "a"})
        other_arguments = await client.call_tool("toy__fail", {"message": "b"})
        other_tool = await client.call_tool("toy__increment", {})
        through_use_tool = await client.call_tool("Use_Tool", {"name": "toy__fail", "arguments": {"message": "a"}})
        again = await client.call_tool("toy__fail", {"message": "a"})
        assert (await _decide(url, _approval(other_tool), "decline")).status_code == 200
        # A decline stands for that call, through Use_Tool too, until it expires.
        declined = await client.call_tool("Use_Tool", {"name": "toy__increment", "arguments": {}})
    assert text(ran) == "1"
    # Each approval runs its call once: the same call again waits for a new approval.
    assert "Waiting for approval" in text(replay)
    # An approval is for its exact arguments and tool only.
    assert "Waiting for approval" in text(other_arguments)
    assert "Still waiting for approval" in text(other_tool)
    # The approved call ran (the toy's `fail` fails with its message), through Use_Tool as well.
    assert through_use_tool.is_error and "Nothing was done" not in text(through_use_tool)
    assert "a" in text(through_use_tool)
    assert "Waiting for approval" in text(again)
    assert declined.is_error and "declined" in text(declined)


async def test_an_approval_runs_nothing_for_another_caller(tmp_path: Path) -> None:
    async with http_gateway(_config(tmp_path), transports=in_memory({"toy": toy()})) as (_, url):
        async with http_client(url, ADMIN) as owner:
            approval = _approval(await owner.call_tool("toy__increment", {}))
        assert (await _decide(url, approval)).status_code == 200
        async with http_client(url, KEYS["analyst"]) as other:
            # The analyst may not even see a high-risk tool: an approval does not change that.
            hidden = await other.call_tool("Use_Tool", {"name": "toy__increment", "arguments": {}})
        async with http_client(url, ADMIN, mode="2026-07-28") as stranger:
            # The same caller in another session (the stateless era's) is another call, too.
            elsewhere = await stranger.call_tool("toy__increment", {})
        async with http_client(url, ADMIN) as owner:
            assert await _count(owner, url) == "1"
    assert hidden.is_error and "no tool named" in text(hidden)
    assert "Waiting for approval" in text(elsewhere)


async def test_an_expired_approval_is_refused_and_replaced(tmp_path: Path) -> None:
    clock = Clock()
    async with (
        http_gateway(_config(tmp_path, ttl_seconds=60), transports=in_memory({"toy": toy()}), wall_clock=clock) as (
            _,
            url,
        ),
        http_client(url, ADMIN, mode="2026-07-28") as client,
    ):
        approval = _approval(await client.call_tool("toy__increment", {}))
        clock.now += 60
        late = await _decide(url, approval)
        retry = await client.call_tool("toy__increment", {})
    assert late.status_code == 409 and "expired" in late.json()["error"]
    assert _approval(retry) != approval


async def test_an_approval_given_before_a_restart_works_once_after_it(tmp_path: Path) -> None:
    config = _config(tmp_path)
    upstream = toy()

    async def call(approve: str | None = None) -> types.CallToolResult:
        # A fresh gateway each time, on the same data_dir: the stateless era keys state on the caller.
        async with (
            http_gateway(config, transports=in_memory({"toy": upstream})) as (_, url),
            http_client(url, ADMIN, mode="2026-07-28") as client,
        ):
            if approve is not None:
                assert (await _decide(url, approve)).status_code == 200
                return types.CallToolResult(content=[])
            return await client.call_tool("toy__increment", arguments={})

    approval = _approval(await call())
    await call(approve=approval)
    after_restart = await call()
    after_another = await call()
    assert not after_restart.is_error and text(after_restart) == "1"
    assert _approval(after_another) != approval


async def test_three_confirmed_calls_in_a_row_are_not_taken_for_a_loop(tmp_path: Path) -> None:
    async with (
        http_gateway(_config(tmp_path, loop_repeat_limit=5), transports=in_memory({"toy": toy()})) as (_, url),
        http_client(url, ADMIN) as client,
    ):
        counts = [await _count(client, url) for _ in range(3)]
    assert counts == ["1", "2", "3"]


@pytest.mark.parametrize("approve", [True, False])
async def test_a_stateless_era_client_that_can_elicit_is_asked_and_its_answer_decides(
    tmp_path: Path, approve: bool
) -> None:
    person = Person(approve=approve)
    async with http_gateway(_config(tmp_path), transports=in_memory({"toy": toy()})) as (_, url):
        async with http_client(url, ADMIN, mode="2026-07-28", elicitation_callback=person) as client:
            with anyio.fail_after(10):
                result = await client.call_tool("toy__increment", {})
        async with http_client(url, ADMIN, mode="2026-07-28") as client:
            with anyio.fail_after(10):
                count = await _count(client, url)
    (question,) = person.questions
    assert "toy__increment" in question
    if approve:
        assert text(result) == "1"
        assert count == "2"
    else:
        assert result.is_error
        assert "declined" in text(result)
        assert count == "1"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_anonymous_approval_runs_only_within_the_anonymous_session_that_asked(
    tmp_path: Path, mode: str
) -> None:
    # A stateless-era anonymous request keeps nothing: the approval it parked belongs to it alone.
    config = access_config(
        tmp_path,
        {"toy": toy_entry()},
        roles=APPROVING_ROLES,
        auth=auth_section(anonymous_role="admin"),
        skill_dirs=[str(write_skill(tmp_path / "skills", "notes").parent)],
    )
    async with (
        http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url),
        http_client(url, None, mode=mode) as client,
        http_client(url, None, mode=mode) as other,
    ):
        approval = _approval(await client.call_tool("toy__increment", {}))
        assert (await _decide(url, approval)).status_code == 200
        stolen = await other.call_tool("toy__increment", {})
        own = await client.call_tool("toy__increment", {})
    assert _approval(stolen) != approval
    if mode == "legacy":
        assert text(own) == "1"
    else:
        assert _approval(own) != approval


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_person_is_shown_the_same_cut_preview_of_long_arguments_in_both_eras(
    tmp_path: Path, mode: str
) -> None:
    person = Person(approve=False)
    message = "é" + "x" * 3000
    async with (
        http_gateway(_config(tmp_path), transports=in_memory({"toy": toy()})) as (_, url),
        http_client(url, ADMIN, mode=mode, elicitation_callback=person) as client,
    ):
        with anyio.fail_after(10):
            await client.call_tool("toy__fail", {"message": message})
    (question,) = person.questions
    shown = json.dumps({"message": message}, ensure_ascii=False)[:2000] + "... (truncated)"
    assert question.endswith(shown)
