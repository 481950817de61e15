"""The sweeper removes our containers past their deadline, and all of ours at start-up."""

from __future__ import annotations

import time

import pytest
from docker import DockerClient

from gateway.sandbox.containers import launch
from gateway.sandbox.hardening import SandboxLimits, container_kwargs
from gateway.sandbox.sweeper import sweep, sweep_all
from tests.sandbox.conftest import IMAGE, LABELS, SCOPE, sandbox_ids

pytestmark = [pytest.mark.docker]


def start(client: DockerClient, started_ago: float, lifetime: float) -> str:
    """Start a waiting container whose deadline label lies `lifetime - started_ago` seconds ahead."""
    kwargs = container_kwargs(
        IMAGE, ["sleep", "60"], SandboxLimits(), LABELS, None, now=time.time() - started_ago, lifetime=lifetime
    )
    handle = launch(client, kwargs)
    handle.keepalive.close()
    handle.socket.close()
    return handle.id


def test_sweeper_removes_expired_containers_and_keeps_live_ones(docker_client: DockerClient) -> None:
    expired = start(docker_client, started_ago=100, lifetime=10)
    live = start(docker_client, started_ago=0, lifetime=600)
    assert sweep(docker_client, time.time(), SCOPE) == 1
    assert sandbox_ids(docker_client) == {live}
    assert expired not in sandbox_ids(docker_client)
    assert sweep_all(docker_client, SCOPE) == 1
    assert sandbox_ids(docker_client) == set()


def test_a_sweep_of_one_scope_leaves_other_scopes_alone(docker_client: DockerClient) -> None:
    mine = start(docker_client, started_ago=100, lifetime=10)
    assert sweep_all(docker_client, f"{SCOPE}-other") == 0
    assert sandbox_ids(docker_client) == {mine}
    assert sweep_all(docker_client, SCOPE) == 1
