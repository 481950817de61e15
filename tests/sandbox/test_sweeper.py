"""The sweeper removes our containers past their deadline, and at start-up those whose gateway is gone."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from docker import DockerClient

from gateway.config.limits import SandboxLimits
from gateway.runtime import owners
from gateway.sandbox.containers import launch
from gateway.sandbox.hardening import LABEL_OWNER, container_kwargs
from gateway.sandbox.sweeper import sweep, sweep_all
from tests.sandbox.conftest import IMAGE, LABELS, SCOPE, sandbox_ids

pytestmark = [pytest.mark.docker]


def start(client: DockerClient, started_ago: float, lifetime: float, owner: str | None = None) -> str:
    """Start a waiting container whose deadline label lies `lifetime - started_ago` seconds ahead,
    labelled with `owner`'s token when given."""
    labels = {**LABELS, LABEL_OWNER: owner} if owner is not None else LABELS
    kwargs = container_kwargs(
        IMAGE, ["sleep", "60"], SandboxLimits(), labels, None, now=time.time() - started_ago, lifetime=lifetime
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


def test_a_start_up_sweep_spares_the_containers_of_a_gateway_still_running_and_removes_a_gone_one_s(
    docker_client: DockerClient,
) -> None:
    with (
        subprocess.Popen([sys.executable, "-c", "input()"], stdin=subprocess.PIPE) as other,
        subprocess.Popen([sys.executable, "-c", "input()"], stdin=subprocess.PIPE) as ended,
    ):
        gone = owners.token_of(ended.pid)
        ended.communicate(b"\n")
        running = start(docker_client, started_ago=0, lifetime=600, owner=owners.token_of(other.pid))
        start(docker_client, started_ago=0, lifetime=600, owner=gone)
        start(docker_client, started_ago=0, lifetime=600, owner=owners.own_token())
        assert sweep_all(docker_client, SCOPE) == 2
        assert sandbox_ids(docker_client) == {running}
        other.communicate(b"\n")
    assert sweep(docker_client, float("inf"), SCOPE) == 1


def test_a_sweep_of_one_scope_leaves_other_scopes_alone(docker_client: DockerClient) -> None:
    mine = start(docker_client, started_ago=100, lifetime=10)
    assert sweep_all(docker_client, f"{SCOPE}-other") == 0
    assert sandbox_ids(docker_client) == {mine}
    assert sweep_all(docker_client, SCOPE) == 1


def test_a_container_removed_while_the_sweep_lists_them_is_skipped_and_the_rest_swept(
    docker_client: DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The daemon removes `gone` after listing it and before the sweep inspects it, as when a warm
    # pool or a finished call removes its container meanwhile.
    gone = start(docker_client, started_ago=100, lifetime=10)
    start(docker_client, started_ago=100, lifetime=10)
    inspect = docker_client.api.inspect_container

    def removed_first(container_id: str) -> object:
        if container_id == gone:
            docker_client.api.remove_container(gone, force=True)
        return inspect(container_id)

    monkeypatch.setattr(docker_client.api, "inspect_container", removed_first)
    assert sweep(docker_client, time.time(), SCOPE) == 1
    assert sandbox_ids(docker_client) == set()
