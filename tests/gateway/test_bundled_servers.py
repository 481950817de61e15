"""The bundled servers behind a real gateway started from the default configuration."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from gateway.config.loading import default_config_path, load_config
from gateway.config.model import GatewayConfig
from gateway.service import Gateway
from tests.support.harness import approve, gateway_client

pytestmark = pytest.mark.anyio

Bundled = tuple[Gateway, Client, Path]


# A tag nobody builds: the sandbox is unavailable even where Docker and the real image are present.
ABSENT_IMAGE = "mcp-gateway-sandbox:absent"


def default_config(data_dir: Path, *servers: str) -> GatewayConfig:
    """The default configuration with its data under `data_dir`, keeping only `servers`, and no sandbox image."""
    config = load_config(default_config_path(), environ={"GATEWAY_DATA_DIR": str(data_dir), "HOME": str(data_dir)})
    return replace(
        config,
        settings=replace(config.settings, sandbox_image=ABSENT_IMAGE),
        servers=tuple(server for server in config.servers if server.name in servers),
    )


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so that one gateway (four server processes) serves every test here."""
    return "asyncio"


@pytest.fixture(scope="module")
async def bundled(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Bundled]:
    """One gateway over the bundled servers that start without Docker, a client, and its data directory.

    The files server runs in the sandbox (tests/sandbox/test_workspace_limits.py).
    """
    data_dir = tmp_path_factory.mktemp("bundled")
    servers = ("sqlite", "calc", "python")
    # Startup is bounded by the gateway itself (upstream_connect_timeout); a deadline here would span every test.
    config = default_config(data_dir, *servers)
    async with gateway_client(config, elicitation_callback=approve) as (gateway, client):
        assert {status.name: status.error for status in gateway.servers.statuses()} == dict.fromkeys(servers)
        yield gateway, client, data_dir


def text_of(result: types.CallToolResult) -> str:
    """Every text block of a result, joined."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def call(client: Client, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    """One call, bounded in time (a high-risk one after the person approved it)."""
    with anyio.fail_after(10):
        return await client.call_tool(name, arguments)


async def test_the_default_configuration_lists_every_bundled_server(bundled: Bundled) -> None:
    _, client, _ = bundled
    names = {tool.name for tool in (await client.list_tools()).tools}
    assert {"sqlite__query", "calc__evaluate", "python__run_python"} <= names


async def test_without_the_sandbox_the_default_files_server_never_starts_on_the_host(tmp_path: Path) -> None:
    async with gateway_client(default_config(tmp_path, "files")) as (gateway, client):
        [status] = gateway.servers.statuses()
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert status.name == "files" and status.error is not None
    assert ABSENT_IMAGE in status.error
    assert not any(name.startswith("files__") for name in names)


async def test_sqlite_rows_written_with_execute_are_read_back_with_query(bundled: Bundled) -> None:
    _, client, _ = bundled
    await call(client, "sqlite__execute", {"sql": "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"})
    inserted = await call(client, "sqlite__execute", {"sql": "INSERT INTO notes (body) VALUES (?)", "params": ["hi"]})
    rows = await call(client, "sqlite__query", {"sql": "SELECT id, body FROM notes"})
    assert inserted.structured_content == {"rows_affected": 1, "last_insert_rowid": 1}
    assert rows.structured_content is not None
    assert rows.structured_content["rows"] == [[1, "hi"]]


async def test_a_write_through_sqlite_query_is_refused(bundled: Bundled) -> None:
    _, client, _ = bundled
    await call(client, "sqlite__execute", {"sql": "CREATE TABLE guarded (body TEXT)"})
    refused = await call(client, "sqlite__query", {"sql": "INSERT INTO guarded VALUES ('sneaky')"})
    rows = await call(client, "sqlite__query", {"sql": "SELECT count(*) FROM guarded"})
    assert refused.is_error
    assert "readonly" in text_of(refused).replace("-", "").replace(" ", "").lower()
    assert rows.structured_content is not None and rows.structured_content["rows"] == [[0]]


async def test_calc_evaluates_and_refuses_an_expression_that_would_never_finish(bundled: Bundled) -> None:
    _, client, _ = bundled
    value = await call(client, "calc__evaluate", {"expression": "sqrt(16) * (3 + 4)"})
    huge = await call(client, "calc__evaluate", {"expression": "9 ** 9 ** 9 ** 9"})
    after = await call(client, "calc__evaluate", {"expression": "2 ** 10"})
    assert value.structured_content == {"result": 28.0}
    assert huge.is_error
    assert "digits" in text_of(huge)
    assert after.structured_content == {"result": 1024}


async def test_the_sandboxed_python_tool_is_refused_and_never_runs_on_the_host(bundled: Bundled) -> None:
    gateway, client, data_dir = bundled
    evidence = data_dir / "ran-on-the-host"
    code = f"open({str(evidence)!r}, 'w').write('escaped')"
    result = await call(client, "python__run_python", {"code": code})
    rows = await gateway.audit.recent(limit=1)
    assert not evidence.exists()
    assert result.is_error
    assert "runs only in a Docker sandbox" in text_of(result)
    assert "The call was not run." in text_of(result)
    # Without Docker the reason names Docker, with it the absent image; either way the refusal says why.
    ready, reason = gateway.sandboxes.availability()
    assert not ready and reason in text_of(result)
    assert (rows[0].tool, rows[0].outcome) == ("python__run_python", "refused:sandbox")
