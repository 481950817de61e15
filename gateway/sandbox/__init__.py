"""Disposable, hardened Docker sandboxes for MCP servers that run untrusted code.

The image builder is `gateway.sandbox.image` (`build_image`, `main`); it is not imported here so
that `python -m gateway.sandbox.image` runs it cleanly. The names below load their module on first
use: docker-py costs start-up time that a gateway without sandboxed tools never needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gateway.config.limits import SandboxLimits
from gateway.errors import SandboxUnavailableError
from gateway.sandbox.hardening import DEFAULT_IMAGE, container_kwargs, parse_size

if TYPE_CHECKING:
    from gateway.sandbox.containers import ContainerStdio, RunResult, SandboxContainer, run_once
    from gateway.sandbox.pool import WarmPool
    from gateway.sandbox.source import DockerSandbox
    from gateway.sandbox.sweeper import sweep, sweep_all

_LAZY = {
    "ContainerStdio": "containers",
    "RunResult": "containers",
    "SandboxContainer": "containers",
    "run_once": "containers",
    "WarmPool": "pool",
    "DockerSandbox": "source",
    "sweep": "sweeper",
    "sweep_all": "sweeper",
}


def __getattr__(name: str) -> Any:
    """Import the module of a name not loaded yet (PEP 562), on its first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "DEFAULT_IMAGE",
    "ContainerStdio",
    "DockerSandbox",
    "RunResult",
    "SandboxContainer",
    "SandboxLimits",
    "SandboxUnavailableError",
    "WarmPool",
    "container_kwargs",
    "parse_size",
    "run_once",
    "sweep",
    "sweep_all",
]
