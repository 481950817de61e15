"""The pinned HTTP transport: requests for the checked host go to the checked address, under the
host's name, and no request for another host leaves it, whatever the client above it follows."""

from __future__ import annotations

import httpx2
import pytest

from gateway.upstreams.pinning import PinnedTransport
from tests.support.addressed import addressed_server

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
