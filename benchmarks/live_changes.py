"""Live changes under load: every kind of change made while N sessions call, and what the calls met.

Run `python -m benchmarks.live_changes [--sessions N] [--settle S]` from the repository root. It
starts `python -m gateway serve` (authentication on, an admin API key) with a stdio upstream from
the config file, `work`, and one registered through the admin API, `reg`, both `benchmarks.marker`:
each call carries an id no other call has, the server writes it to a file before answering, and
the answer names the id and the server's process. N SDK clients over streamable HTTP (event-stream
responses) call `work__mark` and `reg__mark` in turn without pause. Meanwhile, one after another,
with S seconds of calls after each has taken effect: a restart of `work` (the admin API), an edit of
the config file changing only `work`'s `timeout`, one changing its `args` (a new connection), a
tags-only PATCH of `reg`, registering a third server and deleting it, and an edit of each other
section that reloads live (roles, groups, auth, registration, and a skill folder). Before them, a
window of S seconds without a change is the reference.

For each change, over the calls running at any time from its start until S seconds after it took
effect: calls failed, calls duplicated (the id written twice: a call that reached a server twice),
wrong answers (another id), the longest wait of a call, and how many processes of the changed server
answered them. Targets: 0 failed, 0 duplicated, 0 wrong. It exits 1 when one is missed.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from benchmarks.gateway_latency import REPO, _interrupt, free_port, started, wait_until_ready
from benchmarks.load_faults import error_kind

KEY = "live-changes-admin-key-0123456789"
# Sessions opening at once: a burst of hundreds of handshakes would measure the handshake, not the calls.
OPENING_AT_ONCE = 16
# Beyond the gateway's own call deadline (60 s): a call still waiting then froze.
ANSWER_TIMEOUT = 90.0
OPEN_TIMEOUT = 120.0
# How long a change may take to show its effect before the run is called off.
APPLY_TIMEOUT = 60.0
# What the gateway logs once it applied an edited config file (gateway/service.py, `reload`).
RELOADED = "configuration reloaded from"


@dataclass(frozen=True, slots=True)
class Call:
    """One call of a session: which server, when it was sent and answered, and how it went."""

    server: str
    id: str
    started: float
    ended: float
    pid: str | None
    error: str | None = None
    wrong: bool = False


@dataclass(frozen=True, slots=True)
class Change:
    """A change made under load: its name, the server it concerns, when it was made, took effect, its window ended."""

    name: str
    server: str | None
    started: float
    applied: float
    ended: float


@dataclass(frozen=True, slots=True)
class Figures:
    """What the calls running during one change came to."""

    change: Change
    calls: int
    failed: int
    duplicated: int
    wrong: int
    longest_wait: float
    processes: int | None
    errors: Counter[str]


@dataclass(slots=True)
class Load:
    """The calls made so far, the processes each server answered from, and what sessions could not open."""

    calls: list[Call] = field(default_factory=list)
    pids: dict[str, set[str]] = field(default_factory=dict)
    open_failures: Counter[str] = field(default_factory=Counter)
    client_errors: int = 0


@dataclass(frozen=True, slots=True)
class Result:
    """One run: each change's figures, then the whole run's calls, seconds and what its logs held."""

    figures: list[Figures]
    calls: int
    seconds: float
    open_failures: Counter[str]
    client_errors: int
    gateway_errors: list[str]


class _Count(logging.Filter):
    """Counts a logger's records and drops them."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def filter(self, record: logging.LogRecord) -> bool:
        self.count += 1
        return False


class Setup:
    """The gateway's config file, its marks file and skill folder, and the edits the run makes to them."""

    def __init__(self, directory: Path, sessions: int) -> None:
        self.directory = directory
        self.path = directory / "gateway.yaml"
        self.marks = directory / "marks"
        self.skills = directory / "skills"
        self.document: dict[str, Any] = {
            "gateway": {
                "data_dir": str(directory / "data"),
                "max_sessions_per_caller": sessions + 16,
                "skill_dirs": [str(self.skills)],
            },
            # Required, so that `/readyz` answers 200 only once its tool is listed.
            "servers": {"work": {**self.server(), "required": True}},
            "auth": {"api_keys": [{"caller": "bench", "role": "admin", "key": KEY}]},
            "roles": {"admin": {"allow": ["*"], "admin": True}},
            "groups": {"marking": {"allow": ["work__*"]}},
            "registration": {"allow_commands": [sys.executable], "sandbox_stdio": False},
        }
        self.write_skill("first")
        self.write()

    def server(self, *extra: str) -> dict[str, Any]:
        """A config entry of the marker server writing to the marks file."""
        return {
            "command": sys.executable,
            "args": ["-m", "benchmarks.marker", str(self.marks), *extra],
            "cwd": str(REPO),
        }

    def write(self) -> None:
        """Write the config file as the document stands, replacing it in one step as editors do."""
        draft = self.directory / "gateway.yaml.new"
        draft.write_text(yaml.safe_dump(self.document), encoding="utf-8")
        os.replace(draft, self.path)

    def write_skill(self, name: str) -> None:
        """Write a skill folder offering `work__mark`."""
        folder = self.skills / name
        folder.mkdir(parents=True, exist_ok=True)
        front = f"name: {name}\ndescription: Marks things ({name}).\nallowed-tools: work__mark\n"
        (folder / "SKILL.md").write_text(f"---\n{front}---\n# {name}\n\nCall work__mark.\n", encoding="utf-8")


async def call_until(client: Client, index: int, servers: Sequence[str], stop: anyio.Event, load: Load) -> None:
    """Call each server's `mark` in turn, each call with an id of its own, until `stop` is set."""
    nonce = secrets.token_hex(3)
    number = 0
    while not stop.is_set():
        server = servers[number % len(servers)]
        call_id = f"{index}.{nonce}.{number}"
        number += 1
        started_at = time.perf_counter()
        pid: str | None = None
        error: str | None = None
        wrong = False
        try:
            with anyio.fail_after(ANSWER_TIMEOUT):
                result = await client.call_tool(f"{server}__mark", {"id": call_id})
        except TimeoutError:
            error = f"no answer within {ANSWER_TIMEOUT:g} s"
        except Exception as failure:
            error = f"{type(failure).__name__}: {error_kind(str(failure))}"
        else:
            answer = " ".join(getattr(block, "text", "") for block in result.content)
            if result.is_error:
                error = f"tool error: {error_kind(answer.replace(call_id, '<id>'))}"
            else:
                answered, _, pid = answer.partition(" ")
                wrong = answered != call_id
                load.pids.setdefault(server, set()).add(pid)
        load.calls.append(Call(server, call_id, started_at, time.perf_counter(), pid, error, wrong))


class Bench:
    """The running gateway seen from outside: its admin API, its log, and the edits of its config file."""

    def __init__(self, setup: Setup, base: str, log: Path, load: Load, settle: float) -> None:
        self.setup = setup
        self.base = base
        self.log = log
        self.load = load
        self.settle = settle
        self.changes: list[Change] = []

    def reloads(self) -> int:
        """How many times the gateway has applied its config file."""
        return self.log.read_text(encoding="utf-8", errors="replace").count(RELOADED)

    async def until(self, what: str, condition: Callable[[], Awaitable[bool]]) -> None:
        """Wait, polling, until `condition` holds; call the run off when it does not within APPLY_TIMEOUT."""
        with anyio.move_on_after(APPLY_TIMEOUT):
            # What is polled is seen from outside the gateway (its API, its log, answers): no event to wait on.
            while True:
                if await condition():
                    return
                await anyio.sleep(0.05)
        raise SystemExit(f"{what}: no effect within {APPLY_TIMEOUT:g} s; see {self.log}")

    async def change(self, name: str, server: str | None, make: Callable[[], Awaitable[None]]) -> None:
        """Make one change, wait for its effect, then let the calls go on for `settle` seconds."""
        started_at = time.perf_counter()
        await make()
        applied = time.perf_counter()
        await anyio.sleep(self.settle)
        self.changes.append(Change(name, server, started_at, applied, time.perf_counter()))

    async def reference(self) -> None:
        """A window of `settle` seconds without a change."""
        started_at = time.perf_counter()
        await anyio.sleep(self.settle)
        self.changes.append(Change("none (reference)", None, started_at, started_at, time.perf_counter()))

    async def edit(self, edit: Callable[[], None]) -> None:
        """Edit the config file (or a skill folder) and wait until the gateway applied it."""
        before = self.reloads()
        edit()
        self.setup.write()

        async def reloaded() -> bool:
            return self.reloads() > before

        await self.until("the edit", reloaded)

    def processes(self, server: str) -> set[str]:
        """The process ids of `server` that answered a call so far."""
        return set(self.load.pids.get(server, ()))

    async def new_process(self, server: str, known: set[str]) -> None:
        """Wait until a process of `server` not among `known` answers a call."""

        async def answered() -> bool:
            return bool(self.load.pids.get(server, set()) - known)

        await self.until(f"a new process of {server}", answered)

    async def run(self, http: httpx2.AsyncClient) -> None:
        """The reference window, then every change in turn."""
        setup = self.setup
        work = setup.document["servers"]["work"]

        async def admin(method: str, path: str, expected: int, body: dict[str, Any] | None = None) -> None:
            response = await http.request(method, path, json=body)
            if response.status_code != expected:
                raise SystemExit(f"{method} {path}: {response.status_code} {response.text}")

        async def restart() -> None:
            known = self.processes("work")
            await admin("POST", "/api/v1/servers/work/restart", 202, {})
            await self.new_process("work", known)

        async def edit_timeout() -> None:
            await self.edit(lambda: work.update(timeout=45))

        async def edit_args() -> None:
            known = self.processes("work")
            await self.edit(lambda: work.update(args=setup.server("--edition", "2")["args"]))
            await self.new_process("work", known)

        async def patch_tags() -> None:
            await admin("PATCH", "/api/v1/servers/reg", 200, {"tags": ["patched"]})

        async def register() -> None:
            await admin("POST", "/api/v1/servers", 201, {"name": "extra", **setup.server()})

            async def listed() -> bool:
                return (await http.get("/api/v1/tools/extra__mark")).status_code == 200

            await self.until("registering a server", listed)

        async def delete() -> None:
            await admin("DELETE", "/api/v1/servers/extra", 204)

        document = setup.document

        async def roles() -> None:
            await self.edit(lambda: document["roles"].update(viewer={"allow": ["work__*"]}))

        async def groups() -> None:
            await self.edit(lambda: document["groups"].update(other={"allow": ["reg__*"]}))

        async def auth() -> None:
            second = {"caller": "second", "role": "viewer", "key": "live-changes-viewer-key-0123456789"}
            await self.edit(lambda: document["auth"]["api_keys"].append(second))

        async def registration() -> None:
            await self.edit(lambda: document["registration"].update(allow_urls=["https://*.example.com/**"]))

        async def skills() -> None:
            await self.edit(lambda: setup.write_skill("second"))

        # Calls first reach every session's connection and the servers' code paths warm.
        await anyio.sleep(self.settle)
        await self.reference()
        await self.change("restart (API)", "work", restart)
        await self.change("file: timeout only", "work", edit_timeout)
        await self.change("file: args (new connection)", "work", edit_args)
        await self.change("PATCH tags (registered)", "reg", patch_tags)
        await self.change("register a server", None, register)
        await self.change("delete a server", None, delete)
        await self.change("file: roles", None, roles)
        await self.change("file: groups", None, groups)
        await self.change("file: auth", None, auth)
        await self.change("file: registration", None, registration)
        await self.change("skill folder", None, skills)


async def drive(setup: Setup, base: str, log: Path, sessions: int, settle: float) -> tuple[Load, list[Change]]:
    """Register `reg`, open the sessions, let them call through the reference window and every change, close."""
    load = Load()
    headers = {"Authorization": f"Bearer {KEY}"}
    opening = anyio.Semaphore(OPENING_AT_ONCE)
    settled = [0]
    all_settled, stop = anyio.Event(), anyio.Event()
    servers = ("work", "reg")

    async def session(index: int) -> None:
        async with AsyncExitStack() as stack:
            try:
                async with opening:
                    http = await stack.enter_async_context(
                        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=ANSWER_TIMEOUT))
                    )
                    transport = streamable_http_client(f"{base}/mcp", http_client=http)
                    client = await stack.enter_async_context(Client(transport, mode="legacy"))
            except Exception as failure:
                load.open_failures[f"{type(failure).__name__}: {error_kind(str(failure))}"] += 1
                return
            finally:
                settled[0] += 1
                if settled[0] == sessions:
                    all_settled.set()
            await call_until(client, index, servers, stop, load)

    # The SDK client logs a traceback for each message that reaches a session it is closing; count them instead.
    counter = _Count()
    sdk_log = logging.getLogger("mcp.client.streamable_http")
    sdk_log.addFilter(counter)
    bench = Bench(setup, base, log, load, settle)
    try:
        async with httpx2.AsyncClient(base_url=base, headers=headers, timeout=APPLY_TIMEOUT) as http:
            registered = await http.post("/api/v1/servers", json={"name": "reg", **setup.server()})
            if registered.status_code != 201:
                raise SystemExit(f"registering reg: {registered.status_code} {registered.text}")

            async def reg_listed() -> bool:
                return (await http.get("/api/v1/tools/reg__mark")).status_code == 200

            await bench.until("registering reg", reg_listed)
            async with anyio.create_task_group() as group:
                for index in range(sessions):
                    group.start_soon(session, index)
                with anyio.fail_after(OPEN_TIMEOUT):
                    await all_settled.wait()
                try:
                    await bench.run(http)
                finally:
                    stop.set()
    finally:
        sdk_log.removeFilter(counter)
    load.client_errors = counter.count
    return load, bench.changes


def figures(change: Change, load: Load, marked: Counter[str]) -> Figures:
    """The calls running at any time during `change`'s window, counted."""
    during = [call for call in load.calls if call.started < change.ended and call.ended > change.started]
    answered = {call.pid for call in during if call.server == change.server and call.pid is not None}
    return Figures(
        change,
        calls=len(during),
        failed=sum(call.error is not None for call in during),
        duplicated=sum(marked[call.id] > 1 for call in during),
        wrong=sum(call.wrong for call in during),
        longest_wait=max((call.ended - call.started for call in during), default=0.0),
        processes=len(answered) if change.server is not None else None,
        errors=Counter(call.error for call in during if call.error is not None),
    )


def run(sessions: int, settle: float) -> Result:
    """One run on a fresh gateway subprocess, stopped before this returns."""
    with tempfile.TemporaryDirectory(prefix="gateway-live-") as temp:
        directory = Path(temp)
        setup = Setup(directory, sessions)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        log = directory / "gateway.log"
        command = [sys.executable, "-m", "gateway", "--log-level", "info", "serve"]
        command += ["--config", str(setup.path), "--port", str(port)]
        with started(command, log=log) as gateway:
            wait_until_ready(gateway, f"{base}/readyz", log)
            started_at = time.perf_counter()
            load, changes = anyio.run(drive, setup, base, log, sessions, settle)
            seconds = time.perf_counter() - started_at
            if gateway.poll() is not None:
                raise SystemExit(f"the gateway exited during the run; see {log}")
        marked = Counter(line.split(" ", 1)[0] for line in setup.marks.read_text().splitlines())
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    gateway_errors = [line for line in lines if " ERROR " in line or line.startswith("Traceback")]
    return Result(
        [figures(change, load, marked) for change in changes],
        len(load.calls),
        seconds,
        load.open_failures,
        load.client_errors,
        gateway_errors,
    )


def report(result: Result, sessions: int, settle: float, load: float) -> str:
    """The table of changes, then what failed and what the logs held."""
    rows = [
        f"{sessions} sessions calling two stdio servers in turn, {settle:g} s of calls after each change took effect, "
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load average {load:.2f} before the run",
        f"{result.calls} calls in {result.seconds:.0f} s ({result.calls / result.seconds:.0f}/s)",
        "",
        f"{'change':<30} {'took effect':>11} {'calls':>7} {'failed':>7} {'duplicated':>10} {'wrong':>6} "
        f"{'longest wait':>12} {'processes':>9}",
    ]
    for entry in result.figures:
        change = entry.change
        processes = "-" if entry.processes is None else str(entry.processes)
        rows.append(
            f"{change.name:<30} {change.applied - change.started:>9.2f} s {entry.calls:>7} {entry.failed:>7} "
            f"{entry.duplicated:>10} {entry.wrong:>6} {entry.longest_wait:>10.2f} s {processes:>9}"
        )
    rows.append(
        "(calls running at any time from the change until the window's end; processes: of the changed server, "
        "that answered them)"
    )
    for entry in result.figures:
        if entry.errors:
            rows.append(f"{entry.change.name}: errors by kind:")
            rows += [f"  {count:>6}  {kind}" for kind, count in entry.errors.most_common()]
    if result.open_failures:
        rows.append("sessions that could not open:")
        rows += [f"  {count:>6}  {kind}" for kind, count in result.open_failures.most_common()]
    if result.client_errors:
        rows.append(f"the SDK client logged {result.client_errors} messages that reached a closing session")
    rows.append(f"error lines in the gateway's log: {len(result.gateway_errors)}")
    rows += [f"  {line[:160]}" for line in result.gateway_errors[:10]]
    missed = missed_targets(result)
    rows += ["", f"failed / duplicated / wrong (targets 0 / 0 / 0): {'met' if not missed else 'MISSED: ' + missed}"]
    return "\n".join(rows)


def missed_targets(result: Result) -> str:
    """The targets the run missed, named; empty when it met them all."""
    totals = {
        "failed": sum(entry.failed for entry in result.figures),
        "duplicated": sum(entry.duplicated for entry in result.figures),
        "wrong": sum(entry.wrong for entry in result.figures),
    }
    return ", ".join(f"{count} {what}" for what, count in totals.items() if count)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options, run, print the table; exit 1 when a target is missed."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.live_changes", description=__doc__)
    parser.add_argument("--sessions", type=int, default=100, help="concurrent sessions (default 100)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds of calls after each change (default 5)")
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= 2000 or not 0 < args.settle <= 600:
        parser.error("--sessions must be 1 to 2000 and --settle above 0, at most 600")
    signal.signal(signal.SIGTERM, _interrupt)
    load = os.getloadavg()[0]
    try:
        result = run(args.sessions, args.settle)
    except KeyboardInterrupt:
        return 130
    print(report(result, args.sessions, args.settle, load))
    return 1 if missed_targets(result) else 0


if __name__ == "__main__":
    sys.exit(main())
