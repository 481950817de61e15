"""A high-risk local tool that writes down every run, so that tests count executions exactly."""

from __future__ import annotations

from pathlib import Path

from gateway.upstreams.localtools import tool


@tool(destructive=True)
def launch(log: str, target: str = "moon") -> str:
    """Launch at `target`: appends one line to the file `log` each time it really runs."""
    with open(log, "a", encoding="utf-8") as file:
        file.write(target + "\n")
    return f"launched at {target}"


def launches(log: Path) -> list[str]:
    """The targets of every run written to `log`, in order."""
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []
