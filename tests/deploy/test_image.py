"""The gateway's own image (the top-level Dockerfile) serves the embedded defaults: an SDK client
lists the bundled skills through a container made from it."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from functools import partial

import anyio
import docker
import docker.errors
import httpx2
import pytest
from docker import DockerClient
from docker.models.containers import Container
from mcp import Client

from gateway.sandbox.containers import DOCKER_ERRORS
from gateway.sandbox.image import build_gateway_image
from tests.support.harness import REPO
from tests.support.skills import structured

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

TAG = f"mcp-gateway-test:{uuid.uuid4().hex[:12]}"
# Bounds that only a hang trips, far above what a loaded two-CPU machine takes.
BUILD_LIMIT = 1500
READY_LIMIT = 120
CALL_LIMIT = 60


@pytest.fixture
def docker_client() -> Iterator[DockerClient]:
    """The daemon's client; without a daemon the test skips (fails under CI=true)."""
    try:
        client = docker.from_env()
        client.ping()
    except DOCKER_ERRORS as error:
        problem = f"Docker is not reachable ({error}); start it with `bash .ci/docker.sh`"
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    yield client
    client.close()


@pytest.mark.timeout(BUILD_LIMIT + READY_LIMIT + CALL_LIMIT)
async def test_a_container_of_the_gateway_image_lists_the_bundled_skills_to_an_sdk_client(
    docker_client: DockerClient,
) -> None:
    """Builds the image as `python -m gateway.sandbox.image --gateway .` does: on the registry's
    Python when one answers, else on the offline Python base. Measured on two CPUs without a
    registry: about 75 s cold, with the Debian tree that `sandbox build` (`.ci/docker.sh`) leaves in
    ~/.cache/mcp-gateway/sandbox (3.5 min with none), and about 25 s warm, once the base image
    `mcp-gateway-python:3.11-bookworm` exists: only the gateway's own layers are built each run.
    Under a load average of 12 from other work: about 3 min cold, 45 s warm."""
    bundled = {folder.name for folder in (REPO / "skills").iterdir() if (folder / "SKILL.md").is_file()}
    assert bundled, "the checkout bundles skills"
    container: Container | None = None
    try:
        # Blocking docker-py calls, bounded by the test's timeout: a thread cannot be cancelled.
        await anyio.to_thread.run_sync(partial(build_gateway_image, REPO, TAG, client=docker_client))
        # The image's own command: the embedded defaults on 0.0.0.0:8000, published on a free loopback port.
        container = docker_client.containers.create(TAG, ports={"8000/tcp": ("127.0.0.1", None)})
        container.start()
        url = await _ready(container)
        with anyio.fail_after(CALL_LIMIT):
            async with Client(f"{url}/mcp") as client:
                listed = structured(await client.call_tool("List_Skills", {}))["skills"]
        assert bundled <= set(listed), container.logs().decode(errors="replace")
    finally:
        if container is not None:
            container.remove(force=True)
        # The base image stays, as the sandbox image does: the next run reuses it.
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(TAG, force=True)


async def _ready(container: Container) -> str:
    """The gateway's URL once its `/readyz` says ready; fails with its log when it exits first."""
    with anyio.fail_after(READY_LIMIT):
        container.reload()
        port = container.ports["8000/tcp"][0]["HostPort"]
        url = f"http://127.0.0.1:{port}"
        async with httpx2.AsyncClient() as http:
            while True:
                try:
                    answer = await http.get(f"{url}/readyz")
                    if answer.status_code == 200 and answer.json()["ready"]:
                        return url
                except httpx2.TransportError:
                    pass  # Docker's port proxy answers before the gateway listens
                container.reload()
                assert container.status == "running", container.logs().decode(errors="replace")
                await anyio.sleep(0.2)
