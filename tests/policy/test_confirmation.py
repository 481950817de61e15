"""Confirmation of risky calls: elicitation, request-state tokens that survive a restart (on each
store backend), pending approvals with a compare-and-set on their status, and refusals."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest

from gateway.auth.policy import derive_risk
from gateway.catalog.tools import Risk, ToolRecord
from gateway.clients.session import SessionContext
from gateway.errors import ConfigError
from gateway.pipeline.approvals import ApprovalClosedError, ApprovalNotFoundError, ApprovalStore, Binding, Status
from gateway.pipeline.chain import OUTCOME_NOTE, CallNext, Pipeline, ToolCall
from gateway.pipeline.confirmation import (
    APPROVAL_KEY,
    ARGUMENT,
    ELICIT_NOTE,
    INPUT_NOTE,
    TOKEN_NOTE,
    ConfirmationInvalidError,
    ConfirmationSettings,
    ConfirmationStore,
    ConfirmRiskyCalls,
    InputRequest,
    binding_of,
    strip_confirmation,
)
from gateway.pipeline.loops import LoopRefusedError
from tests.support.databases import Backend

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
    return binding_of(ToolCall(session(session_id, caller), DROP.renamed(tool), arguments or dict(SQL)))


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.fixture
def store(store_backend: Backend) -> Iterator[ConfirmationStore]:
    opened = ConfirmationStore(store_backend.open("confirmations"))
    yield opened
    opened.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def approvals(store_backend: Backend, clock: Clock) -> Iterator[ApprovalStore]:
    opened = ApprovalStore(store_backend.open("approvals"), clock)
    yield opened
    opened.close()


def step(
    store: ConfirmationStore, approvals: ApprovalStore, threshold: Risk = Risk.HIGH, clock: Clock | None = None
) -> ConfirmRiskyCalls:
    return ConfirmRiskyCalls(store, approvals, derive_risk, threshold, TTL, clock or Clock())


def test_a_confirmation_argument_is_taken_out_of_the_arguments_and_kept_nowhere() -> None:
    assert strip_confirmation({"sql": "x", ARGUMENT: "tok"}) == {"sql": "x"}
    assert strip_confirmation({"sql": "x"}) == {"sql": "x"}
    assert strip_confirmation({ARGUMENT: 12}) == {}


@pytest.mark.anyio
async def test_a_token_issued_before_a_restart_works_once_after_it(store_backend: Backend) -> None:
    now = 1000.0
    first = ConfirmationStore(store_backend.open("confirmations"))
    token = await first.issue(binding(), now, TTL)
    first.close()

    second = ConfirmationStore(store_backend.open("confirmations"))
    await second.redeem(token, binding(), now + 10)
    with pytest.raises(ConfirmationInvalidError, match="already used"):
        await second.redeem(token, binding(), now + 11)
    second.close()

    third = ConfirmationStore(store_backend.open("confirmations"))
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
async def test_the_database_keeps_only_a_hash_of_each_token(store: ConfirmationStore, store_backend: Backend) -> None:
    token = await store.issue(binding(), 1000.0, TTL)
    reader = store_backend.open("confirmations")
    stored = [row[0] for row in reader.fetch_all("SELECT token_hash FROM confirmations")]
    reader.close()
    assert len(stored) == 1 and token not in stored[0]


@pytest.mark.anyio
async def test_a_risky_call_without_elicitation_is_parked_then_runs_once_after_approval(
    store: ConfirmationStore, approvals: ApprovalStore, clock: Clock
) -> None:
    runs = Runs()
    pipeline = Pipeline([step(store, approvals, clock=clock)], runs)
    context = session()

    asked = await pipeline.run(ToolCall(context, DROP, dict(SQL)))
    assert asked.is_error and not runs.calls
    assert "Waiting for approval" in text(asked)
    assert DROP.description in text(asked)
    assert '"DROP TABLE users"' in text(asked)
    approval = asked.meta[APPROVAL_KEY]["id"] if asked.meta else None
    assert isinstance(approval, str) and approval in text(asked)

    still = await pipeline.run(ToolCall(context, DROP, dict(SQL)))
    assert "Still waiting" in text(still) and approval in text(still) and not runs.calls

    clock.now += 60
    approvals.decide(approval, True, "tester")
    done = await pipeline.run(ToolCall(context, DROP, dict(SQL)))
    assert not done.is_error and len(runs.calls) == 1

    replay = await pipeline.run(ToolCall(context, DROP, dict(SQL)))
    assert replay.is_error and "Waiting for approval" in text(replay) and approval not in text(replay)
    assert len(runs.calls) == 1


class RefusesOnce:
    """A step after confirmation that refuses the first call it sees, as loop detection may."""

    def __init__(self) -> None:
        self.refused = False

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        if not self.refused:
            self.refused = True
            raise LoopRefusedError("Refused: the same call too many times in a row.")
        return await call_next(call)


@pytest.mark.anyio
async def test_an_approved_call_that_a_later_step_refuses_keeps_its_approval_for_the_next_try(
    store: ConfirmationStore, approvals: ApprovalStore, clock: Clock
) -> None:
    runs = Runs()
    pipeline = Pipeline([step(store, approvals, clock=clock), RefusesOnce()], runs)
    context = session()
    parked = await pipeline.run(ToolCall(context, DROP, dict(SQL)))
    approval = parked.meta[APPROVAL_KEY]["id"] if parked.meta else None
    assert isinstance(approval, str)
    approvals.decide(approval, True, "tester")

    refused = await pipeline.run(ToolCall(context, DROP, dict(SQL)))
    assert refused.is_error and "too many times" in text(refused) and not runs.calls
    released = approvals.get(approval)
    assert released is not None and released.status == Status.APPROVED
    done = await pipeline.run(ToolCall(context, DROP, dict(SQL)))
    assert not done.is_error and len(runs.calls) == 1
    again = await pipeline.run(ToolCall(context, DROP, dict(SQL)))
    assert "Waiting for approval" in text(again) and len(runs.calls) == 1


@pytest.mark.anyio
async def test_calls_below_the_threshold_run_without_confirmation(
    store: ConfirmationStore, approvals: ApprovalStore
) -> None:
    runs = Runs()
    result = await step(store, approvals)(ToolCall(session(), QUERY, {"sql": "SELECT 1"}), runs)
    assert not result.is_error and len(runs.calls) == 1


@pytest.mark.anyio
async def test_a_lower_threshold_asks_for_medium_risk_calls_too(
    store: ConfirmationStore, approvals: ApprovalStore
) -> None:
    runs = Runs()
    plain = ToolRecord(name="notes__add", source="notes", original_name="add")
    result = await step(store, approvals, Risk.MEDIUM)(ToolCall(session(), plain, {}), runs)
    assert result.is_error and not runs.calls


@pytest.mark.anyio
@pytest.mark.parametrize("approved", [True, False])
async def test_a_client_that_can_elicit_asks_the_person_and_runs_only_on_approval(
    store: ConfirmationStore, approvals: ApprovalStore, approved: bool
) -> None:
    runs = Runs()
    pipeline = Pipeline([step(store, approvals)], runs)
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
    assert approvals.pending() == []


@pytest.mark.anyio
async def test_a_stateless_client_gets_a_request_state_token_that_no_result_shows(
    store: ConfirmationStore, approvals: ApprovalStore, clock: Clock
) -> None:
    runs = Runs()
    pipeline = Pipeline([step(store, approvals, clock=clock)], runs)
    request = InputRequest()
    call = ToolCall(session(), DROP, dict(SQL), notes={INPUT_NOTE: request})
    asked = await pipeline.run(call)
    assert request.state is not None
    assert asked.is_error and request.state not in text(asked) and not asked.meta
    assert call.notes[OUTCOME_NOTE] == "refused:awaiting_confirmation"
    done = await pipeline.run(ToolCall(session(), DROP, dict(SQL), notes={TOKEN_NOTE: request.state}))
    assert not done.is_error and len(runs.calls) == 1
    assert approvals.pending() == []


@pytest.mark.anyio
async def test_a_token_is_used_even_when_the_client_could_elicit(
    store: ConfirmationStore, approvals: ApprovalStore, clock: Clock
) -> None:
    runs = Runs()
    token = await store.issue(binding(), clock(), TTL)

    async def never(message: str, summary: dict[str, Any]) -> bool:
        raise AssertionError("the person already confirmed with the token")

    call = ToolCall(session(), DROP, dict(SQL), notes={TOKEN_NOTE: token, ELICIT_NOTE: never})
    await step(store, approvals, clock=clock)(call, runs)
    assert len(runs.calls) == 1


@pytest.mark.anyio
async def test_a_token_for_other_arguments_does_not_run_the_call(
    store: ConfirmationStore, approvals: ApprovalStore, clock: Clock
) -> None:
    runs = Runs()
    pipeline = Pipeline([step(store, approvals, clock=clock)], runs)
    token = await store.issue(binding(), clock(), TTL)
    changed = {"sql": "DROP TABLE orders"}
    result = await pipeline.run(ToolCall(session(), DROP, changed, notes={TOKEN_NOTE: token}))
    assert result.is_error and "different arguments" in text(result) and not runs.calls


def test_an_approval_is_decided_once_and_used_once(approvals: ApprovalStore) -> None:
    parked, fresh = approvals.checkpoint(binding(), "intern", "{}", TTL)
    assert fresh and parked.status == Status.PENDING
    assert approvals.checkpoint(binding(), "intern", "{}", TTL) == (parked, False)
    assert approvals.decide(parked.id, True, "ops").status == Status.APPROVED
    with pytest.raises(ApprovalClosedError, match="already approved"):
        approvals.decide(parked.id, True, "ops")
    with pytest.raises(ApprovalClosedError, match="already approved"):
        approvals.decide(parked.id, False, "ops")
    used, fresh = approvals.checkpoint(binding(), "intern", "{}", TTL)
    assert used.id == parked.id and used.status == Status.USED and not fresh
    again, fresh = approvals.checkpoint(binding(), "intern", "{}", TTL)
    assert fresh and again.id != parked.id and again.status == Status.PENDING


def test_an_approval_given_back_is_used_before_one_a_retry_parked_meanwhile(approvals: ApprovalStore) -> None:
    parked, _ = approvals.checkpoint(binding(), None, "{}", TTL)
    approvals.decide(parked.id, True, "ops")
    assert approvals.checkpoint(binding(), None, "{}", TTL)[0].status == Status.USED
    meanwhile, fresh = approvals.checkpoint(binding(), None, "{}", TTL)
    assert fresh and meanwhile.status == Status.PENDING
    approvals.release(parked.id)
    used, fresh = approvals.checkpoint(binding(), None, "{}", TTL)
    assert (used.id, used.status, fresh) == (parked.id, Status.USED, False)
    assert approvals.checkpoint(binding(), None, "{}", TTL) == (meanwhile, False)


def test_an_approval_binds_its_exact_call(approvals: ApprovalStore) -> None:
    parked, _ = approvals.checkpoint(binding(), None, "{}", TTL)
    approvals.decide(parked.id, True, "ops")
    for other in (binding(caller="mallory"), binding(session_id="s2"), binding(tool="x__y"), binding(sql="SELECT")):
        approval, fresh = approvals.checkpoint(other, None, "{}", TTL)
        assert fresh and approval.status == Status.PENDING
    assert approvals.checkpoint(binding(), None, "{}", TTL)[0].status == Status.USED


def test_an_expired_approval_can_no_longer_be_decided_nor_used(approvals: ApprovalStore, clock: Clock) -> None:
    parked, _ = approvals.checkpoint(binding(), None, "{}", TTL)
    approved, _ = approvals.checkpoint(binding(session_id="s2"), None, "{}", TTL)
    approvals.decide(approved.id, True, "ops")
    clock.now += TTL
    with pytest.raises(ApprovalClosedError, match="expired"):
        approvals.decide(parked.id, True, "ops")
    assert approvals.pending() == []
    replacement, fresh = approvals.checkpoint(binding(session_id="s2"), None, "{}", TTL)
    assert fresh and replacement.id != approved.id and replacement.status == Status.PENDING
    with pytest.raises(ApprovalNotFoundError):
        approvals.decide("ap-unknown", True, "ops")


def test_a_second_store_on_the_same_database_cannot_use_an_approval_twice(store_backend: Backend, clock: Clock) -> None:
    first = ApprovalStore(store_backend.open("approvals"), clock)
    second = ApprovalStore(store_backend.open("approvals"), clock)
    try:
        parked, _ = first.checkpoint(binding(), None, "{}", TTL)
        second.decide(parked.id, True, "ops")
        statuses = [store.checkpoint(binding(), None, "{}", TTL)[0].status for store in (second, first)]
    finally:
        first.close()
        second.close()
    assert statuses == [Status.USED, Status.PENDING]


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
