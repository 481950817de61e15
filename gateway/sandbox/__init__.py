"""Disposable, hardened Docker sandboxes for MCP servers that run untrusted code.

The image builder is `gateway.sandbox.image` (`build_image`, `main`); it is not imported here so
that `python -m gateway.sandbox.image` runs it cleanly.
"""

from gateway.sandbox.containers import ContainerStdio, RunResult, SandboxContainer, SandboxUnavailableError, run_once
from gateway.sandbox.hardening import DEFAULT_IMAGE, SandboxLimits, container_kwargs, parse_size
from gateway.sandbox.pool import WarmPool
from gateway.sandbox.source import DockerSandbox
from gateway.sandbox.sweeper import sweep, sweep_all

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
