"""The official MCP server conformance suite, run against the reference server directly and through a
gateway that has it as its only upstream, unprefixed; prints per-scenario results and one summary line.

`python -m tests.interop.conformance` (scripts/conformance installs what it needs first). Exit 0 when
both runs happened, whatever they found; 1 when the suite could not run at all.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.support.harness import REPO, free_port
from tests.support.node import NODE_PREFIX, node_command

SUITE_TIMEOUT = 600.0
START_TIMEOUT = 60.0
RESULT_FOLDER = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


class CannotRun(Exception):
    """Something the run needs is missing or did not start."""


@dataclass(frozen=True)
class Outcome:
    """One scenario's checks: passed when none failed and at least one succeeded."""

    scenario: str
    succeeded: int
    failed: int
    reason: str

    @property
    def passed(self) -> bool:
        return self.failed == 0 and self.succeeded > 0


def read_results(folder: Path) -> dict[str, Outcome]:
    """Each scenario's outcome from the `checks.json` files the suite wrote under `folder`."""
    outcomes: dict[str, Outcome] = {}
    for result in sorted(folder.iterdir()):
        match = RESULT_FOLDER.match(result.name)
        checks_file = result / "checks.json"
        if match is None or not checks_file.exists():
            continue
        checks = json.loads(checks_file.read_text())
        failures = [check for check in checks if check.get("status") == "FAILURE"]
        reason = ""
        if failures:
            first = failures[0]
            reason = str(first.get("errorMessage") or first.get("description") or first.get("id"))
        succeeded = sum(check.get("status") == "SUCCESS" for check in checks)
        outcomes[match["scenario"]] = Outcome(match["scenario"], succeeded, len(failures), reason)
    return outcomes


def run_suite(suite: Path, url: str, folder: Path, scenarios: str) -> dict[str, Outcome]:
    """Every server scenario of the suite's `scenarios` set (`active` or `all`) against `url`; the
    suite's own exit code only says whether any failed."""
    folder.mkdir(parents=True)
    try:
        subprocess.run(
            [str(suite), "server", "--url", url, "--suite", scenarios, "--output-dir", str(folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=SUITE_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise CannotRun(f"the suite did not finish against {url} within {SUITE_TIMEOUT:.0f} s") from error
    outcomes = read_results(folder)
    if not outcomes:
        raise CannotRun(f"the suite wrote no results for {url}")
    return outcomes


def listens(port: int) -> Callable[[], bool]:
    """Whether something accepts connections on `port`."""

    def probe() -> bool:
        with socket.socket() as connection:
            return connection.connect_ex(("127.0.0.1", port)) == 0

    return probe


def ready(url: str) -> Callable[[], bool]:
    """Whether `url` answers 200 (a gateway's `/readyz`: its required servers are connected)."""

    def probe() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    return probe


@contextmanager
def started(command: list[str], is_ready: Callable[[], bool], log: Path) -> Iterator[None]:
    """`command` running until the block ends, once `is_ready` says so."""
    with log.open("wb") as output:
        process = subprocess.Popen(command, cwd=REPO, stdout=output, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not is_ready():
                if process.poll() is not None or time.monotonic() > deadline:
                    tail = log.read_text(errors="replace")[-2000:]
                    raise CannotRun(f"`{' '.join(command)}` did not get ready within {START_TIMEOUT:.0f} s:\n{tail}")
                time.sleep(0.1)
            yield
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def gateway_config(folder: Path, upstream_url: str) -> Path:
    """A config file with the reference server as the only upstream, under its own names."""
    entry = {"url": upstream_url, "required": True, "namespace": ""}
    config = {"gateway": {"data_dir": str(folder / "data")}, "servers": {"conformance": entry}}
    path = folder / "gateway.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _mark(outcome: Outcome | None) -> str:
    return "pass" if outcome is not None and outcome.passed else "FAIL"


def report(direct: dict[str, Outcome], through: dict[str, Outcome]) -> tuple[str, bool]:
    """The per-scenario lines and the summary line; and whether every scenario that passes directly
    also passes through the gateway."""
    scenarios = sorted(set(direct) | set(through))
    lines = []
    for scenario in scenarios:
        here, there = direct.get(scenario), through.get(scenario)
        reason = there.reason if there is not None and not there.passed else ""
        line = f"  {scenario:34} direct {_mark(here)}  gateway {_mark(there)}  {reason}"
        lines.append(line.rstrip())
    passed_through = sum(outcome.passed for outcome in through.values())
    passed_direct = sum(outcome.passed for outcome in direct.values())
    total = len(scenarios)
    lines.append(
        f"conformance: {passed_through}/{total} scenarios pass through the gateway (direct: {passed_direct}/{total})"
    )
    parity = all(
        through.get(name) is not None and through[name].passed for name, outcome in direct.items() if outcome.passed
    )
    return "\n".join(lines), parity


def run(folder: Path, scenarios: str) -> tuple[str, bool]:
    """Start the reference server and a gateway before it, run the suite against both, report."""
    suite = node_command("conformance")
    if suite is None:
        raise CannotRun(f"the conformance suite is not installed under {NODE_PREFIX}; run `bash .ci/node.sh`")
    reference_port, gateway_port = free_port(), free_port()
    reference_url = f"http://127.0.0.1:{reference_port}/mcp"
    reference = [sys.executable, "-m", "tests.support.conformance_server", "--port", str(reference_port)]
    with started(reference, listens(reference_port), folder / "reference.log"):
        config = gateway_config(folder, reference_url)
        gateway = [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port", str(gateway_port)]
        gateway_url = f"http://127.0.0.1:{gateway_port}"
        with started(gateway, ready(f"{gateway_url}/readyz"), folder / "gateway.log"):
            direct = run_suite(suite, reference_url, folder / "direct", scenarios)
            through = run_suite(suite, f"{gateway_url}/mcp", folder / "gateway", scenarios)
    return report(direct, through)


def main() -> int:
    """Run and print; keep the suite's files and the servers' logs under --keep when given."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=Path, help="a new folder for the suite's results and the servers' logs")
    parser.add_argument(
        "--suite",
        choices=("active", "all"),
        default="active",
        help="the suite's active scenarios (the default), or all of them, pending ones included",
    )
    options = parser.parse_args()
    try:
        if options.keep is not None:
            options.keep.mkdir(parents=True)
            text, parity = run(options.keep.resolve(), options.suite)
        else:
            with tempfile.TemporaryDirectory(prefix="conformance-") as folder:
                text, parity = run(Path(folder), options.suite)
    except (CannotRun, OSError) as error:
        print(f"conformance: cannot run: {error}", file=sys.stderr)
        return 1
    print(text)
    if not parity:
        print("conformance: a scenario that passes directly fails through the gateway", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
