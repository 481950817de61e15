"""tools/list pages kept in their wire form, per visibility set, until what they were built from changes.

Building a page of 500 tools costs a pydantic `Tool` per tool, a dump, and the SDK's validation
of the whole result on the way out: most of a listing's CPU. Every session that sees the same
tools (same role, group, tools of active skills, protocol version) gets the same page for the
same cursor, so the first one's wire form serves the rest.

The SDK's serialisation runs inside its middleware chain, so the cache is a middleware: the
tools/list handler still runs for every request (params validated, session found, caller
checked) and, when it names a page the cache holds, returns an empty result, which the middleware
replaces with the kept page. A page is kept with the state objects it was built from (the
catalog's tool list, the role rules, the group, the meta-tools); the gateway replaces those
objects when they change, so a page built from older ones is never served.

A page is kept as JSON bytes only: a request answered at the HTTP edge (the hot path of
`gateway.frontdoors.responsemode`) within `wire()` sends them as they are, skipping the encoding of
the page's few hundred kilobytes (about 5 ms per full listing of 2,000 tools); any other gets the
page decoded from them. Keeping the wire dict as well held every kept page twice.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import pydantic_core
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

LIST_TOOLS = "tools/list"
# Visibility sets times pages: each page of 500 tools in wire form is a few hundred kilobytes.
DEFAULT_PAGES = 64


@dataclass(slots=True)
class _Page:
    """One kept page: the state objects it was built from and its JSON."""

    stamp: tuple[object, ...]
    encoded: bytes


@dataclass(slots=True)
class _Lookup:
    """What the handler found for one tools/list request, handed back to the middleware."""

    key: Hashable | None = None
    stamp: tuple[object, ...] = ()
    page: _Page | None = None


@dataclass(slots=True)
class Wire:
    """Where a request answered at the HTTP edge receives its page as JSON bytes (None: not a kept page)."""

    body: bytes | None = None


_LOOKUP: ContextVar[_Lookup | None] = ContextVar("gateway.listing", default=None)
_WIRE: ContextVar[Wire | None] = ContextVar("gateway.listing.wire", default=None)


@contextmanager
def wire() -> Iterator[Wire]:
    """Within this, a tools/list request answered from, or kept in, a listing cache leaves its
    page's JSON bytes in the `Wire` yielded."""
    holder = Wire()
    token = _WIRE.set(holder)
    try:
        yield holder
    finally:
        _WIRE.reset(token)


@dataclass
class ListingCache:
    """Wire-form tools/list pages by (visibility set, protocol version, cursor), least recently used dropped."""

    size: int = DEFAULT_PAGES
    _pages: OrderedDict[Hashable, _Page] = field(default_factory=OrderedDict)

    def holds(self, key: Hashable, stamp: tuple[object, ...]) -> bool:
        """Whether this request's page is kept, built from the very objects of `stamp`; the handler
        asks, and answers with an empty result when it is (the middleware puts the page in)."""
        lookup = _LOOKUP.get()
        if lookup is None:
            return False
        lookup.key, lookup.stamp = key, stamp
        kept = self._pages.get(key)
        if kept is None or len(kept.stamp) != len(stamp):
            return False
        if any(a is not b for a, b in zip(kept.stamp, stamp, strict=True)):
            return False
        self._pages.move_to_end(key)
        lookup.page = kept
        return True

    def clear(self) -> None:
        """Drop every kept page."""
        self._pages.clear()

    def __len__(self) -> int:
        return len(self._pages)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """The middleware: serve a kept page, or keep the page the handler built."""
        if ctx.method != LIST_TOOLS:
            return await call_next(ctx)
        lookup = _Lookup()
        token = _LOOKUP.set(lookup)
        try:
            result = await call_next(ctx)
        finally:
            _LOOKUP.reset(token)
        page = lookup.page
        holder = _WIRE.get()
        if page is None:
            if lookup.key is None or not isinstance(result, dict):
                return result
            page = self._pages[lookup.key] = _Page(lookup.stamp, pydantic_core.to_json(result))
            self._pages.move_to_end(lookup.key)
            while len(self._pages) > self.size:
                self._pages.popitem(last=False)
        elif holder is None:
            # Served on the SDK's way, which encodes a dict: the handler's result was empty.
            kept: dict[str, Any] = pydantic_core.from_json(page.encoded, cache_strings="keys")
            return kept
        if holder is not None:
            holder.body = page.encoded
        # The page just built, or (at the edge, which sends the bytes) whatever the handler answered.
        return result
