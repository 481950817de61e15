"""The npm packages `.ci/node.sh` installs outside git: where they are, and what a test does without them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# Keep in step with NODE_PREFIX in .ci/node.sh.
NODE_PREFIX = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mcp-gateway" / "node"


def node_command(name: str) -> Path | None:
    """The installed command `name` (e.g. `conformance`), or None when Node or the package is missing."""
    command = NODE_PREFIX / "node_modules" / ".bin" / name
    if shutil.which("node") is None or not command.exists():
        return None
    return command


def require_node_command(name: str) -> Path:
    """The command `name` for a test: skipped when missing, failed instead under CI=true."""
    command = node_command(name)
    if command is None:
        problem = f"{name} is not installed under {NODE_PREFIX}; run `bash .ci/node.sh`"
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    return command


def require_node_package(name: str) -> Path:
    """The installed package directory `name` (e.g. `oidc-provider`) for a test: skipped when missing,
    failed instead under CI=true."""
    directory = NODE_PREFIX / "node_modules" / name
    if shutil.which("node") is None or not directory.is_dir():
        problem = f"the npm package {name} is not installed under {NODE_PREFIX}; run `bash .ci/node.sh`"
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    return directory
