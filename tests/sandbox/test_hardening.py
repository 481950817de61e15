"""The hardened container arguments and the limits they come from (pure, no Docker needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.errors import ConfigError
from gateway.sandbox.hardening import (
    LABEL_DEADLINE,
    LABEL_SANDBOX,
    MiB,
    SandboxLimits,
    container_kwargs,
    parse_size,
)


def kwargs_for(workspace: Path | None = None, limits: SandboxLimits | None = None) -> dict[str, object]:
    return container_kwargs(
        "img:1", ["python3", "-c", "pass"], limits or SandboxLimits(), {"x": "y"}, workspace, now=1000.0, lifetime=60
    )


def test_container_drops_network_capabilities_and_privileges() -> None:
    kwargs = kwargs_for()
    assert kwargs["network_mode"] == "none"
    assert kwargs["read_only"] is True
    assert kwargs["cap_drop"] == ["ALL"]
    assert kwargs["security_opt"] == ["no-new-privileges"]
    assert kwargs["user"] == "65534:65534"
    assert kwargs["init"] is True
    assert kwargs["log_config"]["Type"] == "none"  # type: ignore[index]


def test_memory_has_no_swap_and_processes_are_capped() -> None:
    kwargs = kwargs_for(limits=SandboxLimits(memory=128 * MiB, tmpfs=32 * MiB, pids=32, cpus=0.5))
    assert kwargs["mem_limit"] == kwargs["memswap_limit"] == 128 * MiB
    assert kwargs["pids_limit"] == 32
    assert kwargs["nano_cpus"] == 500_000_000
    assert kwargs["tmpfs"] == {"/tmp": f"rw,nosuid,nodev,noexec,size={32 * MiB},mode=1777"}
    ulimits = {u["Name"]: u["Hard"] for u in kwargs["ulimits"]}  # type: ignore[attr-defined]
    assert ulimits == {"nofile": 256, "fsize": 64 * MiB}


def test_command_is_wrapped_in_a_kill_timeout_and_labelled_with_its_deadline() -> None:
    kwargs = kwargs_for()
    assert kwargs["command"] == ["timeout", "-s", "KILL", "60", "python3", "-c", "pass"]
    assert kwargs["labels"] == {"x": "y", LABEL_SANDBOX: "1", LABEL_DEADLINE: "1060"}


def test_only_the_workspace_is_mounted_and_it_becomes_the_working_dir(tmp_path: Path) -> None:
    assert kwargs_for()["volumes"] == {}
    assert kwargs_for()["working_dir"] == "/tmp"
    kwargs = kwargs_for(tmp_path)
    assert kwargs["volumes"] == {str(tmp_path): {"bind": "/workspace", "mode": "rw"}}
    assert kwargs["working_dir"] == "/workspace"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"tmpfs": 256 * MiB}, "tmpfs"),
        ({"user": "0:0"}, "user"),
        ({"user": "root"}, "user"),
        ({"pids": 0}, "pids"),
        ({"deadline": 10.0, "lifetime": 5.0}, "lifetime"),
    ],
)
def test_unsafe_limits_are_refused_with_the_field_named(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        SandboxLimits(**changes)  # type: ignore[arg-type]
    assert caught.value.path == field


@pytest.mark.parametrize(("text", "size"), [("256m", 256 * MiB), ("64MiB", 64 * MiB), ("1g", 1024 * MiB), (7, 7)])
def test_sizes_are_read_with_units(text: str | int, size: int) -> None:
    assert parse_size(text) == size


def test_a_size_without_a_number_is_refused() -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_size("lots")
