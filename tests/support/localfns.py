"""Local Python tools for tests: plain functions registered by reference, and `@tool`-marked ones.

`greet` and `divide` are plain functions (register them as `tests.support.localfns:greet`);
the `@tool` functions are what registering the module `tests.support.localfns` picks up.
"""

from __future__ import annotations

import os
import time
from typing import Literal

from gateway.upstreams.localtools import tool


def greet(name: str, punctuation: Literal["!", "."] = ".") -> str:
    """Greet someone by name.

    Args:
        name: who to greet
        punctuation: how the greeting ends
    """
    return f"Hello, {name}{punctuation}"


def divide(numerator: float, denominator: float) -> float:
    """Divide one number by another.

    :param numerator: the number divided
    :param denominator: the number to divide by
    """
    return numerator / denominator


@tool(read_only=True)
def word_count(text: str) -> dict[str, int]:
    """Count the words of a text.

    Args:
        text: the text to count
    """
    return {"words": len(text.split())}


@tool
def explode(message: str) -> str:
    """Fail with `message`, as operator code sometimes does."""
    raise RuntimeError(message)


@tool(read_only=True)
def nap(seconds: float) -> str:
    """Block the calling thread for `seconds` (a function that ignores deadlines)."""
    time.sleep(seconds)
    return f"napped {seconds}"


@tool(read_only=True)
def process_id() -> int:
    """The id of the process that runs the local tools (the gateway itself)."""
    return os.getpid()


READS: list[str] = []
"""Every path `read_setting` was asked for, so a test can count how often it ran."""


@tool(read_only=True)
def read_setting(path: str) -> str:
    """Read a setting from a file (fails with the OS error when the file is missing)."""
    READS.append(path)
    with open(path) as file:
        return file.read()
