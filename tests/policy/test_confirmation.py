"""Confirmation of risky calls: elicitation, one-time tokens in SQLite that survive a restart, and refusals."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from gateway.confirmation import (
    ARGUMENT,
    ELICIT_NOTE,
    META_KEY,
    TOKEN_NOTE,
    Binding,
    ConfirmationInvalidError,
    ConfirmationSettings,
    ConfirmationStore,
    ConfirmRiskyCalls,
    extract_token,
)
from gateway.errors import ConfigError
from gateway.pipeline import Pipeline, ToolCall
from gateway.policy import derive_risk
from gateway.session import SessionContext
from gateway.tools import Risk, ToolRecord

TTL = 300.0
DROP = ToolRecord(
    name="sqlite__execute",
    source="sqlite",
    original_name="execute",
    description="Runs one SQL statement that changes the database.",
    annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True),
)
QUERY = ToolRecord(
    name="sqlite__query",
    source="sqlite",
    original_name="query",
    annotations=types.ToolAnnotations(read_only_hint=True),
)
SQL = {"sql": "DROP TABLE users"}


class Clock:
    """A hand-moved wall clock: the step takes its clock as an argument so expiry is tested without waiting."""

    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        return self.now


class Runs:
    """The end of the pipeline: counts the calls that really ran."""

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []

    async def __call__(self, call: ToolCall) -> types.CallToolResult:
        self.calls.append(call)
        return types.CallToolResult(content=[types.TextContent(text="done")])


def session(session_id: str = "s1", caller: str = "alice") -> SessionContext:
    return SessionContext(session_id, caller, "memory", created_at=0.0, last_seen=0.0)


def binding(caller: str = "alice", session_id: str = "s1", tool: str = DROP.name, **arguments: Any) -> Binding:
    return Binding.of(ToolCall(session(session_id, caller), DROP.renamed(tool), arguments or dict(SQL)))


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "confirmations.db"


@pytest.fixture
def store(db: Path) -> Iterator[ConfirmationStore]:
    opened = ConfirmationStore(db)
    yield opened
    opened.close()


def test_the_token_argument_is_taken_out_of_the_arguments() -> None:
    assert extract_token({"sql": "x", ARGUMENT: "tok"}) == ({"sql": "x"}, "tok")
    assert extract_token({"sql": "x"}) == ({"sql": "x"}, None)
    assert extract_token({ARGUMENT: 12}) == ({}, "12")


@pytest.mark.anyio
async def test_a_token_issued_before_a_restart_works_once_after_it(db: Path) -> None:
    now = 1000.0
    first = ConfirmationStore(db)
    token = await first.issue(binding(), now, TTL)
    first.close()

    second = ConfirmationStore(db)
    await second.redeem(token, binding(), now + 10)
    with pytest.raises(ConfirmationInvalidError, match="already used"):
        await second.redeem(token, binding(), now + 11)
    second.close()

    third = ConfirmationStore(db)
    with pytest.raises(ConfirmationInvalidError, match="already used"):
        await third.redeem(token, binding(), now + 12)
    third.close()


@pytest.mark.anyio
async def test_an_expired_token_is_refused(store: ConfirmationStore) -> None:
    token = await store.issue(binding(), 1000.0, TTL)
    with pytest.raises(ConfirmationInvalidError, match="has expired"):
        await store.redeem(token, binding(), 1000.0 + TTL)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("other", "why"),
    [
        (binding(caller="mallory"), "not a confirmation this gateway issued to you"),
        (binding(session_id="s2"), "issued in another session"),
        (binding(tool="files__delete"), re.escape("issued for another tool ('sqlite__execute')")),
        (binding(sql="DROP TABLE orders"), "issued for different arguments"),
    ],
)
async def test_a_token_confirms_only_its_own_caller_session_tool_and_arguments(
    store: ConfirmationStore, other: Binding, why: str
) -> None:
    token = await store.issue(binding(), 1000.0, TTL)
    with pytest.raises(ConfirmationInvalidError, match=why):
        await store.redeem(token, other, 1001.0)
    await store.redeem(token, binding(), 1002.0)


@pytest.mark.anyio
async def test_an_unknown_token_is_refused(store: ConfirmationStore) -> None:
    with pytest.raises(ConfirmationInvalidError, match="not a confirmation this gateway issued"):
        await store.redeem("made-up", binding(), 1000.0)


@pytest.mark.anyio
async def test_the_database_keeps_only_a_hash_of_each_token(store: ConfirmationStore, db: Path) -> None:
    token = await store.issue(binding(), 1000.0, TTL)
    with closing(sqlite3.connect(db)) as reader:
        stored = [row[0] for row in reader.execute("SELECT token_hash FROM confirmations")]
    assert len(stored) == 1 and token not in stored[0]


@pytest.mark.anyio
async def test_a_risky_call_without_elicitation_returns_a_token_then_runs_once_with_it(
    store: ConfirmationStore,
) -> None:
    clock, runs = Clock(), Runs()
    pipeline = Pipeline([ConfirmRiskyCalls(store, derive_risk, Risk.HIGH, TTL, clock)], runs)
    context = session()

    asked = await pipeline.run(ToolCall(context, DROP, dict(SQL)))
    assert asked.is_error and not runs.calls
    assert "Confirmation required" in text(asked)
    assert DROP.description in text(asked)
    assert '"DROP TABLE users"' in text(asked)
    token = asked.meta[META_KEY]["token"] if asked.meta else None
    assert isinstance(token, str) and f'"{ARGUMENT}": "{token}"' in text(asked)

    clock.now += 60
    done = await pipeline.run(ToolCall(context, DROP, dict(SQL), notes={TOKEN_NOTE: token}))
    assert not done.is_error and len(runs.calls) == 1

    replay = await pipeline.run(ToolCall(context, DROP, dict(SQL), notes={TOKEN_NOTE: token}))
    assert replay.is_error and "already used" in text(replay) and len(runs.calls) == 1


@pytest.mark.anyio
async def test_calls_below_the_threshold_run_without_confirmation(store: ConfirmationStore) -> None:
    runs = Runs()
    step = ConfirmRiskyCalls(store, derive_risk, Risk.HIGH, TTL, Clock())
    result = await step(ToolCall(session(), QUERY, {"sql": "SELECT 1"}), runs)
    assert not result.is_error and len(runs.calls) == 1


@pytest.mark.anyio
async def test_a_lower_threshold_asks_for_medium_risk_calls_too(store: ConfirmationStore) -> None:
    runs = Runs()
    step = ConfirmRiskyCalls(store, derive_risk, Risk.MEDIUM, TTL, Clock())
    plain = ToolRecord(name="notes__add", source="notes", original_name="add")
    result = await step(ToolCall(session(), plain, {}), runs)
    assert result.is_error and not runs.calls


@pytest.mark.anyio
@pytest.mark.parametrize("approved", [True, False])
async def test_a_client_that_can_elicit_asks_the_person_and_runs_only_on_approval(
    store: ConfirmationStore, approved: bool
) -> None:
    runs = Runs()
    pipeline = Pipeline([ConfirmRiskyCalls(store, derive_risk, Risk.HIGH, TTL, Clock())], runs)
    questions: list[tuple[str, dict[str, Any]]] = []

    async def elicit(message: str, summary: dict[str, Any]) -> bool:
        questions.append((message, summary))
        return approved

    result = await pipeline.run(ToolCall(session(), DROP, dict(SQL), notes={ELICIT_NOTE: elicit}))
    message, summary = questions[0]
    assert DROP.name in message and DROP.description in message
    assert summary == {"tool": DROP.name, "risk": "high", "description": DROP.description, "arguments": SQL}
    assert result.is_error is not approved
    assert len(runs.calls) == (1 if approved else 0)
    if not approved:
        assert "declined" in text(result)


@pytest.mark.anyio
async def test_a_token_is_used_even_when_the_client_could_elicit(store: ConfirmationStore) -> None:
    clock, runs = Clock(), Runs()
    step = ConfirmRiskyCalls(store, derive_risk, Risk.HIGH, TTL, clock)
    token = await store.issue(binding(), clock(), TTL)

    async def never(message: str, summary: dict[str, Any]) -> bool:
        raise AssertionError("the person already confirmed with the token")

    await step(ToolCall(session(), DROP, dict(SQL), notes={TOKEN_NOTE: token, ELICIT_NOTE: never}), runs)
    assert len(runs.calls) == 1


@pytest.mark.anyio
async def test_a_token_for_other_arguments_does_not_run_the_call(store: ConfirmationStore) -> None:
    clock, runs = Clock(), Runs()
    pipeline = Pipeline([ConfirmRiskyCalls(store, derive_risk, Risk.HIGH, TTL, clock)], runs)
    token = await store.issue(binding(), clock(), TTL)
    changed = {"sql": "DROP TABLE orders"}
    result = await pipeline.run(ToolCall(session(), DROP, changed, notes={TOKEN_NOTE: token}))
    assert result.is_error and "different arguments" in text(result) and not runs.calls


def test_confirmation_settings_default_to_high_risk_and_five_minutes() -> None:
    assert ConfirmationSettings.from_config(None, source_file="g.yaml") == ConfirmationSettings(300.0, Risk.HIGH)
    parsed = ConfirmationSettings.from_config({"ttl_seconds": 60, "risk": "medium"}, source_file="g.yaml")
    assert parsed == ConfirmationSettings(60.0, Risk.MEDIUM)


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ({"ttl_seconds": 0}, "confirmation.ttl_seconds"),
        ({"risk": "severe"}, "confirmation.risk"),
        ({"ttl": 30}, "confirmation.ttl"),
    ],
)
def test_a_bad_confirmation_section_names_the_place(section: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as raised:
        ConfirmationSettings.from_config(section, source_file="g.yaml")
    assert raised.value.path == path
