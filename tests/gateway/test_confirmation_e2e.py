"""Confirmation of high-risk calls through a real gateway over HTTP: elicitation (a server request in
the handshake era, an input-required result in the stateless era), one-time tokens otherwise, and
tokens that survive a restart exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext

from gateway.config import GatewayConfig
from gateway.confirmation import ARGUMENT, META_KEY
from tests.support.access import KEYS, access_config, auth_section, http_client, toy_entry
from tests.support.harness import http_gateway, in_memory
from tests.support.skills import text, write_skill
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio

ADMIN = KEYS["admin"]


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
        confirmation=confirmation or None,
        loop_repeat_limit=loop_repeat_limit,
        skill_dirs=[str(skills)],
    )


def _token(result: types.CallToolResult) -> str:
    assert result.is_error
    assert "Nothing was done" in text(result)
    assert result.meta is not None
    token: str = result.meta[META_KEY]["token"]
    assert f'"{ARGUMENT}": "{token}"' in text(result)
    return token


async def _count(client: Client) -> str:
    """Run the approved increment through a fresh token; its answer is how many increments ran."""
    token = _token(await client.call_tool("toy__increment", {}))
    return text(await client.call_tool("toy__increment", {ARGUMENT: token}))


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
            assert await _count(client) == "1"
        outcomes = [entry.outcome for entry in await gateway.audit.recent(10, tool="toy__increment")]
    assert refused.is_error
    assert "declined" in text(refused)
    assert len(person.questions) == 1
    assert any("declined" in outcome or "refused" in outcome for outcome in outcomes), outcomes


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_without_elicitation_a_token_confirms_exactly_that_call_once(tmp_path: Path, mode: str) -> None:
    async with (
        http_gateway(_config(tmp_path), transports=in_memory({"toy": toy()})) as (_, url),
        http_client(url, ADMIN, mode=mode) as client,
    ):

        async def ask(name: str, arguments: dict[str, Any]) -> str:
            return _token(await client.call_tool(name, arguments))

        token = await ask("toy__increment", {})
        ran = await client.call_tool("toy__increment", {ARGUMENT: token})
        replay = await client.call_tool("toy__increment", {ARGUMENT: token})
        # An open map in the protocol; the checker does not know TypedDict extra items yet.
        meta = cast(types.RequestParamsMeta, {META_KEY: await ask("toy__increment", {})})
        by_meta = await client.call_tool("toy__increment", {}, meta=meta)
        use_tool = {"name": "toy__increment", "arguments": {ARGUMENT: await ask("toy__increment", {})}}
        through_use_tool = await client.call_tool("Use_Tool", use_tool)
        token = await ask("toy__fail", {"message": "a"})
        other_arguments = await client.call_tool("toy__fail", {"message": "b", ARGUMENT: token})
        token = await ask("toy__increment", {})
        other_tool = await client.call_tool("toy__fail", {"message": "a", ARGUMENT: token})
        count = await _count(client)
    assert text(ran) == "1"
    assert replay.is_error and "already used" in text(replay)
    assert text(by_meta) == "2"
    assert text(through_use_tool) == "3"
    assert other_arguments.is_error and "different arguments" in text(other_arguments)
    assert other_tool.is_error and "another tool" in text(other_tool)
    assert count == "4"


async def test_a_token_presented_by_another_caller_confirms_nothing(tmp_path: Path) -> None:
    async with http_gateway(_config(tmp_path), transports=in_memory({"toy": toy()})) as (_, url):
        async with http_client(url, ADMIN) as owner:
            token = _token(await owner.call_tool("toy__increment", {}))
        async with http_client(url, KEYS["analyst"]) as other:
            # The analyst may not even see a high-risk tool: the token does not change that.
            stolen = await other.call_tool("Use_Tool", {"name": "toy__increment", "arguments": {ARGUMENT: token}})
        async with http_client(url, ADMIN) as owner:
            assert await _count(owner) == "1"
    assert stolen.is_error and "no tool named" in text(stolen)


async def test_an_expired_token_is_refused(tmp_path: Path) -> None:
    async with (
        http_gateway(_config(tmp_path, ttl_seconds=0.2), transports=in_memory({"toy": toy()})) as (_, url),
        http_client(url, ADMIN, mode="2026-07-28") as client,
    ):
        token = _token(await client.call_tool("toy__increment", {}))
        # The token's lifetime is wall-clock time, so the test lets that much time pass.
        await anyio.sleep(0.3)
        late = await client.call_tool("toy__increment", {ARGUMENT: token})
    assert late.is_error and "expired" in text(late)


async def test_a_token_issued_before_a_restart_works_once_after_it(tmp_path: Path) -> None:
    config = _config(tmp_path)

    async def call(arguments: dict[str, Any]) -> types.CallToolResult:
        # A fresh gateway each time, on the same data_dir: the stateless era keys state on the caller.
        async with (
            http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url),
            http_client(url, ADMIN, mode="2026-07-28") as client,
        ):
            return await client.call_tool("toy__increment", arguments)

    token = _token(await call({}))
    after_restart = await call({ARGUMENT: token})
    after_another = await call({ARGUMENT: token})
    assert not after_restart.is_error and text(after_restart) == "1"
    assert after_another.is_error and "already used" in text(after_another)


async def test_three_confirmed_calls_in_a_row_are_not_taken_for_a_loop(tmp_path: Path) -> None:
    async with (
        http_gateway(_config(tmp_path, loop_repeat_limit=5), transports=in_memory({"toy": toy()})) as (_, url),
        http_client(url, ADMIN) as client,
    ):
        counts = [await _count(client) for _ in range(3)]
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
                count = await _count(client)
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
async def test_an_anonymous_token_confirms_only_within_the_anonymous_session_that_asked(
    tmp_path: Path, mode: str
) -> None:
    # A stateless-era anonymous request keeps nothing: the token it was given belongs to it alone.
    config = access_config(
        tmp_path,
        {"toy": toy_entry()},
        auth=auth_section(anonymous_role="admin"),
        skill_dirs=[str(write_skill(tmp_path / "skills", "notes").parent)],
    )
    async with (
        http_gateway(config, transports=in_memory({"toy": toy()})) as (_, url),
        http_client(url, None, mode=mode) as client,
        http_client(url, None, mode=mode) as other,
    ):
        token = _token(await client.call_tool("toy__increment", {}))
        stolen = await other.call_tool("toy__increment", {ARGUMENT: token})
        own = await client.call_tool("toy__increment", {ARGUMENT: token})
    assert stolen.is_error and "issued to you" in text(stolen)
    if mode == "legacy":
        assert text(own) == "1"
    else:
        assert own.is_error and "issued to you" in text(own)
