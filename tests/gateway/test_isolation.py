"""Callers are kept apart: each has its own workspace on a session-scoped server, and a session
belongs to the caller who opened it, whatever session id another caller presents. Callers whose
bare names collide (an API key and a JWT naming one name, a name and a handle that join to the
same text, anonymous clients) are distinct callers with state of their own."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client

from gateway.config.model import GatewayConfig
from tests.support.access import KEYS, access_config, auth_section, http_client, token_for
from tests.support.harness import REPO, http_gateway, in_memory
from tests.support.skills import structured, text, write_skill
from tests.support.toy import build_server as toy

pytestmark = pytest.mark.anyio

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
PROTOCOL = "2025-06-18"
ADA, IAN = KEYS["admin"], KEYS["intern"]


def _files_config(tmp_path: Path) -> GatewayConfig:
    files = {
        "command": sys.executable,
        "args": ["-m", "servers.files", "--root", "${WORKSPACE}"],
        "cwd": str(REPO),
        "scope": "session",
        # Writes stay inside the session's own workspace; medium risk keeps confirmation out of the way.
        "risk": "medium",
    }
    return access_config(tmp_path, {"files": files}, roles={role: {"allow": ["*"]} for role in KEYS})


async def test_two_callers_cannot_reach_each_others_files(tmp_path: Path) -> None:
    # One caller per era: a handshake-era session and a stateless caller each get their own workspace.
    async with (
        http_gateway(_files_config(tmp_path)) as (_, url),
        http_client(url, ADA, mode="legacy") as ada,
        http_client(url, IAN, mode="2026-07-28") as ian,
    ):
        with anyio.fail_after(30):
            written = await ada.call_tool("files__write_file", {"path": "secret.txt", "content": "ada's"})
            assert not written.is_error, text(written)
            mine = await ada.call_tool("files__read_file", {"path": "secret.txt"})
            theirs = await ian.call_tool("files__read_file", {"path": "secret.txt"})
            escape = await ian.call_tool("files__read_file", {"path": "../" * 6 + "secret.txt"})
            listing = await ian.call_tool("files__list_directory", {})
            own = await ian.call_tool("files__write_file", {"path": "secret.txt", "content": "ian's"})
            still_mine = await ada.call_tool("files__read_file", {"path": "secret.txt"})
        # While the sessions live: a size-limited workspace is unmounted when its session ends.
        on_disk = list((tmp_path / "data" / "workspaces").rglob("secret.txt"))
    assert "ada's" in text(mine)
    assert theirs.is_error and escape.is_error
    assert "secret.txt" not in text(listing)
    assert not own.is_error and "ada's" in text(still_mine)
    assert len(on_disk) == 2


def _messages(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response, whether a JSON body or an SSE stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        lines = [line.removeprefix("data:").strip() for line in response.text.splitlines()]
        return [json.loads(line) for line in lines if line.startswith("{")]
    return [response.json()] if response.content else []


class RawCaller:
    """One caller speaking the handshake-era protocol by hand, to present any session id it likes."""

    def __init__(self, http: httpx2.AsyncClient, url: str, key: str | None) -> None:
        self._http, self._url, self._key = http, f"{url}/mcp", key
        self._id = 0

    def _headers(self, session: str | None) -> dict[str, str]:
        headers = {**MCP_HEADERS, "MCP-Protocol-Version": PROTOCOL}
        headers |= {"Authorization": f"Bearer {self._key}"} if self._key is not None else {}
        return headers | ({"Mcp-Session-Id": session} if session else {})

    async def initialize(self) -> str:
        """Open a session; its id."""
        params = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        response = await self.post(None, "initialize", params)
        assert response.status_code == 200
        session: str = response.headers["mcp-session-id"]
        notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await self._http.post(self._url, json=notice, headers=self._headers(session))).status_code == 202
        return session

    async def post(self, session: str | None, method: str, params: dict[str, Any]) -> httpx2.Response:
        """Send one request in `session`."""
        self._id += 1
        body = {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}
        return await self._http.post(self._url, json=body, headers=self._headers(session))

    async def delete(self, session: str) -> httpx2.Response:
        """Ask to end `session`."""
        return await self._http.delete(self._url, headers=self._headers(session))

    async def listen(self, session: str) -> int:
        """Open `session`'s event stream; the status it answers with."""
        headers = {**self._headers(session), "Accept": "text/event-stream"}
        async with self._http.stream("GET", self._url, headers=headers) as response:
            return response.status_code


async def test_a_caller_presenting_another_callers_session_id_does_not_get_that_session(tmp_path: Path) -> None:
    roles = {role: {"allow": ["*"]} for role in KEYS}
    # The toy as it comes: increment is a medium-risk tool that runs without confirmation.
    config = access_config(tmp_path, {"toy": {"command": "unused"}}, roles=roles)
    async with (
        http_gateway(config, transports=in_memory({"toy": toy()})) as (gateway, url),
        httpx2.AsyncClient(timeout=30) as http,
    ):
        ada, ian = RawCaller(http, url, ADA), RawCaller(http, url, IAN)
        session = await ada.initialize()
        count = {"name": "toy__increment", "arguments": {}}
        assert "error" not in _messages(await ada.post(session, "tools/call", count))[0]
        stolen = await ian.post(session, "tools/call", count)
        unknown = await ian.post("0" * 32, "tools/call", count)
        hijacked_listing = await ian.post(session, "tools/list", {})
        with anyio.fail_after(10):
            stream = await ian.listen(session)
        ended = await ian.delete(session)
        still_mine = _messages(await ada.post(session, "tools/call", count))
        callers = {context.caller for context in gateway.sessions.live()}
    # Answered exactly as a session that does not exist, whatever the method.
    assert unknown.status_code == 404
    assert stream == 404
    for response in (stolen, hijacked_listing, ended):
        assert (response.status_code, response.text) == (404, unknown.text)
    # Ian's call never ran: Ada's second increment is the second.
    assert still_mine[0]["result"]["content"][0]["text"] == "2"
    assert callers == {"api_key:ada"}


ALICE_KEY, DAVE_KEY, DAVE_OPS_KEY, NAMED_ANONYMOUS_KEY, OPERATOR_KEY = (
    f"{name}-key-0123456789abcdef" for name in ("alice", "dave", "dave-ops", "anon", "operator")
)


def _collision_config(tmp_path: Path, **auth: Any) -> GatewayConfig:
    """Callers whose bare names collide: API key `alice` and a JWT naming `alice`, API keys `dave` and
    `dave:ops`, an API key named `anonymous`; a skill over the files server to hold state."""
    write_skill(tmp_path / "skills", "filing", "files__*")
    files = {
        "command": sys.executable,
        "args": ["-m", "servers.files", "--root", "${WORKSPACE}"],
        "cwd": str(REPO),
        "scope": "session",
        "risk": "medium",
    }
    keys = [
        {"caller": "alice", "role": "admin", "key": ALICE_KEY},
        {"caller": "dave", "role": "admin", "key": DAVE_KEY},
        {"caller": "dave:ops", "role": "admin", "key": DAVE_OPS_KEY},
        {"caller": "anonymous", "role": "admin", "key": NAMED_ANONYMOUS_KEY},
        {"caller": "operator", "role": "operator", "key": OPERATOR_KEY},
    ]
    return access_config(
        tmp_path,
        {"files": files},
        roles={"admin": {"allow": ["*"]}, "guest": {"allow": ["files__*"]}, "operator": {"allow": [], "admin": True}},
        auth=auth_section(api_keys=keys, **auth),
        skill_dirs=[str(tmp_path / "skills")],
    )


async def _sessions(url: str) -> list[dict[str, Any]]:
    """The live sessions, as an operator lists them through the admin API."""
    async with httpx2.AsyncClient(timeout=30) as http:
        answer = await http.get(f"{url}/api/v1/sessions", headers={"Authorization": f"Bearer {OPERATOR_KEY}"})
    assert answer.status_code == 200, answer.text
    sessions: list[dict[str, Any]] = answer.json()["sessions"]
    return sessions


async def _active(client: Client, handle: str | None = None) -> list[str]:
    arguments = {} if handle is None else {"handle": handle}
    active: list[str] = structured(await client.call_tool("List_Skills", arguments))["active"]
    return active


async def _write(client: Client, content: str, handle: str | None = None) -> None:
    arguments: dict[str, Any] = {"path": "secret.txt", "content": content}
    call = {"name": "files__write_file", "arguments": arguments} | ({"handle": handle} if handle else {})
    written = await client.call_tool("Use_Tool", call)
    assert not written.is_error, text(written)


async def _read(client: Client, handle: str | None = None) -> types.CallToolResult:
    call = {"name": "files__read_file", "arguments": {"path": "secret.txt"}} | ({"handle": handle} if handle else {})
    return await client.call_tool("Use_Tool", call)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_api_key_caller_and_a_jwt_naming_the_same_caller_keep_separate_state(
    tmp_path: Path, mode: str
) -> None:
    async with (
        http_gateway(_collision_config(tmp_path)) as (_, url),
        http_client(url, ALICE_KEY, mode=mode) as by_key,
        http_client(url, token_for("alice", "guest"), mode=mode) as by_jwt,
    ):
        with anyio.fail_after(60):
            await by_key.call_tool("Load_Skill", {"name": "filing"})
            await _write(by_key, "the admin's")
            theirs = await _read(by_jwt)
            jwt_skills = await _active(by_jwt)
            mine = await _read(by_key)
        callers = {session["caller"] for session in await _sessions(url)}
    assert "the admin's" in text(mine)
    assert theirs.is_error and "the admin's" not in text(theirs)
    assert jwt_skills == []
    assert len(callers) == 2


async def test_a_jwt_naming_an_api_key_caller_cannot_use_that_callers_session(tmp_path: Path) -> None:
    config = _collision_config(tmp_path)
    async with http_gateway(config) as (_, url), httpx2.AsyncClient(timeout=30) as http:
        owner, namesake = RawCaller(http, url, ALICE_KEY), RawCaller(http, url, token_for("alice", "admin"))
        session = await owner.initialize()
        unknown = await namesake.post("0" * 32, "tools/list", {})
        stolen = await namesake.post(session, "tools/list", {})
        ended = await namesake.delete(session)
        still_mine = await owner.post(session, "tools/list", {})
    for response in (stolen, ended):
        assert (response.status_code, response.text) == (404, unknown.text)
    assert still_mine.status_code == 200


async def test_callers_whose_name_and_handle_join_to_the_same_text_keep_separate_state(tmp_path: Path) -> None:
    # `dave` with handle `ops:default` and `dave:ops` with handle `default` once shared one key.
    async with (
        http_gateway(_collision_config(tmp_path)) as (_, url),
        http_client(url, DAVE_KEY, mode="2026-07-28") as dave,
        http_client(url, DAVE_OPS_KEY, mode="2026-07-28") as dave_ops,
    ):
        with anyio.fail_after(60):
            loaded = structured(await dave.call_tool("Load_Skill", {"name": "filing", "handle": "ops:default"}))
            await _write(dave, "dave's", handle="ops:default")
            ops_skills = await _active(dave_ops)
            theirs = await _read(dave_ops)
            mine = await _read(dave, handle="ops:default")
    assert loaded["handle"] == "ops:default"
    assert ops_skills == []
    assert theirs.is_error and "dave's" not in text(theirs)
    assert "dave's" in text(mine)


async def test_anonymous_clients_of_the_stateless_era_keep_nothing_between_requests(tmp_path: Path) -> None:
    async with (
        http_gateway(_collision_config(tmp_path, anonymous_role="guest")) as (_, url),
        http_client(url, None, mode="2026-07-28") as first,
        http_client(url, None, mode="2026-07-28") as second,
    ):
        with anyio.fail_after(60):
            loaded = structured(await first.call_tool("Load_Skill", {"name": "filing"}))
            remembered = await _active(first)
            seen_by_other = await _active(second)
            await _write(first, "first's")
            reread = await _read(first)
            read_by_other = await _read(second)
        live = await _sessions(url)
    assert "handle" not in loaded
    assert remembered == [] and seen_by_other == []
    assert reread.is_error and read_by_other.is_error
    assert "first's" not in text(reread) + text(read_by_other)
    assert live == []


async def test_anonymous_clients_of_the_handshake_era_are_each_their_own_caller(tmp_path: Path) -> None:
    async with (
        http_gateway(_collision_config(tmp_path, anonymous_role="guest")) as (_, url),
        http_client(url, None) as first,
        http_client(url, None) as second,
    ):
        with anyio.fail_after(60):
            await _write(first, "first's")
            mine = await _read(first)
            theirs = await _read(second)
        callers = {session["caller"] for session in await _sessions(url)}
    assert "first's" in text(mine)
    assert theirs.is_error and "first's" not in text(theirs)
    assert len(callers) == 2


async def test_an_api_key_caller_named_anonymous_cannot_use_an_anonymous_session(tmp_path: Path) -> None:
    config = _collision_config(tmp_path, anonymous_role="guest")
    async with http_gateway(config) as (_, url), httpx2.AsyncClient(timeout=30) as http:
        anonymous, named = RawCaller(http, url, None), RawCaller(http, url, NAMED_ANONYMOUS_KEY)
        anonymous_session, named_session = await anonymous.initialize(), await named.initialize()
        unknown = await named.post("0" * 32, "tools/list", {})
        responses = [
            await named.post(anonymous_session, "tools/list", {}),
            await anonymous.post(named_session, "tools/list", {}),
            await named.delete(anonymous_session),
            await anonymous.delete(named_session),
        ]
        still_theirs = [
            await anonymous.post(anonymous_session, "tools/list", {}),
            await named.post(named_session, "tools/list", {}),
        ]
    for response in responses:
        assert (response.status_code, response.text) == (404, unknown.text)
    assert [response.status_code for response in still_theirs] == [200, 200]
