"""The state behind the seam behaves alike in memory and in Redis: budgets, skill state, loop windows.

Each test runs on both backends. In memory one process holds everything, so its two "replicas"
share one session context; with Redis each replica has a context of its own and only the store
in common, as two gateway processes do.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from gateway.auth.policy import Budget
from gateway.catalog.tools import ToolRecord
from gateway.clients.session import SessionContext, state_key
from gateway.config.loading import parse_config
from gateway.config.model import GatewaySettings
from gateway.errors import ConfigError, StateUnavailableError, ToolRefusedError
from gateway.pipeline.budgets import BudgetExceededError, Budgets, Charge
from gateway.pipeline.chain import CallNext, Pipeline, Step, ToolCall
from gateway.pipeline.loops import STATE_KEY as LOOPS
from gateway.pipeline.loops import Attempt, DetectLoops
from gateway.runtime.background import Background
from gateway.shared.redisstate import RedisState
from gateway.shared.state import Held, LocalState, SharedState, ShareSessionState, WindowEdits, session_codecs
from gateway.skills import host
from gateway.skills.disclosure import ActiveSkills
from tests.support.harness import free_port
from tests.support.waiting import poll_until

SETTINGS = GatewaySettings(data_dir=Path("/unused"), loop_window=10, loop_repeat_limit=3, skill_capacity=2)

pytestmark = pytest.mark.anyio


class ManualClock:
    """Wall-clock seconds that move only when the test moves them."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Replicas:
    """Two replicas' views of one stateless-era session and their shared state."""

    states: tuple[SharedState, SharedState]
    sessions: tuple[SessionContext, SessionContext]
    clock: ManualClock


def _session() -> SessionContext:
    return SessionContext("alice:default", "alice", "stateless", created_at=0.0, last_seen=0.0, handle="default")


@pytest.fixture(params=["memory", "redis"])
async def replicas(request: pytest.FixtureRequest) -> AsyncIterator[Replicas]:
    clock = ManualClock()
    if request.param == "memory":
        local = LocalState(clock)
        one = _session()
        yield Replicas((local, local), (one, one), clock)
        return
    url: str = request.getfixturevalue("redis_url")
    first, second = (
        RedisState(url, clock=clock, session_ttl=600, lease=120, loop_window=SETTINGS.loop_window) for _ in range(2)
    )
    try:
        yield Replicas((first, second), (_session(), _session()), clock)
    finally:
        await first.aclose()
        await second.aclose()


def _tool(name: str) -> ToolRecord:
    return ToolRecord(name=name, source="test", original_name=name, input_schema={"type": "object"})


@dataclass
class Replica:
    """One replica's pipeline over its shared state."""

    pipeline: Pipeline
    state: SharedState


def _pipeline(state: SharedState, answer: Callable[[ToolCall], str], *steps: Step) -> Replica:
    async def terminal(call: ToolCall) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=answer(call))])

    budgets = [step for step in steps if isinstance(step, Budgets)]
    share = _share(state, budgets[0] if budgets else None)
    return Replica(Pipeline([share, *steps, _detect()], terminal), state)


def _share(state: SharedState, budgets: Budgets | None = None) -> ShareSessionState:
    charge_of = budgets.charge_of if budgets is not None else None
    codecs = session_codecs(SETTINGS)
    return ShareSessionState(
        state, codecs, ttl=600, loop_window=SETTINGS.loop_window, charge_of=charge_of, holds_attempts=True
    )


def _search(session: SessionContext) -> ToolCall:
    return ToolCall(session=session, tool=_tool("search"), arguments={"q": "x"})


def _detect() -> DetectLoops:
    return DetectLoops(SETTINGS.loop_window, SETTINGS.loop_repeat_limit)


async def _call(replica: Replica, session: SessionContext, tool: str, **arguments: Any) -> types.CallToolResult:
    """One call, its state written before the next call (as `write_behind` does within milliseconds)."""
    result = await replica.pipeline.run(ToolCall(session=session, tool=_tool(tool), arguments=arguments))
    await replica.state.flush()
    return result


async def test_a_session_past_its_calls_per_minute_is_refused_on_every_replica(replicas: Replicas) -> None:
    budget = Budget(calls_per_minute=3)
    counters = [state.budgets for state in replicas.states]
    for n in range(3):
        ticket = await counters[n % 2].admit("s1", "alice", budget)
        await counters[n % 2].free("alice", ticket)
    replicas.clock.now += 20
    for counter in counters:
        with pytest.raises(BudgetExceededError, match="retry in 40 seconds") as refused:
            await counter.admit("s1", "alice", budget)
        assert refused.value.limit == "calls_per_minute"
    replicas.clock.now += 40
    await counters[1].admit("s1", "alice", budget)


async def test_a_caller_s_sessions_count_together_against_the_caller_wide_limit(replicas: Replicas) -> None:
    budget = Budget(caller_calls_per_minute=2)
    first, second = (state.budgets for state in replicas.states)
    await first.admit("s1", "alice", budget)
    await second.admit("s2", "alice", budget)
    with pytest.raises(BudgetExceededError) as refused:
        await first.admit("s3", "alice", budget)
    assert refused.value.limit == "caller_calls_per_minute"
    await second.admit("s4", "bob", budget)


async def test_a_session_s_lifetime_budget_holds_across_replicas(replicas: Replicas) -> None:
    budget = Budget(max_calls_per_session=2)
    first, second = (state.budgets for state in replicas.states)
    await first.admit("s1", "alice", budget)
    await second.admit("s1", "alice", budget)
    with pytest.raises(BudgetExceededError, match="used all 2 calls"):
        await first.admit("s1", "alice", budget)


async def test_a_finished_call_gives_its_concurrency_slot_back(replicas: Replicas) -> None:
    budget = Budget(concurrent=1)
    first, second = (state.budgets for state in replicas.states)
    ticket = await first.admit("s1", "alice", budget)
    with pytest.raises(BudgetExceededError, match="already running"):
        await second.admit("s2", "alice", budget)
    await first.free("alice", ticket)
    await second.admit("s2", "alice", budget)


async def test_a_stateless_session_s_loop_is_stopped_whichever_replica_answers(replicas: Replicas) -> None:
    pipelines = [_pipeline(state, lambda call: "same") for state in replicas.states]
    for n in range(2):
        await _call(pipelines[n % 2], replicas.sessions[n % 2], "search", q="x")
    refused = await _call(pipelines[0], replicas.sessions[0], "search", q="x")
    assert refused.is_error and "3 times in a row" in refused.content[0].text  # type: ignore[union-attr]
    blocked = await _call(pipelines[1], replicas.sessions[1], "search", q="x")
    assert blocked.is_error and "already stopped as a loop" in blocked.content[0].text  # type: ignore[union-attr]


async def test_alternating_replicas_refuse_the_limit_th_identical_call_with_nothing_written_behind(
    replicas: Replicas,
) -> None:
    # No flush between the calls: each call's attempt is in the window once its round trip is.
    pipelines = [_pipeline(state, lambda call: "same") for state in replicas.states]
    results = [await pipelines[n % 2].pipeline.run(_search(replicas.sessions[n % 2])) for n in range(4)]
    assert [result.is_error for result in results] == [False, False, True, True]
    assert "3 times in a row" in results[2].content[0].text  # type: ignore[union-attr]


async def test_identical_calls_running_at_once_on_two_replicas_count_each_other(replicas: Replicas) -> None:
    release, running = anyio.Event(), anyio.Event()

    async def held(call: ToolCall) -> types.CallToolResult:
        running.set()
        await release.wait()
        return types.CallToolResult(content=[types.TextContent(text="same")])

    first = _pipeline(replicas.states[0], lambda call: "same")
    await _call(first, replicas.sessions[0], "search", q="x")
    pipelines = [Pipeline([_share(state), _detect()], held) for state in replicas.states]
    async with anyio.create_task_group() as group:
        group.start_soon(pipelines[0].run, _search(replicas.sessions[0]))
        # The second call starts while the first runs, past its round trip.
        await running.wait()
        refused = await pipelines[1].run(_search(replicas.sessions[1]))
        release.set()
    assert refused.is_error and "3 times in a row" in refused.content[0].text  # type: ignore[union-attr]


async def test_a_call_refused_before_loop_detection_leaves_no_attempt_in_the_window(replicas: Replicas) -> None:
    pipelines = [_pipeline(state, lambda call: "same", RefuseBad()) for state in replicas.states]
    await _call(pipelines[0], replicas.sessions[0], "search", q="x")
    await _call(pipelines[1], replicas.sessions[1], "search", q="x")
    await _call(pipelines[0], replicas.sessions[0], "search", q="x", bad=1)
    refused = await _call(pipelines[1], replicas.sessions[1], "search", q="x")
    # The refused call in between broke nothing: this is the third of the same call in a row.
    assert refused.is_error and "3 times in a row" in refused.content[0].text  # type: ignore[union-attr]


async def test_a_stateless_session_s_active_skills_and_their_order_reach_every_replica(replicas: Replicas) -> None:
    def load(call: ToolCall) -> str:
        active: ActiveSkills = call.session.state.setdefault(host.STATE_KEY, ActiveSkills(capacity=2))
        active.load(call.arguments["skill"], [f"{call.arguments['skill']}__tool"], "session")
        return ",".join(active.active())

    pipelines = [_pipeline(state, load) for state in replicas.states]
    await _call(pipelines[0], replicas.sessions[0], "Load_Skill", skill="a")
    await _call(pipelines[1], replicas.sessions[1], "Load_Skill", skill="b")
    listed = await _call(pipelines[0], replicas.sessions[0], "Load_Skill", skill="c")
    assert listed.content[0].text == "c,b"  # type: ignore[union-attr]
    active: ActiveSkills = replicas.sessions[0].state[host.STATE_KEY]
    assert active.tools() == {"c__tool", "b__tool"}


async def test_the_budget_step_counts_through_the_seam(replicas: Replicas) -> None:
    budgets = Budgets(lambda role: Budget(max_calls_per_session=1), counter=replicas.states[0].budgets)
    replica = _pipeline(replicas.states[0], lambda call: "ok", budgets)
    assert not (await _call(replica, replicas.sessions[0], "echo")).is_error
    assert (await _call(replica, replicas.sessions[0], "echo")).is_error


class RefuseBad:
    """A step before the budget step that refuses calls with `bad` among their arguments."""

    async def __call__(self, call: ToolCall, call_next: CallNext) -> types.CallToolResult:
        if "bad" in call.arguments:
            raise ToolRefusedError("Refused: bad")
        return await call_next(call)


async def test_a_call_refused_before_the_budget_step_uses_none_of_the_budget(replicas: Replicas) -> None:
    budgets = Budgets(
        lambda role: Budget(max_calls_per_session=1, calls_per_minute=1), counter=replicas.states[0].budgets
    )
    replica = _pipeline(replicas.states[0], lambda call: "ok", RefuseBad(), budgets)
    assert (await _call(replica, replicas.sessions[0], "echo", bad=1)).is_error
    assert not (await _call(replica, replicas.sessions[0], "echo", n=1)).is_error
    refused = await _call(replica, replicas.sessions[0], "echo", n=2)
    assert refused.is_error and "max_calls_per_session" in refused.content[0].text  # type: ignore[union-attr]


async def test_a_replica_s_call_sees_the_state_it_has_not_written_yet(replicas: Replicas) -> None:
    replica = _pipeline(replicas.states[0], lambda call: "same")
    for _ in range(2):
        await replica.pipeline.run(ToolCall(session=replicas.sessions[0], tool=_tool("search"), arguments={}))
    refused = await replica.pipeline.run(ToolCall(session=replicas.sessions[0], tool=_tool("search"), arguments={}))
    assert refused.is_error and "3 times in a row" in refused.content[0].text  # type: ignore[union-attr]


async def test_state_written_behind_reaches_the_other_replica_without_another_call(redis_url: str) -> None:
    clock = ManualClock()
    writer, reader = (
        RedisState(redis_url, clock=clock, session_ttl=600, lease=120, loop_window=SETTINGS.loop_window)
        for _ in range(2)
    )
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(writer.write_behind, Background().report)
            writer.save("s-behind", {"k": "v"}, 600)

            async def written() -> bool:
                return (await reader.begin("s-behind", ["k"], None)).values == {"k": "v"}

            # Written behind, in the writer's own time: the reader has nothing to wait on but Redis.
            await poll_until(written, "the state written behind")
            group.cancel_scope.cancel()
    finally:
        await writer.aclose()
        await reader.aclose()


async def test_an_earlier_save_never_replaces_a_later_one(redis_url: str) -> None:
    clock = ManualClock()
    late, early = (
        RedisState(redis_url, clock=clock, session_ttl=600, lease=120, loop_window=SETTINGS.loop_window)
        for _ in range(2)
    )
    try:
        clock.now += 10
        late.save("s-order", {"k": "later"}, 600)
        clock.now -= 5
        early.save("s-order", {"k": "earlier"}, 600)
        await late.flush()
        await early.flush()
        assert (await early.begin("s-order", ["k"], None)).values == {"k": "later"}
    finally:
        await late.aclose()
        await early.aclose()


async def test_every_key_of_a_session_lives_as_long_after_its_last_call_whatever_the_call_changed(
    redis_url: str,
) -> None:
    state = RedisState(redis_url, session_ttl=600, lease=120, loop_window=SETTINGS.loop_window)
    session = _session()
    replica = _pipeline(state, lambda call: "same")
    try:
        await _call(replica, session, "search", q="x")
        state.save(session.id, {host.STATE_KEY: "{}"}, 600)
        await state.flush()
        names = [f"gw:{kind}:{state_key(session.id)}" for kind in ("s", "l")]
        for name in names:
            await state.redis.expire(name, 5)
        # A call that changes only its loop window.
        await _call(replica, session, "search", q="z")
        # Set again to the session's lifetime (600 s), however long the test took since.
        assert [await state.redis.ttl(name) > 5 for name in names] == [True, True]
    finally:
        await state.aclose()


async def test_a_session_s_blocked_fingerprints_live_as_long_after_its_last_call_as_its_other_keys(
    redis_url: str,
) -> None:
    state = RedisState(redis_url, session_ttl=600, lease=120, loop_window=SETTINGS.loop_window)
    session = _session()
    replica = _pipeline(state, lambda call: "same")
    blocked = f"gw:lb:{state_key(session.id)}"
    try:
        state.save(session.id, {}, 600, WindowEdits([["block", "fingerprint"]], 20))
        await state.flush()
        await state.redis.expire(blocked, 5)
        await _call(replica, session, "search", q="x")
        assert await state.redis.ttl(blocked) > 5
    finally:
        await state.aclose()


async def test_a_read_of_a_redis_loop_window_returns_only_the_newest_attempts_the_detector_keeps(
    redis_url: str,
) -> None:
    state = RedisState(redis_url, clock=ManualClock(), session_ttl=600, lease=120, loop_window=3)
    attempts = [Attempt("tool", f"key-{n}") for n in range(8)]
    try:
        for attempt in attempts:
            await state.begin("s-newest", [LOOPS], None, Held(attempt, 6))
        stored = (await state.begin("s-newest", [LOOPS], None)).values[LOOPS]
        kept = await state.redis.llen(f"gw:l:{state_key('s-newest')}")
    finally:
        await state.aclose()
    assert [id for _, _, _, id in json.loads(stored)["window"]] == [attempt.id for attempt in attempts[-3:]]
    assert kept == 6


async def test_a_stopping_replica_writes_what_is_pending(redis_url: str) -> None:
    stopping = RedisState(redis_url, session_ttl=600, lease=120, loop_window=SETTINGS.loop_window)
    stopping.save("s-stop", {"k": "kept"}, 600)
    await stopping.aclose()
    fresh = RedisState(redis_url, session_ttl=600, lease=120, loop_window=SETTINGS.loop_window)
    try:
        assert (await fresh.begin("s-stop", ["k"], None)).values == {"k": "kept"}
    finally:
        await fresh.aclose()


async def test_a_concurrency_slot_of_a_replica_that_died_frees_after_its_lease(redis_url: str) -> None:
    clock = ManualClock()
    state = RedisState(redis_url, clock=clock, session_ttl=600, lease=120, loop_window=SETTINGS.loop_window)
    try:
        await state.budgets.admit("s1", "alice", Budget(concurrent=1))
        with pytest.raises(BudgetExceededError):
            await state.budgets.admit("s2", "alice", Budget(concurrent=1))
        clock.now += 121
        await state.budgets.admit("s2", "alice", Budget(concurrent=1))
    finally:
        await state.aclose()


async def test_an_unreachable_redis_fails_the_call_naming_where_without_its_password() -> None:
    port = free_port()
    state = RedisState(
        f"redis://:hunter2@127.0.0.1:{port}/0", session_ttl=600, lease=120, loop_window=SETTINGS.loop_window
    )
    try:
        with pytest.raises(StateUnavailableError) as failed:
            await state.budgets.admit("s1", "alice", Budget(calls_per_minute=5))
    finally:
        await state.aclose()
    assert f"redis 127.0.0.1:{port} is unreachable" in failed.value.message
    assert "hunter2" not in failed.value.client_text()


def test_a_store_redis_that_is_not_a_redis_url_is_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config({"store": {"redis": "http://redis:6379"}, "servers": {}}, source="gw.yaml", base_dir=tmp_path)
    assert "store.redis" in refused.value.message


async def test_a_redis_that_forgot_the_script_still_counts_and_reads_the_call(redis_url: str) -> None:
    state = RedisState(redis_url, session_ttl=600, lease=120, loop_window=SETTINGS.loop_window)
    try:
        state.save("s-flush", {"k": "kept"}, 600)
        await state.flush()
        # As after a restart of Redis without persistence of its scripts.
        await state.redis.script_flush()
        begun = await state.begin("s-flush", ["k"], Charge("s-flush", "alice", Budget(calls_per_minute=5)))
        assert begun.values == {"k": "kept"}
        assert begun.admission is not None and begun.admission.refused is None
        assert await state.redis.get(f"gw:b:s:{state_key('s-flush')}:total") == "1"
    finally:
        await state.aclose()


async def test_edits_of_the_newest_and_of_older_attempts_change_each_in_place_in_the_redis_window(
    redis_url: str,
) -> None:
    state = RedisState(redis_url, clock=ManualClock(), session_ttl=600, lease=120, loop_window=SETTINGS.loop_window)
    attempts = [Attempt("tool", f"key-{n}") for n in range(8)]
    try:
        for attempt in attempts:
            await state.begin("s-edits", [LOOPS], None, Held(attempt, 16))
        edits: list[list[str | None]] = [
            ["settle", attempts[0].id, "tool", "key-0", "old"],
            ["settle", attempts[7].id, "tool", "key-7", "new"],
            ["drop", attempts[6].id],
            ["drop", attempts[1].id],
        ]
        state.save("s-edits", {}, 600, WindowEdits(edits, 16))
        await state.flush()
        stored = (await state.begin("s-edits", [LOOPS], None)).values[LOOPS]
    finally:
        await state.aclose()
    window = json.loads(stored)["window"]
    kept = [attempts[n] for n in (0, 2, 3, 4, 5, 7)]
    assert [(id, outcome) for _, _, outcome, id in window] == [
        (attempt.id, {0: "old", 7: "new"}.get(attempts.index(attempt))) for attempt in kept
    ]
