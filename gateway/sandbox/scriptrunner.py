"""The script runner of code mode: runs inside a sandbox container, never in the gateway.

The gateway starts it as `python3 -c <this file's text>` (the image needs nothing new) and speaks
newline-delimited JSON with it over the container's attached stdin and stdout, the only channel a
container has. The first line in holds the script, the stub modules of the `tools` package and the
output cap. While the script runs, each tool call it makes is one line out (`call`) answered by one
line in (`reply`); the last line out is `done`, with what the script printed, the value of its last
expression and, when it failed, a short error naming the script's line. Only the standard library.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.abc
import importlib.util
import io
import json
import os
import sys
import traceback
import types
from importlib.machinery import ModuleSpec
from typing import Any, BinaryIO

SCRIPT = "<script>"


class ToolError(Exception):
    """A tool call of the script failed: the tool's own error, or the gateway refused the call."""


class ToolRefused(ToolError):
    """The gateway refused the call (not visible, budget, loop, approval pending, ...); it did not run."""


class _Channel:
    """The line protocol to the gateway, on file descriptors the script's print() does not reach."""

    def __init__(self, out: BinaryIO, into: BinaryIO) -> None:
        self._out = out
        self._in = into
        self._number = 0

    def send(self, message: dict[str, Any]) -> None:
        self._out.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        self._out.flush()

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        self._number += 1
        self.send({"call": self._number, "tool": name, "arguments": arguments})
        line = self._in.readline()
        if not line:
            raise SystemExit(1)
        reply = json.loads(line)
        if reply.get("ok"):
            return reply.get("value")
        kind = ToolRefused if reply.get("refused") else ToolError
        raise kind(str(reply.get("error", "the tool failed")))


class _Capped(io.TextIOBase):
    """What the script prints, kept up to `cap` characters."""

    def __init__(self, cap: int) -> None:
        self.parts: list[str] = []
        self.room = cap
        self.cut = False

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if len(text) > self.room:
            self.cut = True
        self.parts.append(text[: self.room])
        self.room = max(0, self.room - len(text))
        return len(text)


def _install(stubs: dict[str, str], channel: _Channel) -> None:
    """The `tools` package, calls going through `channel`; a module is compiled from its stub
    source when first imported or named (`tools.files`), so a catalog of hundreds of tools costs a
    script only the modules it uses."""

    def module(name: str) -> types.ModuleType:
        full = f"tools.{name}"
        if full in sys.modules:
            return sys.modules[full]
        source = stubs.get(name) if name else None
        if source is None:
            raise AttributeError(f"module 'tools' has no attribute {name!r}")
        made = types.ModuleType(full)
        made.__dict__["_call"] = channel.call
        exec(compile(source, f"<{full}>", "exec", dont_inherit=True), made.__dict__)
        sys.modules[full] = made
        setattr(package, name, made)
        return made

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname: str, path: object, target: object = None) -> ModuleSpec | None:
            prefix, _, name = fullname.partition(".")
            if prefix != "tools" or not name or name not in stubs:
                return None
            return importlib.util.spec_from_loader(fullname, Loader(name))

    class Loader(importlib.abc.Loader):
        def __init__(self, name: str) -> None:
            self.name = name

        def create_module(self, spec: ModuleSpec) -> types.ModuleType:
            return module(self.name)

        def exec_module(self, made: types.ModuleType) -> None:
            """Compiled in `create_module` already."""

    package = types.ModuleType("tools", stubs.get("", ""))
    package.__path__ = []
    package.ToolError = ToolError  # type: ignore[attr-defined]
    package.ToolRefused = ToolRefused  # type: ignore[attr-defined]
    package.call = channel.call  # type: ignore[attr-defined]
    package.__dict__["__getattr__"] = module
    sys.modules["tools"] = package
    sys.meta_path.insert(0, Finder())


def _script_line(error: BaseException, code: str) -> str:
    """`line N: <source line>` of the script's innermost frame in the traceback, or ''."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == SCRIPT]
    if not frames or frames[-1].lineno is None:
        return ""
    number = frames[-1].lineno
    lines = code.splitlines()
    text = lines[number - 1].strip() if 0 < number <= len(lines) else ""
    return f"line {number}: {text}"


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def run(start: dict[str, Any], channel: _Channel) -> dict[str, Any]:
    """Run the script of `start`; the `done` message."""
    code = str(start["code"])
    output = _Capped(int(start["max_output"]))
    try:
        tree = ast.parse(code, SCRIPT)
    except SyntaxError as error:
        text = (error.text or "").strip()
        return {"done": True, "error": "syntax", "message": f"line {error.lineno}: {error.msg}: {text}"}
    last = None
    final = tree.body[-1] if tree.body else None
    if isinstance(final, ast.Expr):
        tree.body.pop()
        last = ast.Expression(final.value)
    _install(start["stubs"], channel)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    value = None
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        try:
            exec(compile(tree, SCRIPT, "exec", dont_inherit=True), namespace)
            if last is not None:
                value = eval(compile(last, SCRIPT, "eval", dont_inherit=True), namespace)
        except SystemExit:
            pass  # sys.exit() ends the script early; what it printed is its answer
        except Exception as error:
            where = _script_line(error, code)
            kind = "tool" if isinstance(error, ToolError) else "exception"
            message = f"{type(error).__name__}: {error}"
            return {
                "done": True,
                "error": kind,
                "message": f"{where}: {message}" if where else message,
                "output": "".join(output.parts),
            }
    return {"done": True, "output": "".join(output.parts), "cut": output.cut, "value": _jsonable(value)}


def main() -> None:
    """Read the start line, run the script, send `done`; print() and input() never touch the channel."""
    out = os.fdopen(os.dup(1), "wb")
    into = os.fdopen(os.dup(0), "rb")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    channel = _Channel(out, into)
    line = into.readline()
    if not line:
        return
    channel.send(run(json.loads(line), channel))


if __name__ == "__main__":
    main()
