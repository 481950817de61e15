"""A client's first listing sees every server that starts in time, and `/readyz` says ready only
once the servers the gateway started with have connected or failed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import yaml
from mcp import Client, StdioServerParameters

from tests.support.harness import REPO, http_gateway, make_config, placeholder, toy_stdio
from tests.support.probe import gated
from tests.support.toy import build_server as toy
from tests.support.waiting import poll_until

pytestmark = pytest.mark.anyio

# High, so that no loaded machine outruns it: every wait here ends when the server connects.
WAIT = 60.0


def names(result: Any) -> set[str]:
    return {tool.name for tool in result.tools}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_first_listing_over_http_waits_for_a_server_still_connecting(tmp_path: Path, mode: str) -> None:
    config = make_config(tmp_path, placeholder(["toy"]), first_listing_wait=WAIT)
    gate = anyio.Event()
    with anyio.fail_after(WAIT):
        async with (
            http_gateway(config, transports={"toy": gated(toy(), gate)}, settled=False) as (gateway, url),
            Client(f"{url}/mcp", mode=mode) as client,
            anyio.create_task_group() as group,
        ):
            listed: list[set[str]] = []

            async def first_listing() -> None:
                listed.append(names(await client.list_tools()))

            group.start_soon(first_listing)
            # The listing has reached the gateway and waits there (nothing says so but the session's
            # state); only now does the server connect.
            await poll_until(lambda: any(session.listed for session in gateway.sessions.live()), "the first listing")
            assert not listed
            gate.set()
    assert "toy__echo" in listed[0]


async def test_readyz_says_not_ready_until_every_server_has_connected_or_failed(tmp_path: Path) -> None:
    failing = toy_stdio("broken", "--fail-at-start")
    config = make_config(tmp_path, {**placeholder(["toy"]), "broken": failing}, first_listing_wait=0)
    gate = anyio.Event()
    with anyio.fail_after(WAIT):
        async with (
            http_gateway(config, transports={"toy": gated(toy(), gate)}, settled=False) as (gateway, url),
            httpx2.AsyncClient() as http,
        ):
            # Neither server is required: an optional one still connecting holds readiness all the same.
            answer = await http.get(f"{url}/readyz")
            assert (answer.status_code, answer.json()["ready"]) == (503, False)
            gate.set()
            await gateway.settled.wait()
            # The failed optional server does not.
            assert gateway.upstreams["broken"].status().state == "failed"
            assert (await http.get(f"{url}/readyz")).status_code == 200


def slow_gateway(tmp_path: Path) -> StdioServerParameters:
    """`python -m gateway stdio` on a file whose one server takes a few seconds to start."""
    data = {
        "gateway": {"data_dir": str(tmp_path / "data"), "first_listing_wait": WAIT},
        "servers": {"toy": toy_stdio("toy", "--start-delay", "3")},
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    command = [sys.executable, "-m", "gateway", "--log-level", "WARNING", "stdio", "--config", str(path)]
    return StdioServerParameters(command=command[0], args=command[1:], cwd=str(REPO))


async def test_a_client_that_lists_once_over_stdio_sees_a_slow_server_s_tools(tmp_path: Path) -> None:
    with anyio.fail_after(WAIT * 2):
        async with Client(slow_gateway(tmp_path), mode="legacy") as client:
            assert {"toy__echo", "toy__add"} <= names(await client.list_tools())


async def test_a_first_call_over_stdio_waits_for_its_slow_server_instead_of_not_connected_yet(tmp_path: Path) -> None:
    with anyio.fail_after(WAIT * 2):
        async with Client(slow_gateway(tmp_path), mode="legacy") as client:
            result = await client.call_tool("toy__echo", {"text": "here"})
    assert not result.is_error
    assert result.content[0].text == "here"  # type: ignore[union-attr]
