"""The warm pool hands out started containers once each and replaces them in the background."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable

import anyio
import pytest
from docker import DockerClient
from mcp import Client

from gateway.config.limits import SandboxLimits
from gateway.sandbox.containers import ContainerStdio, SandboxContainer, destroy, destroy_now, launch
from gateway.sandbox.hardening import container_kwargs
from gateway.sandbox.pool import WarmPool
from tests.sandbox.conftest import IMAGE, LABELS, WAIT, sandbox_ids

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

ECHO = ["python3", "-m", "servers.echo"]


def echo_factory(client: DockerClient, lifetime: float = 120) -> SandboxContainer:
    kwargs = container_kwargs(IMAGE, ECHO, SandboxLimits(), LABELS, None, now=time.time(), lifetime=lifetime)
    return launch(client, kwargs)


def given(handle: SandboxContainer) -> Callable[[], Awaitable[SandboxContainer]]:
    """An `acquire` that returns a container we already hold."""

    async def acquire() -> SandboxContainer:
        return handle

    return acquire


async def test_warm_pool_hands_out_fresh_containers(docker_client: DockerClient) -> None:
    pool = WarmPool(2, functools.partial(echo_factory, docker_client))
    try:
        with anyio.fail_after(WAIT):
            await pool.wait_full()
            warm = sandbox_ids(docker_client)
            handed = [await pool.acquire() for _ in range(3)]
            handed_ids = {handle.id for handle in handed}
            assert len(handed_ids) == 3
            assert warm < handed_ids  # two came warm, the third cold
            await pool.wait_full()
            assert pool.ready == 2
            assert len(sandbox_ids(docker_client) - handed_ids) == 2  # the replacements are new ones
            for handle in handed:
                async with Client(ContainerStdio(given(handle))) as client:
                    result = await client.call_tool("echo", {"text": "fresh"})
                assert result.content[0].text == "fresh"  # type: ignore[union-attr]
    finally:
        await pool.close()


async def test_containers_near_their_end_of_life_are_replaced_not_handed_out(docker_client: DockerClient) -> None:
    pool = WarmPool(1, functools.partial(echo_factory, docker_client, 30), min_remaining=60)
    try:
        with anyio.fail_after(WAIT):
            await pool.wait_full()
            (stale,) = sandbox_ids(docker_client)
            handle = await pool.acquire()
            assert handle.id != stale
            await destroy_now(handle)
    finally:
        await pool.close()


async def test_take_hands_out_the_ready_container_and_close_disposes_of_its_replacement(
    docker_client: DockerClient,
) -> None:
    disposed: list[str] = []

    def dispose(handle: SandboxContainer) -> None:
        disposed.append(handle.id)
        destroy(handle)

    pool = WarmPool(1, functools.partial(echo_factory, docker_client), dispose=dispose)
    try:
        with anyio.fail_after(WAIT):
            await pool.wait_full()
            (ready,) = sandbox_ids(docker_client)
            taken = pool.take()
            assert taken is not None and taken.id == ready
            await destroy_now(taken)
            await pool.wait_full()
            (replacement,) = sandbox_ids(docker_client)
    finally:
        await pool.close()
    assert disposed == [replacement]
    assert sandbox_ids(docker_client) == set()
