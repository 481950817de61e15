"""The newcomer's first five minutes: a fresh clone to an approved sandboxed call, timed step by step.

Run `python -m benchmarks.newcomer [REPOSITORY]` (default: this checkout; what is committed is
what gets cloned). In a temporary directory it runs `git clone`, then the clone's `scripts/serve
--port <free port>` with `GATEWAY_DATA_DIR` in that directory (which creates the clone's .venv and
installs the gateway into it), and times each line the script prints until the banner says it
serves and until every server is ready. Then an SDK client (`mcp.Client(url)`) calls
`calc__evaluate`, calls `python__run_python` (which waits for approval, its answer naming the
command that approves it), runs that command with the clone's `.venv/bin/python` as the README
says, and calls `python__run_python` again for its result. Every step uses only what the README
and the printed messages say. Afterwards it times pip's resolution alone in the clone's .venv
(`pip install --dry-run --ignore-installed`) to split the install into resolving and installing,
and with `--uv PATH`, the same install by `uv venv` and `uv pip install` into a second virtualenv
of the clone with an empty uv cache, in the same run.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
from mcp import Client, types

from benchmarks.gateway_latency import REPO, _interrupt, free_port

TARGET_TOTAL = 300.0
TARGET_SERVING = 45.0
STOP_TIMEOUT = 10.0
DRY_RUN = ("--dry-run", "--ignore-installed", "--editable", ".")
BANNER = re.compile(r"Serving MCP at (\S+/mcp) ")
SETTLED = re.compile(r"^\d+/\d+ servers ready")
APPROVE = re.compile(r"`(python -m gateway approvals approve [^`]+)`")
# The lines scripts/serve prints, in order, each marking the end of the step before it.
MARKS = {
    "setup: creating .venv": "venv",
    "setup: installing": "installing",
    "setup: installed": "installed",
    "serve: starting the gateway": "starting",
}


class Output:
    """A process's output lines, each with the `time.perf_counter` at which it arrived."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[tuple[float, str]] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            with self._changed:
                self.lines.append((time.perf_counter(), line.rstrip("\n")))
                self._changed.notify_all()

    def wait_for(self, pattern: re.Pattern[str], timeout: float) -> tuple[float, re.Match[str]]:
        """When the first line matching `pattern` arrived, and its match; TimeoutError after `timeout`."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self._changed:
            while True:
                for moment, line in self.lines[seen:]:
                    found = pattern.search(line)
                    if found:
                        return moment, found
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or (not self._thread.is_alive() and seen == len(self.lines)):
                    raise TimeoutError(f"no line matching {pattern.pattern!r}")
                self._changed.wait(min(left, 1.0))

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def _text(result: types.CallToolResult) -> str:
    return "".join(part.text for part in result.content if isinstance(part, types.TextContent))


async def calls(url: str, clone: Path, env: dict[str, str], times: dict[str, float]) -> list[str]:
    """Call calc, park a sandboxed call, approve it with the printed command, call it again.
    Fills `times` with when each step ended; returns what surprised (empty when nothing did)."""
    surprises: list[str] = []
    async with Client(url) as client:
        times["connected"] = time.perf_counter()
        result = await client.call_tool("calc__evaluate", {"expression": "6 * 7"})
        text = _text(result)
        if result.is_error or text.strip() != "42":
            raise RuntimeError(f"calc__evaluate answered {text!r}")
        times["calc"] = time.perf_counter()
        arguments = {"code": "print(6 * 7)"}
        parked = await client.call_tool("python__run_python", arguments)
        text = _text(parked)
        times["parked"] = time.perf_counter()
        command = APPROVE.search(text)
        if command is None:
            raise RuntimeError(f"python__run_python's answer names no approval command: {text!r}")
        printed = shlex.split(command.group(1))
        # The README: the command line runs with the checkout's .venv, not the system Python.
        run = [str(clone / ".venv" / "bin" / "python"), *printed[1:]]
        approved = await anyio.run_process(run, cwd=clone, env=env, check=False)
        if approved.returncode != 0:
            raise RuntimeError(f"{shlex.join(run)} exited {approved.returncode}: {approved.stderr.decode().strip()}")
        times["approved"] = time.perf_counter()
        system = shutil.which("python")
        if (
            system is None
            or (
                await anyio.run_process(
                    [system, "-c", "import gateway"], cwd="/", check=False, stderr=subprocess.DEVNULL
                )
            ).returncode
        ):
            surprises.append(f"the answer prints `{command.group(1)}`; only `.venv/bin/python` runs it (README)")
        result = await client.call_tool("python__run_python", arguments)
        text = _text(result)
        if result.is_error or "42" not in text:
            raise RuntimeError(f"python__run_python after approval answered {text!r}")
        times["ran"] = time.perf_counter()
    return surprises


def resolve_seconds(clone: Path) -> float:
    """Seconds pip takes to resolve the clone's runtime install from nothing (nothing installed)."""
    start = time.perf_counter()
    subprocess.run(
        [str(clone / ".venv/bin/python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *DRY_RUN],
        cwd=clone,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def uv_seconds(uv: str, clone: Path, root: Path) -> tuple[float, float]:
    """Seconds `uv venv` and `uv pip install --editable .` take for the clone's runtime install into a
    second virtualenv, with a cache of their own (nothing downloaded before)."""
    env = {**os.environ, "UV_CACHE_DIR": str(root / "uv-cache")}
    env.pop("VIRTUAL_ENV", None)
    target = clone / ".venv-uv"
    start = time.perf_counter()
    subprocess.run([uv, "venv", "--quiet", str(target)], cwd=clone, env=env, check=True)
    created = time.perf_counter()
    python = str(target / "bin" / "python")
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", python, "--editable", "."], cwd=clone, env=env, check=True
    )
    return created - start, time.perf_counter() - created


def run(repository: str, timeout: float, uv: str | None) -> int:
    """The whole path once; prints each step and returns the exit status (1 when a step failed)."""
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="newcomer-") as directory:
        root = Path(directory)
        clone = root / "mcp-gateway"
        env = {**os.environ, "GATEWAY_DATA_DIR": str(root / "data")}
        env.pop("VIRTUAL_ENV", None)
        times: dict[str, float] = {"start": time.perf_counter()}
        subprocess.run(["git", "clone", "--quiet", repository, str(clone)], check=True)
        times["cloned"] = time.perf_counter()
        port = free_port()
        process = subprocess.Popen(
            [str(clone / "scripts" / "serve"), "--port", str(port)],
            cwd=clone,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        output = Output(process)
        surprises: list[str] = []
        failed = ""
        try:
            for mark, name in MARKS.items():
                times[name] = output.wait_for(re.compile("^" + re.escape(mark)), timeout)[0]
            times["serving"], banner = output.wait_for(BANNER, timeout)
            times["ready"], settled = output.wait_for(SETTLED, timeout)
            if "not ready" in settled.string:
                surprises.append(settled.string)
            if "Admin sign-in for the web page" not in output.text():
                surprises.append("serve printed no admin sign-in link")
            surprises += anyio.run(calls, banner.group(1), clone, env, times)
        except (TimeoutError, RuntimeError) as error:
            failed = str(error)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        resolving = resolve_seconds(clone) if not failed else None
        with_uv = uv_seconds(uv, clone, root) if uv and not failed else None
    load_after = os.getloadavg()
    report(times, resolving, load_before, load_after)
    if with_uv is not None:
        print(f"{'beside it, uv venv':<46} {with_uv[0]:7.2f} s")
        print(f"{'beside it, uv pip install (runtime)':<46} {with_uv[1]:7.2f} s")
    for surprise in surprises:
        print(f"surprise: {surprise}")
    if failed:
        print(f"FAILED: {failed}\n--- scripts/serve printed:\n{output.text()}")
        return 1
    print("every step worked using only the README and what the commands printed: yes")
    return 0


def report(
    times: dict[str, float],
    resolving: float | None,
    load_before: tuple[float, float, float],
    load_after: tuple[float, float, float],
) -> None:
    steps = [
        ("git clone", "start", "cloned"),
        ("scripts/serve: creating .venv", "venv", "installing"),
        ("scripts/serve: pip install (runtime)", "installing", "installed"),
        ("scripts/serve: starting to banner (serving)", "starting", "serving"),
        ("banner to every server ready", "serving", "ready"),
        ("client connects", "ready", "connected"),
        ("calc__evaluate", "connected", "calc"),
        ("python__run_python, parked for approval", "calc", "parked"),
        ("the printed approval command", "parked", "approved"),
        ("python__run_python again, its result", "approved", "ran"),
    ]
    print(f"load average before: {' '.join(f'{value:.2f}' for value in load_before)}")
    for label, begin, end in steps:
        if begin in times and end in times:
            print(f"{label:<46} {times[end] - times[begin]:7.2f} s")
        else:
            print(f"{label:<46} {'-':>7}")
    if resolving is not None:
        print(f"{'  of which pip resolving (measured after)':<46} {resolving:7.2f} s")
    if "serving" in times:
        serving = times["serving"] - times["cloned"]
        print(f"{'scripts/serve to serving':<46} {serving:7.2f} s  (target {TARGET_SERVING:.0f} s)")
    if "ran" in times:
        print(f"{'total':<46} {times['ran'] - times['start']:7.2f} s  (target {TARGET_TOTAL:.0f} s)")
    print(f"load average after: {' '.join(f'{value:.2f}' for value in load_after)}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.newcomer", description=__doc__)
    parser.add_argument("repository", nargs="?", default=str(REPO), help="what to clone (default: this checkout)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds each step may take (default 600)")
    parser.add_argument("--uv", metavar="PATH", help="also time `uv venv` and `uv pip install` with this uv")
    options = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    sys.exit(run(options.repository, options.timeout, options.uv))


if __name__ == "__main__":
    main()
