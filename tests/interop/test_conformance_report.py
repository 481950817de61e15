"""The conformance runner's reading of the suite's result folders and its summary line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.interop.conformance import read_results, report


def _write(folder: Path, scenario: str, *checks: dict[str, Any]) -> None:
    result = folder / f"server-{scenario}-2026-12-01T03-15-50-865Z"
    result.mkdir(parents=True)
    (result / "checks.json").write_text(json.dumps(list(checks)))


def test_a_scenario_passes_when_a_check_succeeded_and_none_failed(tmp_path: Path) -> None:
    _write(tmp_path, "ping", {"id": "ping", "status": "SUCCESS"}, {"id": "note", "status": "WARNING"})
    _write(tmp_path, "tools-call-image", {"id": "a", "status": "SUCCESS"}, {"id": "b", "status": "FAILURE"})
    _write(tmp_path, "server-sse-multiple-streams", {"id": "session", "status": "WARNING"})
    outcomes = read_results(tmp_path)
    assert {name: outcome.passed for name, outcome in outcomes.items()} == {
        "ping": True,
        "tools-call-image": False,
        "server-sse-multiple-streams": False,
    }


def test_a_failed_scenario_is_shown_with_its_first_failing_check_s_message(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "tools-call-image",
        {"id": "a", "status": "FAILURE", "errorMessage": "Unknown tool: 'test_image_content'"},
        {"id": "b", "status": "FAILURE", "errorMessage": "second"},
    )
    assert read_results(tmp_path)["tools-call-image"].reason == "Unknown tool: 'test_image_content'"


def test_the_summary_line_counts_scenarios_through_the_gateway_and_directly(tmp_path: Path) -> None:
    direct, through = tmp_path / "direct", tmp_path / "gateway"
    for scenario in ("ping", "tools-list", "logging-set-level"):
        _write(direct, scenario, {"id": scenario, "status": "SUCCESS"})
    _write(through, "ping", {"id": "ping", "status": "SUCCESS"})
    _write(through, "tools-list", {"id": "tools-list", "status": "FAILURE", "errorMessage": "Method not found"})
    text, parity = report(read_results(direct), read_results(through))
    lines = text.splitlines()
    assert lines[-1] == "conformance: 1/3 scenarios pass through the gateway (direct: 3/3)"
    assert any(line.split()[0] == "tools-list" and line.endswith("Method not found") for line in lines)
    assert parity is False


def test_parity_holds_when_every_scenario_that_passes_directly_passes_through_the_gateway(tmp_path: Path) -> None:
    direct, through = tmp_path / "direct", tmp_path / "gateway"
    _write(direct, "ping", {"id": "ping", "status": "SUCCESS"})
    _write(direct, "flaky", {"id": "flaky", "status": "FAILURE", "errorMessage": "no"})
    _write(through, "ping", {"id": "ping", "status": "SUCCESS"})
    _write(through, "flaky", {"id": "flaky", "status": "FAILURE", "errorMessage": "no"})
    assert report(read_results(direct), read_results(through))[1] is True
