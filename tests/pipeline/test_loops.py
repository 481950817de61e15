"""Loop detection: repeated calls and repeated results are refused, and stay refused."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import mcp_types as types
import pytest

from gateway.errors import ToolExecutionError
from gateway.pipeline.chain import ToolCall
from gateway.pipeline.loops import STATE_KEY, Attempt, DetectLoops, LoopDetector, LoopRefusedError, Mark, fingerprint

from .conftest import MakeCall, make_session, make_tool, text_result


def admit_many(detector: LoopDetector, tool: str, arguments: dict[str, Any], times: int, result: str = "r") -> None:
    for _ in range(times):
        detector.settle(detector.admit(tool, arguments), result)


def test_the_fifth_identical_call_in_a_row_is_refused_and_stays_blocked() -> None:
    detector = LoopDetector(window=20, repeat_limit=5)
    for n in range(4):
        detector.settle(detector.admit("search", {"q": "x"}), f"result {n}")
    with pytest.raises(LoopRefusedError, match="same call to 'search' 5 times in a row"):
        detector.admit("search", {"q": "x"})
    detector.admit("other", {})
    with pytest.raises(LoopRefusedError, match="already stopped as a loop"):
        detector.admit("search", {"q": "x"})


def test_a_different_call_in_between_resets_the_count() -> None:
    detector = LoopDetector(window=20, repeat_limit=5)
    for _ in range(3):
        admit_many(detector, "search", {"q": "x"}, 4, result="same")
        admit_many(detector, "search", {"q": "y"}, 1, result="other")


def test_timestamps_and_nonces_do_not_defeat_the_detector() -> None:
    detector = LoopDetector(window=20, repeat_limit=5)
    start = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    for n in range(4):
        now = start + timedelta(seconds=n * 7.3)
        arguments = {
            "query": f"status as of {now.isoformat()}",
            "since": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "request_id": str(uuid.uuid4()),
            "options": {"nonce": uuid.uuid4().hex, "timestamp": 1_790_000_000 + n},
        }
        detector.settle(detector.admit("status", arguments), f"r{n}")
    with pytest.raises(LoopRefusedError):
        detector.admit(
            "status",
            {
                "query": "status as of 2026-12-01T00:00:00+00:00",
                "since": "2026-12-01T00:00:00Z",
                "request_id": "r",
                "options": {"nonce": "n", "timestamp": 1},
            },
        )


def test_argument_order_does_not_matter_but_real_differences_do() -> None:
    assert fingerprint("t", {"a": 1, "b": [1, 2]}) == fingerprint("t", {"b": [1, 2], "a": 1})
    assert fingerprint("t", {"a": 1}) != fingerprint("t", {"a": 2})
    assert fingerprint("t", {"a": 1}) != fingerprint("u", {"a": 1})
    # An identifier under an ordinary key names what is acted on, so it is kept.
    assert fingerprint("t", {"id": str(uuid.uuid4())}) != fingerprint("t", {"id": str(uuid.uuid4())})
    assert fingerprint("t", {"day": "2026-01-01"}) != fingerprint("t", {"day": "2026-01-02"})


def test_alternating_calls_with_the_same_result_are_refused_after_the_limit() -> None:
    detector = LoopDetector(window=20, repeat_limit=5)
    for n in range(5):
        detector.settle(detector.admit("page", {"n": n % 2}), "same page")
    with pytest.raises(LoopRefusedError, match="last 5 calls to 'page' all returned the same result"):
        detector.admit("page", {"n": 1})
    detector.admit("page", {"n": 2})


def test_new_arguments_with_the_same_result_keep_going() -> None:
    detector = LoopDetector(window=20, repeat_limit=5)
    for n in range(10):
        detector.settle(detector.admit("search", {"q": f"term {n}"}), "no matches")


def test_a_call_still_running_breaks_a_run_of_results() -> None:
    detector = LoopDetector(window=20, repeat_limit=3)
    detector.settle(detector.admit("page", {"n": 0}), "same")
    detector.settle(detector.admit("page", {"n": 1}), "same")
    detector.admit("page", {"n": 2})
    detector.admit("page", {"n": 0})


def test_the_window_forgets_old_results() -> None:
    detector = LoopDetector(window=3, repeat_limit=3)
    detector.settle(detector.admit("page", {"n": 0}), "same")
    detector.settle(detector.admit("page", {"n": 1}), "same")
    detector.settle(detector.admit("other", {}), "x")
    detector.settle(detector.admit("page", {"n": 2}), "same")
    detector.admit("page", {"n": 0})


def test_changes_since_a_mark_name_each_attempt_a_store_must_append_settle_or_drop_and_each_new_block() -> None:
    detector = LoopDetector(window=3, repeat_limit=2)
    first = detector.admit("a", {})
    held = Attempt("a", fingerprint("a", {}))
    since = detector.mark()
    since = Mark({**since.outcomes, held.id: None}, since.blocked)
    with pytest.raises(LoopRefusedError):
        detector.admit("a", {}, held=held)
    detector.settle(first, "r")
    nested = detector.admit("b", {})
    assert detector.changes(since) == [
        ["settle", first.id, "a", first.fingerprint, "r"],
        ["append", nested.id, "b", nested.fingerprint, None],
        ["drop", held.id],
        ["block", held.fingerprint],
    ]
    restored = LoopDetector.restore(detector.snapshot(), window=3, repeat_limit=2)
    assert restored.mark() == detector.mark()


def test_limits_are_checked_when_configured() -> None:
    with pytest.raises(ValueError, match="repeat_limit <= window"):
        DetectLoops(window=3, repeat_limit=5)


@pytest.mark.anyio
async def test_the_step_refuses_the_fifth_identical_call_through_the_pipeline(make_call: MakeCall) -> None:
    async def answer(call: ToolCall) -> types.CallToolResult:
        return text_result(f"answer at {call.arguments['at']}")

    step = DetectLoops(window=20, repeat_limit=5)
    results: list[object] = []
    for second in range(6):
        call = make_call(make_tool("clock"), {"at": f"2026-11-29T12:00:0{second}Z"})
        try:
            results.append(await step(call, answer))
        except LoopRefusedError as refusal:
            results.append(refusal)
    assert [isinstance(r, LoopRefusedError) for r in results] == [False] * 4 + [True] * 2


@pytest.mark.anyio
async def test_the_same_error_again_and_again_counts_as_the_same_result(make_call: MakeCall) -> None:
    async def failing(call: ToolCall) -> types.CallToolResult:
        raise ToolExecutionError("disk full")

    step = DetectLoops(window=10, repeat_limit=3)
    for n in range(3):
        with pytest.raises(ToolExecutionError):
            await step(make_call(make_tool("save"), {"name": f"f{n % 2}"}), failing)
    with pytest.raises(LoopRefusedError, match="same result"):
        await step(make_call(make_tool("save"), {"name": "f1"}), failing)


@pytest.mark.anyio
async def test_each_session_has_its_own_detector(make_call: MakeCall) -> None:
    async def answer(call: ToolCall) -> types.CallToolResult:
        return text_result("same")

    step = DetectLoops(window=5, repeat_limit=2)
    first = make_call(make_tool("t"), {"a": 1})
    await step(first, answer)
    other = make_session("s2")
    await step(make_call(make_tool("t"), {"a": 1}, on=other), answer)
    with pytest.raises(LoopRefusedError):
        await step(make_call(make_tool("t"), {"a": 1}), answer)
    assert isinstance(first.session.state[STATE_KEY], LoopDetector)
    assert isinstance(other.state[STATE_KEY], LoopDetector)


def test_a_detector_restored_from_a_longer_stored_window_holds_its_newest_attempts() -> None:
    stored = {"window": [["t", f"k{n}", "ok", f"id{n}"] for n in range(8)], "blocked": []}
    restored = LoopDetector.restore(stored, window=3, repeat_limit=2)
    assert list(restored.mark().outcomes) == ["id5", "id6", "id7"]
