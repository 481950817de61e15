"""Secrets stay in the configuration: not in the log, the audit trail, `/readyz`, error texts or the CLI.

The gateway runs as a real process (`python -m gateway serve`) so that its whole log output, the
HTTP client's log included, is what the test reads.
"""

from __future__ import annotations

import json
import sqlite3
import stat
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import yaml
from mcp.shared.exceptions import MCPError

from tests.support.access import HS256_SECRET, KEYS, auth_section, http_client
from tests.support.harness import REPO, Served, gateway_process
from tests.support.probe import toy_process
from tests.support.waiting import containing

pytestmark = pytest.mark.anyio

LEAKY_KEY = "leaky-key-4f9c2d81e7b3"
REMOTE_KEY = "remote-key-9a1b7c3d5e"
GONE_KEY = "gone-key-0d4e8f2a6c"
CLIENT_TOKEN = "client-token-5e7a9c1b3d"
SECRETS = [LEAKY_KEY, REMOTE_KEY, GONE_KEY, CLIENT_TOKEN, HS256_SECRET, *KEYS.values()]
ROLES = {
    "admin": {"allow": ["*"], "admin": True},
    "analyst": {"allow": ["leaky__*", "remote__*"]},
    "intern": {"allow": ["remote__echo"]},
}


def _config(tmp_path: Path, remote_port: int) -> Path:
    servers = {
        "leaky": {
            "command": sys.executable,
            "args": ["-m", "tests.support.leaky"],
            "cwd": str(REPO),
            "env": {"LEAKY_API_KEY": LEAKY_KEY, "LEAKY_BROKEN": str(tmp_path / "broken")},
        },
        "remote": {"url": f"http://127.0.0.1:{remote_port}/mcp?api_key={REMOTE_KEY}"},
        "gone": {"url": f"http://127.0.0.1:{remote_port}/nowhere?api_key={GONE_KEY}"},
    }
    document = {
        "gateway": {"data_dir": str(tmp_path / "data"), "restart_backoff_initial": 0.05},
        "servers": servers,
        "roles": ROLES,
        "auth": auth_section(),
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


async def _readyz(url: str, key: str | None = None, query: str = "") -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient() as http:
        response = await http.get(f"{url}/readyz{query}", headers=headers)
    body: dict[str, Any] = response.json()
    return body


async def _servers_become(served: Served, wanted: dict[str, str], since: int = 0) -> dict[str, Any]:
    """Wait for the log line saying each named server is ready, or that it failed (`down`), from
    output line `since` on; `/readyz`'s detail of every server then, as an admin sees it."""
    for name, state in wanted.items():
        said = f"upstream {name} ready" if state == "ready" else f"upstream {name}: "
        await served.output.until(containing(said), f"the log line {said!r}", since)
    servers: dict[str, Any] = (await _readyz(served.url, KEYS["admin"]))["servers"]
    for name, state in wanted.items():
        ready = servers[name]["state"] == "ready"
        assert ready if state == "ready" else not ready and servers[name]["error"], servers[name]
    return servers


def _texts(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


def _audit_dump(data_dir: Path) -> str:
    """Every value of every table of the audit database, and the raw bytes of its files."""
    values: list[str] = []
    with closing(sqlite3.connect(data_dir / "audit.db")) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            values += [str(value) for row in db.execute(f'SELECT * FROM "{table}"') for value in row]
    raw = b"".join(path.read_bytes() for path in data_dir.glob("audit.db*"))
    return "\n".join(values) + raw.decode("latin-1")


def _leaked(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


async def test_no_configured_secret_or_url_token_leaves_the_gateway(tmp_path: Path) -> None:
    answers: list[str] = []
    async with toy_process("streamable-http", "remote") as remote_port:
        config = _config(tmp_path, remote_port)
        log = tmp_path / "gateway.log"
        async with gateway_process(config, log) as served:
            url = served.url
            await _servers_become(served, {"leaky": "ready", "remote": "ready", "gone": "down"})
            async with http_client(url, KEYS["analyst"]) as client:
                failed = await client.call_tool("leaky__complain", {})
                assert failed.is_error
                answers.append(_texts(failed))
                before = len(served.output.lines)
                broke = await client.call_tool("leaky__break_down", {})
                answers.append(_texts(broke))
                detail = await _servers_become(served, {"leaky": "down"}, since=before)
                assert "stderr:" in detail["leaky"]["error"]
                down = await client.call_tool("leaky__lookup", {"query": "x"})
                answers.append(_texts(down))
                echoed = await client.call_tool("remote__echo", {"text": "hi"})
                assert _texts(echoed) == "hi"
                with pytest.raises(MCPError) as refused:
                    await client.read_resource("leaky+nothing://x")
                answers.append(refused.value.error.message)
            answers.append(json.dumps(await _readyz(url, query=f"?token={CLIENT_TOKEN}")))
            answers.append(json.dumps(await _readyz(url, KEYS["intern"])))
            admin = await _readyz(url, KEYS["admin"])
            answers.append(json.dumps(admin))
    command = [sys.executable, "-m", "gateway", "catalog", "--json", "--config", str(config)]
    with anyio.fail_after(120):
        catalog = await anyio.run_process(command, cwd=REPO)
    printed = catalog.stdout.decode() + catalog.stderr.decode()
    output = log.read_text(encoding="utf-8")
    # No access line at the default level; at DEBUG its URL is scrubbed too (test_request_logging).
    assert "upstream leaky" in output and "GET /readyz" not in output
    # The HTTP client's request lines (a URL each) are below its default level.
    assert "HTTP Request:" not in output
    assert "login refused" in printed
    assert {
        "log": _leaked(output),
        "audit": _leaked(_audit_dump(tmp_path / "data")),
        "answers": _leaked("\n".join(answers)),
        "catalog": _leaked(printed),
    } == {"log": [], "audit": [], "answers": [], "catalog": []}
    # Callers learn that the server is down; the operator's detail keeps its shape without the key.
    assert down.is_error and _texts(down).startswith("Server 'leaky' is unavailable")
    assert "[redacted]" in admin["servers"]["leaky"]["error"]
    # The server's own stderr keeps what it printed, readable by the gateway's user alone.
    assert stat.S_IMODE((tmp_path / "data" / "logs" / "leaky.log").stat().st_mode) == 0o600
