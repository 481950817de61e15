"""Docker fixtures: skip docker tests when Docker or the image is missing (fail under CI=true), check for leftovers."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import docker
import docker.errors
import pytest
from docker import DockerClient

from gateway.sandbox import DEFAULT_IMAGE, DockerSandbox
from gateway.sandbox.containers import DOCKER_ERRORS
from gateway.sandbox.hardening import LABEL_SCOPE
from gateway.sandbox.sweeper import scope_filter

IMAGE = os.environ.get("MCP_GATEWAY_SANDBOX_IMAGE", DEFAULT_IMAGE)
# Every container these tests start carries this run's own scope, so test runs sharing a daemon
# neither count nor sweep each other's containers.
SCOPE = f"test-{uuid.uuid4().hex[:12]}"
LABELS = {LABEL_SCOPE: SCOPE}
# Bound on any one wait: far above the few seconds things take, so only a hang trips it, even on a
# host busy with other work.
WAIT = 60
COUNTER_SERVER = Path(__file__).with_name("counter_server.py")


def _connect() -> tuple[DockerClient | None, str]:
    """A client for the local daemon, or why the docker tests cannot run."""
    try:
        client = docker.from_env()
        client.ping()
    except DOCKER_ERRORS as error:
        return None, f"Docker is not reachable ({error}); start it with `bash .ci/docker.sh`"
    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        return None, f"sandbox image {IMAGE} is missing; build it with `bash .ci/docker.sh`"
    return client, ""


@pytest.fixture(scope="session")
def docker_client() -> Iterator[DockerClient]:
    """The daemon's client; under CI=true a missing daemon or image fails instead of skipping."""
    client, problem = _connect()
    if client is None:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    yield client
    client.close()


@pytest.fixture(autouse=True)
def _no_sandbox_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """Docker tests need the daemon, and must leave no container of ours behind."""
    if request.node.get_closest_marker("docker") is None:
        yield
        return
    client: DockerClient = request.getfixturevalue("docker_client")
    before = sandbox_ids(client)
    yield
    leftovers = sandbox_ids(client) - before
    for container_id in leftovers:
        client.containers.get(container_id).remove(force=True)  # so one leak does not fail later tests
    assert not leftovers, f"sandbox containers left behind: {sorted(leftovers)}"


def sandbox_ids(client: DockerClient) -> set[str]:
    """Ids of this test run's sandbox containers, running or not."""
    # Sparse: ids from the listing alone, with no inspection that a container removed meanwhile would fail.
    listed = client.containers.list(all=True, filters={"label": scope_filter(SCOPE)}, sparse=True)
    return {str(c.id) for c in listed}


@pytest.fixture
def anyio_backend() -> str:
    """The gateway runs on asyncio."""
    return "asyncio"


@pytest.fixture
async def sandbox(docker_client: DockerClient) -> AsyncIterator[DockerSandbox]:
    """A sandbox with a one-container warm pool, closed (all containers removed) after the test."""
    box = DockerSandbox(IMAGE, warm_size=1, scope=SCOPE)
    yield box
    await box.close()


def make_workspace(root: Path, name: str) -> Path:
    """A host directory the sandbox user (nobody) may read and write, holding the counter server."""
    workspace = root / name
    workspace.mkdir()
    workspace.chmod(0o777)
    shutil.copy(COUNTER_SERVER, workspace / "counter_server.py")
    (workspace / "counter_server.py").chmod(0o644)
    return workspace
