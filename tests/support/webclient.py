"""An HTTP client of the web page that acts as a browser would: cookies kept, forms sent with their CSRF token."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    """The CSRF token of the first form on a page."""
    found = CSRF.search(html)
    assert found is not None, html[:2000]
    return found.group(1)


class WebClient:
    """An HTTP client that keeps the page's cookies and fills in each form's CSRF token."""

    def __init__(self, http: httpx2.AsyncClient) -> None:
        self.http = http

    async def get(self, path: str, **options: object) -> httpx2.Response:
        """GET `path`, without following redirects."""
        return await self.http.get(path, **options)  # type: ignore[arg-type]

    async def sign_in(self, credential: str) -> httpx2.Response:
        """Paste `credential` into the sign-in form."""
        page = await self.http.get("/signin")
        return await self.http.post("/signin", data={"csrf": csrf_of(page.text), "credential": credential})

    async def submit(self, page: str, action: str, fields: dict[str, str] | None = None) -> httpx2.Response:
        """Post `fields` to `action` with the CSRF token of the form on `page`."""
        shown = await self.http.get(page)
        assert shown.status_code == 200, shown.text[:2000]
        return await self.http.post(action, data={"csrf": csrf_of(shown.text), **(fields or {})})


@asynccontextmanager
async def web_client(url: str) -> AsyncIterator[WebClient]:
    """A fresh client of the page at the gateway `url`, with no cookies."""
    async with httpx2.AsyncClient(base_url=url, timeout=30, follow_redirects=False) as http:
        yield WebClient(http)
