"""Tests for the calculator server: arithmetic, functions, and refusals that keep it responsive."""

import math
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

from servers.calc import CalcError, build_server, evaluate_expression

REPO = Path(__file__).resolve().parents[2]


async def evaluate(expression: str) -> CallToolResult:
    """Call the evaluate tool on an in-memory server, bounded so a hang fails the test."""
    with anyio.fail_after(5):
        async with Client(build_server()) as client:
            return await client.call_tool("evaluate", {"expression": expression})


def text_of(result: CallToolResult) -> str:
    """The first text block of a result."""
    return result.content[0].text  # type: ignore[union-attr]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 // 2", 3),
        ("-7 % 3", 2),
        ("2 ** 10", 1024),
        ("-3 + +4", 1),
        ("10 / 4", 2.5),
        ("sqrt(16) + abs(-2)", 6.0),
        ("max(1, 5, 3) - min(4, 2)", 3),
        ("round(2.567, 2)", 2.57),
        ("floor(2.7) + ceil(2.1)", 5),
        ("log10(1000)", 3.0),
        ("log(8, 2)", 3.0),
        ("factorial(5)", 120),
        ("2 ** 200", 2**200),
    ],
)
async def test_arithmetic_gives_structured_and_text_results(expression: str, expected: float) -> None:
    result = await evaluate(expression)
    assert not result.is_error, text_of(result)
    assert result.structured_content == {"result": pytest.approx(expected)}
    assert text_of(result) == str(result.structured_content["result"])


@pytest.mark.anyio
async def test_constants_and_trigonometry_are_available() -> None:
    result = await evaluate("sin(pi / 2) + cos(0) + log(e) + exp(0) + tan(0)")
    assert result.structured_content == {"result": pytest.approx(4.0)}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("9**9**9**9", "more than 1000 digits"),
        ("10**100000", "more than 1000 digits"),
        ("1" + "+1" * 50_000, "over the limit"),
        ("-" * 1500 + "1", "syntax nodes"),
        ("factorial(100000)", "over the limit"),
        ("round(5, -10**9)", "ndigits"),
        ("exp(100000)", "overflow"),
        ("1e308 * 10", "not a finite number"),
    ],
)
async def test_expressions_that_could_hang_or_explode_are_refused_quickly(expression: str, reason: str) -> None:
    # In CPU seconds of this process, so that a busy machine does not stretch the bound: a refusal costs a few
    # milliseconds, while evaluating any of these would take minutes.
    started = time.process_time()
    result = await evaluate(expression)
    assert result.is_error
    assert reason in text_of(result)
    assert time.process_time() - started < 1.0


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("__import__('os')", "unknown function '__import__'"),
        ("print.__self__", "unsupported syntax"),
        ("(1).__class__", "unsupported syntax"),
        ("[1, 2]", "unsupported syntax"),
        ("'a' * 3", "unsupported constant"),
        ("True + 1", "unsupported constant"),
        ("x + 1", "unknown name 'x'"),
        ("lambda: 1", "unsupported syntax"),
        ("1 +", "invalid syntax"),
        ("1 / 0", "division by zero"),
        ("sqrt(-1)", "math error"),
        ("(-8) ** (1 / 3)", "math error"),
        ("sqrt(1, 2)", "sqrt takes 1 argument(s), got 2"),
    ],
)
async def test_anything_but_arithmetic_is_refused_with_a_clear_error(expression: str, reason: str) -> None:
    result = await evaluate(expression)
    assert result.is_error
    assert reason in text_of(result)


def test_error_messages_point_at_the_offending_column() -> None:
    with pytest.raises(CalcError, match=r"unknown name 'y' at column 5"):
        evaluate_expression("1 + y")


def test_integer_results_stay_exact() -> None:
    assert evaluate_expression("2 ** 100 + 1") == 2**100 + 1
    assert math.isclose(evaluate_expression("tau / 2"), math.pi)


@pytest.mark.anyio
async def test_evaluate_is_annotated_read_only_and_idempotent() -> None:
    async with Client(build_server()) as client:
        (tool,) = (await client.list_tools()).tools
    assert tool.name == "evaluate"
    assert tool.annotations is not None
    assert tool.annotations.read_only_hint is True
    assert tool.annotations.idempotent_hint is True
    assert tool.output_schema is not None and "result" in tool.output_schema["properties"]


@pytest.mark.anyio
async def test_calc_server_answers_over_stdio_as_a_subprocess() -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "servers.calc"], cwd=REPO)
    with anyio.fail_after(30):
        async with Client(params) as client:
            result = await client.call_tool("evaluate", {"expression": "6 * 7"})
    assert result.structured_content == {"result": 42}
