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
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

LIST_TOOLS = "tools/list"
# Visibility sets times pages: each page of 500 tools in wire form is a few hundred kilobytes.
DEFAULT_PAGES = 64


@dataclass(slots=True)
class _Lookup:
    """What the handler found for one tools/list request, handed back to the middleware."""

    key: Hashable | None = None
    stamp: tuple[object, ...] = ()
    page: dict[str, Any] | None = None


_LOOKUP: ContextVar[_Lookup | None] = ContextVar("gateway.listing", default=None)


@dataclass
class ListingCache:
    """Wire-form tools/list pages by (visibility set, protocol version, cursor), least recently used dropped."""

    size: int = DEFAULT_PAGES
    _pages: OrderedDict[Hashable, tuple[tuple[object, ...], dict[str, Any]]] = field(default_factory=OrderedDict)

    def holds(self, key: Hashable, stamp: tuple[object, ...]) -> bool:
        """Whether this request's page is kept, built from the very objects of `stamp`; the handler
        asks, and answers with an empty result when it is (the middleware puts the page in)."""
        lookup = _LOOKUP.get()
        if lookup is None:
            return False
        lookup.key, lookup.stamp = key, stamp
        kept = self._pages.get(key)
        if kept is None or len(kept[0]) != len(stamp) or any(a is not b for a, b in zip(kept[0], stamp, strict=True)):
            return False
        self._pages.move_to_end(key)
        lookup.page = kept[1]
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
        if lookup.page is not None:
            return lookup.page
        if lookup.key is not None and isinstance(result, dict):
            self._pages[lookup.key] = (lookup.stamp, result)
            self._pages.move_to_end(lookup.key)
            while len(self._pages) > self.size:
                self._pages.popitem(last=False)
        return result
