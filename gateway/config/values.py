"""Single values of a configuration file made usable: durations, sizes, URLs and local paths.

Each function records a problem (path, text) instead of raising, so that one run reports every mistake.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from gateway.problems import JsonPath, Problem


def seconds(value: float | None, path: JsonPath, problems: list[Problem]) -> float | None:
    """A number from the file as a float (YAML gives ints for whole numbers); None if absent or unusable."""
    if value is None:
        return None
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    # The schema's bounds let NaN through (every comparison with it is false) and JSON integers exceed floats.
    if not math.isfinite(number):
        problems.append((path, "must be a finite number (not NaN, infinity or beyond 1e308)"))
        return None
    return number


def size_bytes(text: str, path: JsonPath, problems: list[Problem]) -> int | None:
    """Bytes in a Docker-style size such as 64m, or None after recording why `text` is not one."""
    # The schema's pattern ends in `$`, which also matches before a final newline.
    match = re.fullmatch(r"([0-9]{1,18})([bkmg]?)", text, re.IGNORECASE)
    if match is None:
        problems.append((path, "must be a size like 64m, 512k or 1g"))
        return None
    units = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    return int(match[1]) * units[match[2].lower()]


def url_path(url: str, path: JsonPath, problems: list[Problem]) -> str:
    """The path part of `url`, or "" after recording why it cannot be split (a bracket left open)."""
    try:
        return urlsplit(url).path
    except ValueError as error:
        problems.append((path, f"is not a valid URL: {error}"))
        return ""


def local_path(text: str, base_dir: Path, env: Mapping[str, str], path: JsonPath, problems: list[Problem]) -> Path:
    """A path from the file: `~` expanded, relative paths taken from the file's directory, normalised."""
    home = env.get("HOME")
    if home and (text == "~" or text.startswith("~/")):
        text = home + text[1:]
    try:
        expanded = Path(text).expanduser()
    except RuntimeError:
        problems.append((path, f"{text.split('/', 1)[0]!r} names no user whose home directory is known"))
        expanded = Path(text)
    return Path(os.path.normpath(base_dir / expanded))
