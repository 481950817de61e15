"""What an audit row costs a call: the wait on the caller's path and the CPU per row, as the gateway
writes rows (spooled, shipped in batches) beside a SQLite commit per row (the reference).

Run `python -m benchmarks.audit_rows [--rows 2000] [--rounds 3]` from the repository root. Each
round opens a fresh audit store in a temporary directory, as `gateway serve` opens it (SQLite,
`<data_dir>/audit.db`, the spool beside it), and records `--rows` rows two ways:

- **one at a time**: a call's other work is stood in for by a short sleep between rows, so the
  writer gets its turn as it does between real calls;
- **16 at once**: rows recorded by 16 tasks together, as calls that finish in the same turn of the
  event loop.

For each way it prints the p50 of `AuditStore.record` (what the caller waits for) and the
process's CPU per row over the run, the writer's shipments included. The reference is the same
store committing each row before `record` returns (what it does without `maintain`).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from benchmarks.gateway_latency import spread
from gateway.pipeline.audit import AuditEntry, AuditStore
from gateway.runtime.background import Background
from gateway.stores import StoreSettings

CONCURRENCY = 16
OTHER_WORK = 0.0005
"""Seconds between two rows recorded one at a time: the rest of a call."""


@dataclass(frozen=True, slots=True)
class Figures:
    """One way of writing rows, one round: the caller's wait (p50, us) and CPU per row (us)."""

    wait_us: float
    cpu_us: float


def _entry(n: int) -> AuditEntry:
    session = f"session-{n % CONCURRENCY}"
    return AuditEntry(time.time(), session, "alice", "echo__echo", "d" * 32, "ok", 1.2, "", f"r{n}")


async def _one_at_a_time(store: AuditStore, rows: int) -> Figures:
    waits = []
    cpu = time.process_time()
    for n in range(rows):
        began = time.perf_counter()
        await store.record(_entry(n))
        waits.append(time.perf_counter() - began)
        await anyio.sleep(OTHER_WORK)
    await store.recent(limit=1)  # every row shipped
    return Figures(statistics.median(waits) * 1e6, (time.process_time() - cpu) / rows * 1e6)


async def _together(store: AuditStore, rows: int) -> Figures:
    waits: list[float] = []

    async def one(n: int) -> None:
        began = time.perf_counter()
        await store.record(_entry(n))
        waits.append(time.perf_counter() - began)

    cpu = time.process_time()
    for start in range(0, rows, CONCURRENCY):
        async with anyio.create_task_group() as group:
            for n in range(start, min(start + CONCURRENCY, rows)):
                group.start_soon(one, n)
        await anyio.sleep(OTHER_WORK)
    await store.recent(limit=1)
    return Figures(statistics.median(waits) * 1e6, (time.process_time() - cpu) / rows * 1e6)


async def measure(rows: int, spooled: bool) -> tuple[Figures, Figures]:
    """Both ways on a fresh store; `spooled` runs its writer (`maintain`), as the gateway does."""
    with tempfile.TemporaryDirectory() as directory:
        store = AuditStore.open(StoreSettings(), Path(directory))
        try:
            async with anyio.create_task_group() as group:
                if spooled:
                    group.start_soon(store.maintain, Background().report)
                    await anyio.wait_all_tasks_blocked()
                figures = await _one_at_a_time(store, rows), await _together(store, rows)
                group.cancel_scope.cancel()
        finally:
            store.close()
    return figures


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    ways = {"spooled (the gateway)": True, "committed per row": False}
    results: dict[str, list[tuple[Figures, Figures]]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        # Alternating, so that a machine slowing down does not favour either.
        for name, spooled in ways.items():
            results[name].append(anyio.run(measure, args.rows, spooled, backend_options={"use_uvloop": True}))
    print(f"audit rows, SQLite, {args.rows} rows a way, {args.rounds} rounds: median [min-max]")
    print(f"| way | one at a time: wait | CPU a row | {CONCURRENCY} at once: wait | CPU a row |")
    print("|---|---|---|---|---|")
    for name, rounds in results.items():
        columns = [[r[0].wait_us for r in rounds], [r[0].cpu_us for r in rounds]]
        columns += [[r[1].wait_us for r in rounds], [r[1].cpu_us for r in rounds]]
        print(f"| {name} | " + " | ".join(spread(column, ".0f", " us") for column in columns) + " |")


if __name__ == "__main__":
    main()
