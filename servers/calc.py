"""An MCP calculator: arithmetic and math functions parsed with `ast` and walked over a whitelist."""

from __future__ import annotations

import argparse
import ast
import math
import operator
from collections.abc import Callable
from typing import Annotated, TypedDict

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

Number = int | float

MAX_EXPRESSION_CHARS = 2000
MAX_NODES = 500
MAX_DEPTH = 50
# Every intermediate integer stays under this many digits, so no single operation can take long.
MAX_INT_DIGITS = 1000
MAX_INT_BITS = math.ceil(MAX_INT_DIGITS * math.log2(10))
MAX_FACTORIAL = 400
MAX_ROUND_DIGITS = 300


class CalcError(ValueError):
    """The expression is invalid, unsupported, or past a limit."""


class CalcResult(TypedDict):
    """The value of an evaluated expression."""

    result: int | float


def _check(value: Number) -> Number:
    """Refuse integers past the digit cap and floats that overflowed or are not numbers."""
    if isinstance(value, int):
        if value.bit_length() > MAX_INT_BITS:
            raise CalcError(f"result has more than {MAX_INT_DIGITS} digits")
    elif not math.isfinite(value):
        raise CalcError("result is not a finite number (overflow or undefined)")
    return value


def _power(base: Number, exponent: Number) -> Number:
    """`base ** exponent`, refusing integer results past the digit cap before computing them."""
    if isinstance(base, int) and isinstance(exponent, int) and exponent >= 0:
        # A lower bound on the result's size, so the refusal never computes the huge number.
        if abs(base) > 1 and exponent * (abs(base).bit_length() - 1) > MAX_INT_BITS:
            raise CalcError(f"{base} ** {exponent} would have more than {MAX_INT_DIGITS} digits")
        return int(base**exponent)
    # math.pow never returns a complex number and raises on overflow instead of hanging.
    return math.pow(base, exponent)


def _factorial(n: Number) -> Number:
    """n! for a non-negative integer n up to MAX_FACTORIAL."""
    if isinstance(n, float) and n.is_integer():
        n = int(n)
    if not isinstance(n, int) or n < 0:
        raise CalcError(f"factorial needs a non-negative integer, got {n}")
    if n > MAX_FACTORIAL:
        raise CalcError(f"factorial argument {n} is over the limit of {MAX_FACTORIAL}")
    return math.factorial(n)


def _round(x: Number, ndigits: Number = 0) -> Number:
    """Round to ndigits decimal places (an integer result when ndigits is omitted)."""
    if not isinstance(ndigits, int) or abs(ndigits) > MAX_ROUND_DIGITS:
        raise CalcError(f"round's ndigits must be an integer within ±{MAX_ROUND_DIGITS}")
    return round(x) if ndigits == 0 and isinstance(x, float) else round(x, ndigits)


def _log(x: Number, base: Number | None = None) -> Number:
    """Natural logarithm, or the logarithm in the given base."""
    return math.log(x) if base is None else math.log(x, base)


_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _power,
}

_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}

# name -> (function, fewest arguments, most arguments or None for any number)
_FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int | None]] = {
    "sqrt": (math.sqrt, 1, 1),
    "cbrt": (math.cbrt, 1, 1),
    "exp": (math.exp, 1, 1),
    "log": (_log, 1, 2),
    "log2": (math.log2, 1, 1),
    "log10": (math.log10, 1, 1),
    "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1),
    "tan": (math.tan, 1, 1),
    "asin": (math.asin, 1, 1),
    "acos": (math.acos, 1, 1),
    "atan": (math.atan, 1, 1),
    "atan2": (math.atan2, 2, 2),
    "sinh": (math.sinh, 1, 1),
    "cosh": (math.cosh, 1, 1),
    "tanh": (math.tanh, 1, 1),
    "degrees": (math.degrees, 1, 1),
    "radians": (math.radians, 1, 1),
    "hypot": (math.hypot, 1, None),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
    "trunc": (math.trunc, 1, 1),
    "min": (min, 1, None),
    "max": (max, 1, None),
    "factorial": (_factorial, 1, 1),
}

_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


def _describe(node: ast.AST, source: str) -> str:
    """Quote a node's source text and column for an error message."""
    text = ast.get_source_segment(source, node) or type(node).__name__
    return f"{text!r} at column {getattr(node, 'col_offset', 0) + 1}"


class _Evaluator:
    """Walks a parsed expression, evaluating only whitelisted nodes."""

    def __init__(self, source: str) -> None:
        self.source = source

    def eval(self, node: ast.AST, depth: int = 0) -> Number:
        """Evaluate one node, checking every intermediate value."""
        if depth > MAX_DEPTH:
            raise CalcError(f"expression is nested deeper than {MAX_DEPTH} levels")
        return _check(self._eval(node, depth + 1))

    def _eval(self, node: ast.AST, depth: int) -> Number:
        if isinstance(node, ast.Constant):
            # bool is an int subclass; True + 1 is not arithmetic anyone means.
            if isinstance(node.value, int | float) and not isinstance(node.value, bool):
                return node.value
            raise CalcError(f"unsupported constant {_describe(node, self.source)}")
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = self.eval(node.left, depth), self.eval(node.right, depth)
            return _BINARY[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](self.eval(node.operand, depth))
        if isinstance(node, ast.Name):
            if node.id in _CONSTANTS:
                return _CONSTANTS[node.id]
            raise CalcError(f"unknown name {_describe(node, self.source)}; constants: {', '.join(_CONSTANTS)}")
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        raise CalcError(f"unsupported syntax {_describe(node, self.source)}")

    def _call(self, node: ast.Call, depth: int) -> Number:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name is None or name not in _FUNCTIONS:
            raise CalcError(f"unknown function {_describe(node.func, self.source)}; functions: {', '.join(_FUNCTIONS)}")
        if node.keywords or any(isinstance(arg, ast.Starred) for arg in node.args):
            raise CalcError(f"only plain positional arguments are supported in {_describe(node, self.source)}")
        function, fewest, most = _FUNCTIONS[name]
        if len(node.args) < fewest or (most is not None and len(node.args) > most):
            expected = f"{fewest}" if fewest == most else f"at least {fewest}" if most is None else f"{fewest}-{most}"
            raise CalcError(f"{name} takes {expected} argument(s), got {len(node.args)}")
        return function(*(self.eval(arg, depth) for arg in node.args))


def evaluate_expression(expression: str) -> Number:
    """Evaluate an arithmetic expression safely, raising CalcError with what went wrong and where."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalcError(f"expression is {len(expression)} characters, over the limit of {MAX_EXPRESSION_CHARS}")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise CalcError(f"invalid syntax at column {exc.offset}: {exc.msg}") from exc
    except (ValueError, RecursionError, MemoryError) as exc:
        raise CalcError(f"cannot parse expression: {exc}") from exc
    node_count = sum(1 for _ in ast.walk(tree))
    if node_count > MAX_NODES:
        raise CalcError(f"expression has {node_count} syntax nodes, over the limit of {MAX_NODES}")
    try:
        return _Evaluator(expression.strip()).eval(tree.body)
    except CalcError:
        raise
    except ZeroDivisionError as exc:
        raise CalcError("division by zero") from exc
    except OverflowError as exc:
        raise CalcError(f"numeric overflow: {exc}") from exc
    except (ValueError, TypeError) as exc:
        raise CalcError(f"math error: {exc}") from exc


def build_server() -> MCPServer:
    """Build the calculator server."""
    server = MCPServer(
        "calc",
        instructions="Evaluates arithmetic expressions exactly and safely; use it instead of mental arithmetic.",
    )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False))
    def evaluate(
        expression: Annotated[str, Field(description="for example 'sqrt(2) * (3 + 4) ** 2 / pi'")],
    ) -> Annotated[CallToolResult, CalcResult]:
        """Evaluate an arithmetic expression.

        Operators: + - * / // % ** and parentheses. Functions: sqrt, cbrt, exp, log(x[, base]), log2,
        log10, sin, cos, tan, asin, acos, atan, atan2, sinh, cosh, tanh, degrees, radians, hypot, abs,
        round(x[, ndigits]), floor, ceil, trunc, min, max, factorial. Constants: pi, e, tau.
        Integers are exact (up to 1000 digits); angles are in radians.
        """
        try:
            value = evaluate_expression(expression)
        except CalcError as exc:
            raise ToolError(f"cannot evaluate {expression[:80]!r}: {exc}") from exc
        result: CalcResult = {"result": value}
        return CallToolResult(content=[TextContent(type="text", text=str(value))], structured_content=dict(result))

    return server


def main(argv: list[str] | None = None) -> None:
    """Run the calculator server over stdio."""
    argparse.ArgumentParser(prog="python -m servers.calc", description=__doc__).parse_args(argv)
    build_server().run("stdio")


if __name__ == "__main__":
    main()
