"""An HTTP transport pinned to one checked address: a server registered through the API is
connected where its host was judged to lead, never where a second DNS lookup would say."""

from __future__ import annotations

import httpx2


class PinnedTransport(httpx2.AsyncBaseTransport):
    """Sends every request for `host` to `address`, its Host header and TLS server name (SNI,
    and the certificate's check) still `host`; a request for any other host is refused.

    The SDK's transports follow no redirect off the endpoint's origin; refusing other hosts here
    keeps that true of this connection whatever a redirect or an endpoint event names.
    """

    def __init__(self, host: str, address: str) -> None:
        self._host = host
        self._address = address
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """`request` sent to the pinned address; httpx's `sni_hostname` extension names the host to TLS."""
        if request.url.host != self._host:
            raise httpx2.ConnectError(
                f"{request.url.host} is not {self._host}, the host this connection was checked for", request=request
            )
        pinned = httpx2.Request(
            request.method,
            request.url.copy_with(host=self._address),
            headers=request.headers,
            stream=request.stream,
            extensions={**request.extensions, "sni_hostname": self._host},
        )
        return await self._inner.handle_async_request(pinned)

    async def aclose(self) -> None:
        """Close the connections to the pinned address."""
        await self._inner.aclose()
