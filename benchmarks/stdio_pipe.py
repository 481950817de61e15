"""A line's round trip through a stdio server's pipes: as the gateway reads them, beside plain
blocking reads and writes (the reference).

Run `python -m benchmarks.stdio_pipe [--trips 4000] [--rounds 5]` from the repository root. The
server is `cat`, which answers each line at once, so what is measured is the pipes and the
reading, not a server. Two ways, alternating by round:

- **the gateway's reader**: the child spawned by `gateway.upstreams.spawn`, a reader task that
  receives its output and wakes the caller waiting for the line, as the stdio transport hands an
  answer to a waiting call; the caller then does a little work of its own before the next line;
- **blocking**: the same child, `os.write` then `os.read` until the line is back, no event loop.
  It is a reference, not a floor: a blocking read puts the process to sleep at once, and waking it
  costs more than an event loop that finds the answer already there.

Prints the p50 round trip and this process's CPU per round trip, median and range over the rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from collections.abc import Sequence
from typing import TextIO

import anyio

from benchmarks.gateway_latency import spread
from gateway.upstreams.spawn import spawn

LINE = b'{"jsonrpc":"2.0","id":"gw-1","result":{"content":[{"type":"text","text":"hello"}]}}\n'


def _callers_work() -> int:
    """What a call does with its answer before it sends the next line (a few microseconds)."""
    return sum(range(300))


async def through_reader(trips: int, errlog: TextIO) -> tuple[float, float]:
    """p50 round trip and CPU per round trip (both us) through the gateway's pipe reader."""
    process = spawn(["cat"], dict(os.environ), errlog, None)
    answered = anyio.Event()

    async def reader() -> None:
        pending = b""
        while True:
            pending += await process.stdout.receive()
            while b"\n" in pending:
                _, pending = pending.split(b"\n", 1)
                answered.set()

    samples = []
    async with anyio.create_task_group() as group:
        group.start_soon(reader)
        cpu = time.process_time()
        for _ in range(trips):
            answered = anyio.Event()
            began = time.perf_counter()
            await process.stdin.send(LINE)
            await answered.wait()
            samples.append(time.perf_counter() - began)
            _callers_work()
        cpu = time.process_time() - cpu
        group.cancel_scope.cancel()
    await process.aclose()
    return statistics.median(samples) * 1e6, cpu / trips * 1e6


def blocking(trips: int) -> tuple[float, float]:
    """The same round trips with blocking `os.write` and `os.read`."""
    child = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert child.stdin is not None and child.stdout is not None
    to_child, from_child = child.stdin.fileno(), child.stdout.fileno()
    samples = []
    cpu = time.process_time()
    for _ in range(trips):
        began = time.perf_counter()
        os.write(to_child, LINE)
        received = b""
        while not received.endswith(b"\n"):
            received += os.read(from_child, 65536)
        samples.append(time.perf_counter() - began)
        _callers_work()
    cpu = time.process_time() - cpu
    child.stdin.close()
    child.wait()
    child.stdout.close()
    return statistics.median(samples) * 1e6, cpu / trips * 1e6


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trips", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    reader: list[tuple[float, float]] = []
    blocked: list[tuple[float, float]] = []
    with open(os.devnull, "w") as errlog:
        for _ in range(args.rounds):
            reader.append(anyio.run(through_reader, args.trips, errlog, backend_options={"use_uvloop": True}))
            blocked.append(blocking(args.trips))
    print(f"a line through cat and back, {args.trips} trips a round, {args.rounds} rounds: median [min-max]")
    print("| way | p50 round trip | CPU a round trip (this process) |")
    print("|---|---|---|")
    for name, figures in (("the gateway's reader", reader), ("blocking reads and writes", blocked)):
        trip, cpu = spread([f[0] for f in figures], ".1f", " us"), spread([f[1] for f in figures], ".1f", " us")
        print(f"| {name} | {trip} | {cpu} |")


if __name__ == "__main__":
    main()
