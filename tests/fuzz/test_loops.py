"""Loop detection takes any JSON arguments and gives identical calls one fingerprint."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.errors import ToolRefusedError
from gateway.pipeline.loops import LoopDetector, fingerprint

from . import RUNS, TEXT, json_values, nested

ARGUMENTS = st.dictionaries(TEXT, json_values(), max_size=6)


@RUNS
def test_identical_calls_share_a_fingerprint(runs: settings) -> None:
    @runs
    @given(TEXT, ARGUMENTS)
    def check(tool: str, arguments: dict[str, Any]) -> None:
        reordered = dict(reversed(list(copy.deepcopy(arguments).items())))
        assert fingerprint(tool, arguments) == fingerprint(tool, reordered)

    check()


@RUNS
def test_the_detector_admits_or_refuses_any_calls(runs: settings) -> None:
    @runs
    @given(st.lists(st.tuples(st.sampled_from(["a", "b"]), ARGUMENTS, TEXT), max_size=30))
    def check(calls: list[tuple[str, dict[str, Any], str]]) -> None:
        detector = LoopDetector(window=6, repeat_limit=3)
        for tool, arguments, outcome in calls:
            try:
                attempt = detector.admit(tool, arguments)
            except ToolRefusedError:
                continue
            detector.settle(attempt, outcome)

    check()


def test_the_same_call_repeated_is_refused_whatever_its_arguments() -> None:
    detector = LoopDetector(window=5, repeat_limit=3)
    arguments = {"deep": nested(150), "text": "\ud800", "number": 10**400, "nan": float("nan")}
    detector.admit("tool", arguments)
    detector.admit("tool", copy.deepcopy(arguments))
    try:
        detector.admit("tool", copy.deepcopy(arguments))
    except ToolRefusedError:
        return
    raise AssertionError("the third identical call was admitted")
