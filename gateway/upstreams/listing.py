"""What an upstream server lists, as the gateway holds it: tool records with the operator's settings
applied and descriptions bounded, and listings read page after page.

Tools are read as the JSON the server sent (`UpstreamSession.tool_page`), not through the SDK's
`list_tools`: that builds pydantic models of every tool twice (the negotiated revision's shape,
then the result's) and keeps each tool's output schema in the session for checking results,
which the gateway does itself (`gateway.upstreams.outputs`). For 2,000 tools that is thousands of
models built and dropped among the records the gateway keeps, and the memory they leave half used
stays with the process. The SDK's types stay at the edges: a record's annotations,
execution and icons are its models (its `_meta` stays JSON), and resources and prompts are listed the SDK's way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import mcp_types as types
from pydantic import BaseModel, ValidationError

from gateway.catalog.tools import ToolRecord
from gateway.config.model import ServerConfig
from gateway.errors import ToolExecutionError
from gateway.upstreams.sdkclient import InterceptingSession, send_as_is

MAX_DESCRIPTION_CHARS = 8000
MAX_PAGES = 1000
LISTINGS_AT_ONCE = 2
SLOT_PATIENCE = 1.0
"""Seconds a tool listing waits for a slot before it goes ahead without one."""
M = TypeVar("M", bound=BaseModel)


class UpstreamSession(InterceptingSession):
    """The SDK's client session to an upstream server, listing tools as JSON and leaving results'
    output schemas to the connection, which checks each result against its record's, once.
    `intercept` sees each notification in the order it arrived (`gateway.upstreams.clientside`)."""

    async def tool_page(self, cursor: str | None) -> tuple[list[Any], str | None]:
        """One page of `tools/list`: the tools as the server sent them, and the next cursor."""
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        answer = await send_as_is(self, types.ListToolsRequest(params=params))
        tools, following = answer.get("tools"), answer.get("nextCursor")
        if not isinstance(tools, list) or not isinstance(following, str | None):
            raise ToolExecutionError("server answered tools/list without a list of tools")
        return tools, following

    async def validate_tool_result(self, name: str, result: types.CallToolResult) -> None:
        """Nothing here: the session keeps no output schemas (see the module's docstring)."""


def records_for(config: ServerConfig, tools: Sequence[Any]) -> tuple[ToolRecord, ...]:
    """The server's tools (as listed, in JSON) as records, with the operator's per-server and
    per-tool settings applied; a tool that is not of the protocol's shape fails the listing.

    Equal parts of the input and output schemas (a whole schema, a `{"type": "string"}`) become
    one object shared by every record, and so do equal annotations and tag sets: a catalog of
    thousands of tools holds each shape once, not per tool.
    """
    records = []
    shapes: dict[Hashable, Any] = {}
    models: dict[Hashable, Any] = {}
    tag_sets: dict[tuple[str, ...], frozenset[str]] = {}
    for tool in tools:
        name, fields = _fields(tool)
        settings = config.settings_for(name)
        if not settings.enabled:
            continue
        output_schema = fields["outputSchema"]
        records.append(
            ToolRecord(
                name=name,
                source=config.name,
                original_name=name,
                description=_bounded(fields["description"] or ""),
                input_schema=shared(fields["inputSchema"], shapes),
                output_schema=None if output_schema is None else shared(output_schema, shapes),
                title=fields["title"],
                annotations=_model(types.ToolAnnotations, fields["annotations"], shapes, models),
                risk=settings.risk or config.risk,
                layer=settings.layer or config.layer,
                # The server's and the tool's own: one set for all the tools with the same (about 200 bytes each).
                tags=tag_sets.setdefault(settings.tags, frozenset(settings.tags)),
                sandbox=_sandbox_kind(settings.sandbox or config.sandbox),
                timeout=settings.timeout or config.timeout,
                execution=_model(types.ToolExecution, fields["execution"], shapes, models),
                icons=_icons(fields["icons"], shapes, models),
                meta=None if fields["_meta"] is None else shared(fields["_meta"], shapes),
            )
        )
    return tuple(records)


# A listed tool's fields the gateway keeps, and the JSON types each may have (None: absent).
_FIELDS: dict[str, tuple[type, ...]] = {
    "title": (str, type(None)),
    "description": (str, type(None)),
    "inputSchema": (dict,),
    "outputSchema": (dict, type(None)),
    "annotations": (dict, type(None)),
    "execution": (dict, type(None)),
    "icons": (list, type(None)),
    "_meta": (dict, type(None)),
}


def _fields(tool: Any) -> tuple[str, dict[str, Any]]:
    """A listed tool's name and the fields of `_FIELDS`, checked as the SDK's `Tool` checks them."""
    name = tool.get("name") if isinstance(tool, dict) else None
    if not isinstance(name, str):
        raise ToolExecutionError("server listed a tool without a name")
    fields = {key: tool.get(key) for key in _FIELDS}
    for key, kinds in _FIELDS.items():
        if not isinstance(fields[key], kinds):
            raise ToolExecutionError(f"server listed tool {name!r} with a malformed {key}")
    for key in ("inputSchema", "outputSchema"):
        if fields[key] is not None and fields[key].get("type") != "object":
            raise ToolExecutionError(f"server listed tool {name!r} with an {key} that is not of type object")
    return name, fields


def _model(
    model: type[M], value: dict[str, Any] | None, shapes: dict[Hashable, Any], models: dict[Hashable, Any]
) -> M | None:
    """`value` as an SDK model, one model for equal values; None stays None."""
    if value is None:
        return None
    value = shared(value, shapes)
    key = (model, id(value))
    if key not in models:
        try:
            models[key] = model.model_validate(value, by_name=False)
        except ValidationError as error:
            raise ToolExecutionError(f"server listed a tool with malformed {model.__name__}: {error}") from None
    found: M = models[key]
    return found


def _icons(
    value: list[Any] | None, shapes: dict[Hashable, Any], models: dict[Hashable, Any]
) -> tuple[types.Icon, ...] | None:
    """A tool's icons as SDK models, one tuple for equal lists (a server often gives all its tools the same)."""
    if value is None:
        return None
    value = shared(value, shapes)
    key = (types.Icon, id(value))
    if key not in models:
        try:
            models[key] = tuple(types.Icon.model_validate(icon, by_name=False) for icon in value)
        except ValidationError as error:
            raise ToolExecutionError(f"server listed a tool with malformed icons: {error}") from None
    icons: tuple[types.Icon, ...] = models[key]
    return icons


def shared(value: Any, shapes: dict[Hashable, Any]) -> Any:
    """`value` (JSON data) with every dict and list replaced by the equal one already in `shapes`,
    entering those not seen yet. The result must not be changed in place: others hold its parts."""
    if isinstance(value, Mapping):
        items = [(key, shared(item, shapes)) for key, item in value.items()]
        return shapes.setdefault(("object", *((key, _identity(item)) for key, item in items)), dict(items))
    if isinstance(value, list):
        elements = [shared(item, shapes) for item in value]
        return shapes.setdefault(("array", *map(_identity, elements)), elements)
    return value


def _identity(value: Any) -> Hashable:
    # Containers are already shared, so equal ones are the same object; scalars compare by type
    # and value (True is not 1).
    return id(value) if isinstance(value, dict | list) else (type(value), value)


def _bounded(description: str) -> str:
    # A description is read by the model on every listing; one server must not flood its context.
    if len(description) <= MAX_DESCRIPTION_CHARS:
        return description
    return description[:MAX_DESCRIPTION_CHARS] + f" [... {len(description) - MAX_DESCRIPTION_CHARS} characters cut]"


def _sandbox_kind(sandbox: Any) -> str | None:
    return None if sandbox is None else str(sandbox.mode)


class ListingSlots:
    """At most `size` servers' first listings in flight at once, across a gateway's upstreams.

    Servers starting together answer their first `tools/list` together, and every page decoded
    before any is made into records raises the heap's peak; the memory freed after it stays
    scattered in half-used arenas (docs/decisions/0039-two-first-listings-in-flight.md).
    A listing waits at most `patience` seconds for a slot, then goes ahead without one: a server
    that never answers holds up another server's listing by that much once, never more.
    """

    def __init__(self, size: int = LISTINGS_AT_ONCE, patience: float = SLOT_PATIENCE) -> None:
        self._free = anyio.Semaphore(size)
        self._patience = patience

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a slot while listing, or none after waiting `patience` seconds for one."""
        held = False
        with anyio.move_on_after(self._patience):
            await self._free.acquire()
            held = True
        try:
            yield
        finally:
            if held:
                self._free.release()


PageFetch = Callable[[str | None], Awaitable[tuple[list[Any], str | None]]]
"""One page of a listing by cursor: its items and the next cursor (None after the last page)."""


async def all_pages(fetch: PageFetch, method: str) -> list[Any]:
    """Every item of a paged listing, page after page; a server that never stops paging is refused."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page, cursor = await fetch(cursor)
        items.extend(page)
        if not cursor:
            return items
    raise ToolExecutionError(f"server lists more than {MAX_PAGES} pages of {method}")


def paged(method: Callable[..., Awaitable[Any]], field: str) -> PageFetch:
    """A listing method of the SDK's client session, whose pages hold their items in `field`, as a fetch of one page."""

    async def fetch(cursor: str | None) -> tuple[list[Any], str | None]:
        result = await method(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        return list(getattr(result, field)), result.next_cursor

    return fetch
