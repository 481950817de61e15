"""The memory of the gateway's whole process tree at 20 stdio upstreams, per kind of process.

Run `python -m benchmarks.process_tree [--rounds 3]` from the repository root. Each round starts
`python -m gateway serve` on the 20 upstreams of `catalog_scale` twice, once with the system watcher
(`setpriv` and `timeout`) and once with the Python launcher (a PATH without them, as on a host that
lacks them), in alternating order; once all 2,000 tools are listed it sums, over the gateway, the
watchers (its direct children) and the servers (everything below them): the processes, their RSS
(shared pages counted in each process, as `ps` shows them) and their PSS (shared pages divided
among the processes that map them: what the tree costs the machine). The load average is printed
with each round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2

from benchmarks.catalog_scale import CATALOG_TIMEOUT, SERVERS, TOOLS, RawSession, gateway_config
from benchmarks.gateway_latency import children_of, free_port, started

KINDS = ("gateway", "watchers", "servers")
WATCHERS = {"setpriv and timeout": None, "Python launcher": ""}
"""Each watcher by the PATH the gateway runs with (None: this one's)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """What the processes of one kind hold."""

    processes: int
    rss_mb: float
    pss_mb: float


def memory_kb(pid: int) -> tuple[int, int]:
    """RSS and PSS of process `pid` in kB, from /proc/<pid>/smaps_rollup."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value = line.split(":", 1)
        fields[name] = int(value.split()[0])
    return fields["Rss"], fields["Pss"]


def usage(pids: list[int]) -> Usage:
    """The processes of `pids` added up."""
    sizes = [memory_kb(pid) for pid in pids]
    return Usage(len(pids), sum(rss for rss, _ in sizes) / 1024, sum(pss for _, pss in sizes) / 1024)


def below(pids: list[int]) -> list[int]:
    """Every descendant of `pids`."""
    found: list[int] = []
    pending = list(pids)
    while pending:
        children = children_of(pending.pop())
        found.extend(children)
        pending.extend(children)
    return found


async def tree(path: str | None, directory: Path) -> dict[str, Usage]:
    """The gateway on the 20 upstreams run with `path` as its PATH, measured once its catalog is full."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    command = [sys.executable, "-m", "gateway", "--log-level", "warning", "serve"]
    command += ["--config", str(gateway_config(directory)), "--port", str(port)]
    env = dict(os.environ) if path is None else {**os.environ, "PATH": path}
    with started(command, log=directory / "gateway.log", env=env) as gateway:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30)) as http:
            raw = RawSession(http, url)
            with anyio.fail_after(CATALOG_TIMEOUT):
                while not raw.opened or await raw.catalog_size() < SERVERS * TOOLS:
                    if gateway.poll() is not None:
                        raise SystemExit(f"the gateway exited early; see {directory / 'gateway.log'}")
                    try:
                        if not raw.opened:
                            await raw.open()
                    except (httpx2.HTTPError, KeyError):
                        pass
                    await anyio.sleep(0.2)
        watchers = children_of(gateway.pid)
        return {
            "gateway": usage([gateway.pid]),
            "watchers": usage(watchers),
            "servers": usage(below(watchers)),
        }


def main() -> None:
    """Measure `--rounds` rounds and print each, then the medians."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[dict[str, Usage]]] = {name: [] for name in WATCHERS}
    print(f"{'round':>5} {'watcher':<20} {'load':>5} " + " ".join(f"{kind + ' n/RSS/PSS MB':>26}" for kind in KINDS))
    for index in range(args.rounds):
        order = list(WATCHERS) if index % 2 == 0 else list(reversed(WATCHERS))
        for name in order:
            with tempfile.TemporaryDirectory() as directory:
                figures = anyio.run(tree, WATCHERS[name], Path(directory))
            results[name].append(figures)
            cells = " ".join(f"{u.processes:>6} {u.rss_mb:>9.1f} {u.pss_mb:>9.1f}" for u in figures.values())
            print(f"{index + 1:>5} {name:<20} {os.getloadavg()[0]:>5.2f} {cells}", flush=True)
    print("\nmedians (MB):")
    for name, rounds in results.items():
        parts = []
        for kind in ("watchers", "servers"):
            rss = statistics.median(r[kind].rss_mb for r in rounds)
            pss = statistics.median(r[kind].pss_mb for r in rounds)
            parts.append(f"{kind} RSS {rss:.1f} PSS {pss:.1f}")
        whole = statistics.median(sum(u.rss_mb for u in r.values()) for r in rounds)
        whole_pss = statistics.median(sum(u.pss_mb for u in r.values()) for r in rounds)
        count = rounds[0]["watchers"].processes
        each = statistics.median(r["watchers"].rss_mb / max(count, 1) for r in rounds)
        print(f"  {name}: {'; '.join(parts)}; per watcher RSS {each:.2f}; tree RSS {whole:.1f} PSS {whole_pss:.1f}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
