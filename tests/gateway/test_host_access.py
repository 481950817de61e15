"""The person at the machine approves a parked call of the embedded defaults with the one command the
waiting message names, through real `serve` and CLI processes; a model, calling tools and fetching
the gateway's own pages on loopback, reaches neither the host token nor a decision."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters

from gateway.config.loading import default_config_path
from gateway.runtime.hostaccess import HOST_FILE, LINK_PATH
from tests.support.harness import REPO, gateway_process, until_listed
from tests.support.skills import text

pytestmark = pytest.mark.anyio

WRITE = {"sql": "CREATE TABLE notes (body TEXT)"}
COMMAND = re.compile(r"`([^`]* -m gateway approvals approve ap-[0-9a-f]+)`")


@asynccontextmanager
async def default_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[str, Path]]:
    """`python -m gateway serve` on the embedded defaults, its data in `tmp_path`; its URL and its output file."""
    monkeypatch.setenv("GATEWAY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("GATEWAY_API_KEY", raising=False)
    output = tmp_path / "serve.log"
    async with gateway_process(default_config_path(), output) as served:
        # Written while the app's lifespan starts the gateway, before it answers anything.
        assert (tmp_path / "data" / HOST_FILE).exists()
        yield served.url, output


async def command(line: str) -> subprocess.CompletedProcess[bytes]:
    """`line`, a command as a person pastes it into a shell on the gateway's host."""
    return await anyio.run_process(["sh", "-c", line], cwd=REPO, check=False)


async def test_the_command_a_parked_call_names_approves_it_on_a_default_local_gateway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with default_gateway(tmp_path, monkeypatch) as (url, _):
        async with Client(f"{url}/mcp") as client:
            await until_listed(client, "sqlite__execute")
            parked = await client.call_tool("sqlite__execute", WRITE)
            assert parked.is_error
            found = COMMAND.search(text(parked))
            assert found is not None, text(parked)

            approved = await command(found.group(1))
            assert approved.returncode == 0, approved.stderr.decode()
            assert b"approved: sqlite__execute for local:local" in approved.stdout

            ran = await client.call_tool("sqlite__execute", WRITE)
        assert not ran.is_error, text(ran)

    data = tmp_path / "data"
    assert not (data / HOST_FILE).exists(), "the file goes when the gateway stops"


async def test_the_command_a_parked_call_names_approves_it_for_a_gateway_a_client_launched_over_stdio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("GATEWAY_API_KEY", raising=False)
    launched = StdioServerParameters(
        command=sys.executable, args=["-m", "gateway", "stdio"], cwd=str(REPO), env=dict(os.environ)
    )
    async with Client(launched) as client:
        await until_listed(client, "sqlite__execute")
        parked = await client.call_tool("sqlite__execute", WRITE)
        found = COMMAND.search(text(parked))
        assert found is not None, text(parked)

        # No gateway serves the data directory over HTTP: the command works on it directly.
        approved = await command(found.group(1))
        assert approved.returncode == 0, approved.stderr.decode()
        assert b"approved: sqlite__execute" in approved.stdout

        ran = await client.call_tool("sqlite__execute", WRITE)
    assert not ran.is_error, text(ran)


async def test_the_host_file_is_private_and_its_token_reaches_no_tool_result_audit_row_or_log_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers: list[str] = []
    async with default_gateway(tmp_path, monkeypatch) as (url, output):
        host_file = tmp_path / "data" / HOST_FILE
        assert stat.S_IMODE(host_file.stat().st_mode) == 0o600
        token = json.loads(host_file.read_text())["token"]
        async with Client(f"{url}/mcp") as client:
            await until_listed(client, "sqlite__execute")
            answers.append((await client.list_tools()).model_dump_json())
            parked = await client.call_tool("sqlite__execute", WRITE)
            answers.append(parked.model_dump_json())
            answers.append((await client.call_tool("sqlite__query", {"sql": "SELECT 1"})).model_dump_json())
        approval = str(parked.meta["io.mcp-gateway/approval"]["id"])  # type: ignore[index]

        # What a model's fetch tool pointed at the gateway gets: no credential, no cookie.
        async with httpx2.AsyncClient(base_url=url) as fetch:
            refused = await fetch.post(f"/api/v1/approvals/{approval}/approve", json={})
            page = await fetch.get("/approvals")
            guessed = await fetch.get(f"{LINK_PATH}/{'A' * 43}")
            answers += [refused.text, page.text, guessed.text]
        assert refused.status_code == 403
        assert f"-m gateway approvals approve {approval}" in refused.json()["error"]
        assert 'action="/approvals/' not in page.text
        assert guessed.status_code == 403

        listed = await command(f"{shlex.quote(sys.executable)} -m gateway approvals list --json")
        assert [entry["id"] for entry in json.loads(listed.stdout)] == [approval]

    assert all(token not in answer for answer in answers)
    assert token not in output.read_text()
    for path in (tmp_path / "data").rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path
