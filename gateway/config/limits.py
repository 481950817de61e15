"""What one sandbox container may use, as the configuration states it and the sandbox enforces it.

Light on purpose: the sandbox's hardening and the command line read it without the rest of the configuration.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.errors import ConfigError

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """What one sandbox container may use; sizes in bytes, times in seconds."""

    memory: int = 256 * MiB
    cpus: float = 1.0
    pids: int = 64
    tmpfs: int = 64 * MiB
    nofile: int = 256
    fsize: int = 64 * MiB
    deadline: float = 30.0
    max_output: int = 1 * MiB
    user: str = "65534:65534"
    lifetime: float = 3600.0

    def __post_init__(self) -> None:
        problems = {
            "memory": self.memory < 16 * MiB and "must be at least 16 MiB",
            "cpus": self.cpus <= 0 and "must be positive",
            "pids": self.pids < 4 and "must be at least 4 (the init, timeout, server and one child)",
            # tmpfs pages are charged to the container's memory cgroup, so a full /tmp
            # must still leave room for the process itself.
            "tmpfs": not 0 < self.tmpfs < self.memory and "must be positive and smaller than memory",
            "nofile": self.nofile < 16 and "must be at least 16",
            "fsize": self.fsize <= 0 and "must be positive",
            "deadline": self.deadline <= 0 and "must be positive",
            "max_output": self.max_output <= 0 and "must be positive",
            "user": (self.user.split(":")[0] in ("", "0", "root")) and "must name a non-root user",
            "lifetime": self.lifetime < self.deadline and "must be at least the deadline",
        }
        for field_name, problem in problems.items():
            if problem:
                raise ConfigError("sandbox limits", field_name, f"{getattr(self, field_name)!r} {problem}")
