"""Resource limits and the hardened docker-py `create` arguments for every sandbox container (pure)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gateway.config.limits import MiB, SandboxLimits

DEFAULT_IMAGE = "mcp-gateway-sandbox:latest"

LABEL_SANDBOX = "io.mcp-gateway.sandbox"
LABEL_DEADLINE = "io.mcp-gateway.deadline"
# Which gateway (or test run) owns a container, so sweeps on a shared host touch only their own.
LABEL_SCOPE = "io.mcp-gateway.scope"
# The gateway process that started a container (`gateway.runtime.owners`): a start-up sweep spares a live one's.
LABEL_OWNER = "io.mcp-gateway.owner"
WORKSPACE_DIR = "/workspace"
TMP_DIR = "/tmp"

_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": MiB, "g": 1024 * MiB}


def parse_size(text: str | int) -> int:
    """Bytes from an int or a size such as `256m`, `64MiB` or `1g`; ValueError says what is wrong."""
    if isinstance(text, int):
        return text
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a size (examples: 256m, 64MiB, 1g)")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def sandbox_labels(expires_at: float, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The labels that mark a container as ours and say when the sweeper may remove it."""
    return {**(extra or {}), LABEL_SANDBOX: "1", LABEL_DEADLINE: str(math.ceil(expires_at))}


def container_kwargs(
    image: str,
    command: Sequence[str],
    limits: SandboxLimits,
    labels: Mapping[str, str],
    workspace: Path | None,
    *,
    now: float,
    lifetime: float,
) -> dict[str, Any]:
    """Keyword arguments for `client.containers.create` of a hardened container living `lifetime` s."""
    # docker-py loads when a container is about to start, not when the gateway starts.
    from docker.types import LogConfig, Ulimit

    volumes = {}
    if workspace is not None:
        volumes[str(workspace.resolve())] = {"bind": WORKSPACE_DIR, "mode": "rw"}
    return {
        "image": image,
        # Dead-man's switch: even if the gateway dies and nobody sweeps, the payload is killed.
        "command": ["timeout", "-s", "KILL", str(math.ceil(lifetime)), *command],
        "labels": sandbox_labels(now + lifetime, labels),
        "network_mode": "none",
        "read_only": True,
        "tmpfs": {TMP_DIR: f"rw,nosuid,nodev,noexec,size={limits.tmpfs},mode=1777"},
        "environment": {"HOME": TMP_DIR, "TMPDIR": TMP_DIR},
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "pids_limit": limits.pids,
        "mem_limit": limits.memory,
        # Equal to mem_limit: no swap, so a hog is killed instead of thrashing the host.
        "memswap_limit": limits.memory,
        "nano_cpus": int(limits.cpus * 1_000_000_000),
        "user": limits.user,
        "ulimits": [
            Ulimit(name="nofile", soft=limits.nofile, hard=limits.nofile),
            Ulimit(name="fsize", soft=limits.fsize, hard=limits.fsize),
        ],
        "init": True,
        # Output travels only through the attached socket; no driver may store it unbounded.
        "log_config": LogConfig(type="none"),
        "volumes": volumes,
        "working_dir": WORKSPACE_DIR if workspace is not None else TMP_DIR,
        # Not detached and stdin open: docker-py then sets StdinOnce, so closing our attach ends stdin.
        "stdin_open": True,
        "tty": False,
        "hostname": "sandbox",
    }
