"""The pinned HTTP transport: requests for the checked host go to the checked address, under the
host's name, and no request for another host leaves it, whatever the client above it follows."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from gateway.upstreams.pinnedhttp import PinnedTransport
from tests.support.addressed import addressed_server, tls_files

pytestmark = pytest.mark.anyio


async def test_a_client_following_every_redirect_cannot_leave_the_pinned_host() -> None:
    async with addressed_server("elsewhere", "127.0.0.1") as elsewhere:
        target = f"http://127.0.0.1:{elsewhere.port}/mcp"
        async with (
            addressed_server("redirecting", "127.0.0.2", redirect=target) as redirecting,
            httpx2.AsyncClient(transport=PinnedTransport("localhost", "127.0.0.2"), follow_redirects=True) as client,
        ):
            with pytest.raises(httpx2.ConnectError, match=r"127\.0\.0\.1 is not localhost"):
                await client.get(f"http://localhost:{redirecting.port}/mcp")
    assert redirecting.requests == ["/mcp"]
    assert elsewhere.requests == []


@pytest.mark.parametrize(("named", "verified"), [("mcp.example.test", True), ("other.example.test", False)])
async def test_tls_to_a_pinned_address_is_verified_against_the_host_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, named: str, verified: bool
) -> None:
    files = tls_files(tmp_path, named)
    monkeypatch.setenv("SSL_CERT_FILE", str(files.authority))
    async with (
        addressed_server("secure", "127.0.0.1", tls=files) as upstream,
        httpx2.AsyncClient(transport=PinnedTransport("mcp.example.test", "127.0.0.1")) as client,
    ):
        url = f"https://mcp.example.test:{upstream.port}/mcp"
        if verified:
            await client.get(url)
        else:
            with pytest.raises(httpx2.ConnectError, match="certificate"):
                await client.get(url)
    assert upstream.requests == (["/mcp"] if verified else [])
