"""What an upstream server lists, as the gateway holds it: tool records with the operator's settings
applied and descriptions bounded, and listings read page after page."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any

import mcp_types as types

from gateway.config.model import ServerConfig
from gateway.errors import ToolExecutionError
from gateway.tools import ToolRecord

MAX_DESCRIPTION_CHARS = 8000


def records_for(config: ServerConfig, tools: list[types.Tool]) -> tuple[ToolRecord, ...]:
    """The server's tools as records, with the operator's per-server and per-tool settings applied.

    Equal parts of the input schemas (a whole schema, a `{"type": "string"}`) become one object
    shared by every record, and so do equal tag sets: a catalog of thousands of tools
    holds each shape once, not per tool.
    """
    records = []
    shapes: dict[Hashable, Any] = {}
    tag_sets: dict[tuple[str, ...], frozenset[str]] = {}
    for tool in tools:
        settings = config.settings_for(tool.name)
        if not settings.enabled:
            continue
        record = ToolRecord.from_mcp(config.name, tool)
        records.append(
            ToolRecord(
                name=record.name,
                source=record.source,
                original_name=record.original_name,
                description=_bounded(record.description),
                input_schema=shared(record.input_schema, shapes),
                output_schema=record.output_schema,
                title=record.title,
                annotations=record.annotations,
                risk=settings.risk or config.risk,
                layer=settings.layer or config.layer,
                # The server's and the tool's own: one set for all the tools with the same (about 200 bytes each).
                tags=tag_sets.setdefault(settings.tags, frozenset(settings.tags)),
                sandbox=_sandbox_kind(settings.sandbox or config.sandbox),
                timeout=settings.timeout or config.timeout,
                execution=record.execution,
            )
        )
    return tuple(records)


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


async def all_pages(fetch: Callable[[str | None], Awaitable[Any]], field: str) -> list[Any]:
    """Every item of a paged listing, page after page; a server that never stops paging is refused."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(1000):
        result = await fetch(cursor)
        items.extend(getattr(result, field))
        cursor = result.next_cursor
        if not cursor:
            return items
    raise ToolExecutionError(f"server lists more than 1000 pages of {field}")


def paged(method: Callable[..., Awaitable[Any]]) -> Callable[[str | None], Awaitable[Any]]:
    """A listing method of the SDK's client session as a fetch of one page by cursor."""

    def fetch(cursor: str | None) -> Awaitable[Any]:
        return method(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)

    return fetch
