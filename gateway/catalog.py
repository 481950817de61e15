"""The merged catalog: every source's tools, resources and prompts under exposed names.

Pure: sources hand in what they list, the catalog assigns exposed names (see `naming`),
answers look-ups in both directions and pages listings with cursors of its own.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import mcp_types as types

from gateway.errors import ProtocolError, clip
from gateway.naming import Clash, assign, exposed_name, fit_name
from gateway.tools import ToolRecord

URI_JOIN = "+"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SourceListing:
    """What one source offers, under its own (original) names."""

    source: str
    namespace: str
    tools: tuple[ToolRecord, ...] = ()
    resources: tuple[types.Resource, ...] = ()
    templates: tuple[types.ResourceTemplate, ...] = ()
    prompts: tuple[types.Prompt, ...] = ()
    wanted_names: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Route:
    """Where an exposed resource or prompt lives."""

    source: str
    original: str


class Catalog:
    """The union of all sources, rebuilt whenever one source's listing changes."""

    def __init__(self, order: Sequence[str] = (), reserved: Sequence[str] = ()) -> None:
        self._order = {name: index for index, name in enumerate(order)}
        self._reserved = tuple(reserved)
        self._listings: dict[str, SourceListing] = {}
        self.tools: list[ToolRecord] = []
        self.resources: list[types.Resource] = []
        self.templates: list[types.ResourceTemplate] = []
        self.prompts: list[types.Prompt] = []
        self.clashes: list[Clash] = []
        self._tools: dict[str, ToolRecord] = {}
        self._resources: dict[str, Route] = {}
        self._prompts: dict[str, Route] = {}
        self._namespaces: dict[str, str] = {}

    def sources(self) -> list[str]:
        """Names of the sources that currently contribute, in catalog order."""
        return [listing.source for listing in self._ordered()]

    def reorder(self, order: Sequence[str]) -> None:
        """Rank sources as `order` says (the live server set changed); unnamed ones come last."""
        ranks = {name: index for index, name in enumerate(order)}
        if ranks != self._order:
            self._order = ranks
            self._rebuild()

    def update(self, listing: SourceListing) -> None:
        """Replace one source's part of the catalog."""
        self._listings[listing.source] = listing
        self._rebuild()

    def remove(self, source: str) -> None:
        """Drop one source's part of the catalog."""
        if self._listings.pop(source, None) is not None:
            self._rebuild()

    def tool(self, name: str) -> ToolRecord | None:
        """The tool with that exposed name."""
        return self._tools.get(name)

    def resource_route(self, uri: str) -> Route:
        """The source and original URI behind an exposed resource URI (templates included)."""
        route = self._resources.get(uri)
        if route is not None:
            return route
        namespace, sep, original = uri.partition(URI_JOIN)
        source = self._namespaces.get(namespace)
        if not sep or source is None:
            raise ProtocolError(f"Unknown resource: {clip(uri)}")
        return Route(source, original)

    def source_of(self, exposed_uri: str) -> str | None:
        """The source behind an exposed resource URI or URI template, from its namespace prefix."""
        namespace, sep, _ = exposed_uri.partition(URI_JOIN)
        return self._namespaces.get(namespace) if sep else None

    def prompt_route(self, name: str) -> Route:
        """The source and original name behind an exposed prompt name."""
        route = self._prompts.get(name)
        if route is None:
            raise ProtocolError(f"Unknown prompt: {clip(name)}")
        return route

    def _ordered(self) -> list[SourceListing]:
        return sorted(self._listings.values(), key=lambda s: (self._order.get(s.source, len(self._order)), s.source))

    def _rebuild(self) -> None:
        listings = self._ordered()
        wanted = [_wanted_tool_name(listing, tool.original_name) for listing in listings for tool in listing.tools]
        names, clashes = assign(wanted, self._reserved)
        records = [tool for listing in listings for tool in listing.tools]
        self.tools = [record.renamed(name) for record, name in zip(records, names, strict=True)]
        self._tools = {record.name: record for record in self.tools}

        prompt_wanted = [
            (exposed_name(listing.namespace, prompt.name), f"{listing.source}/{prompt.name}")
            for listing in listings
            for prompt in listing.prompts
        ]
        prompt_names, prompt_clashes = assign(prompt_wanted)
        prompts = [(listing.source, prompt) for listing in listings for prompt in listing.prompts]
        self.prompts = []
        self._prompts = {}
        for (source, prompt), name in zip(prompts, prompt_names, strict=True):
            self.prompts.append(prompt.model_copy(update={"name": name}))
            self._prompts[name] = Route(source, prompt.name)
        self.clashes = clashes + prompt_clashes

        self._namespaces = {listing.namespace: listing.source for listing in listings}
        self.resources = []
        self._resources = {}
        self.templates = []
        for listing in listings:
            for resource in listing.resources:
                uri = f"{listing.namespace}{URI_JOIN}{resource.uri}"
                self.resources.append(resource.model_copy(update={"uri": uri}))
                self._resources[uri] = Route(listing.source, resource.uri)
            for template in listing.templates:
                pattern = f"{listing.namespace}{URI_JOIN}{template.uri_template}"
                self.templates.append(template.model_copy(update={"uri_template": pattern}))


def _wanted_tool_name(listing: SourceListing, original: str) -> tuple[str, str]:
    """The name a tool asks for (the operator's override, made valid, else namespaced) and its key."""
    key = f"{listing.source}/{original}"
    # An override is checked against MCP's looser rule (dots, 128 characters); clients need ours.
    override = listing.wanted_names.get(original)
    return (fit_name(override, key=key) if override else exposed_name(listing.namespace, original)), key


def page(items: Sequence[T], cursor: str | None, size: int, key: Callable[[T], str]) -> tuple[list[T], str | None]:
    """One page of `items` after `cursor`, and the cursor of the next page (None at the end).

    A cursor names the last item served and its position, so a listing that changed
    between two pages resumes after that item when it still exists.
    """
    start = 0
    if cursor:
        after, position = _decode_cursor(cursor)
        # Keys may repeat (one URI listed twice): the item at the position is the one served, if it is still there.
        if 0 < position <= len(items) and key(items[position - 1]) == after:
            start = position
        else:
            start = next((i + 1 for i, item in enumerate(items) if key(item) == after), position)
    chunk = list(items[start : start + size])
    end = start + len(chunk)
    if end >= len(items) or not chunk:
        return chunk, None
    return chunk, _encode_cursor(key(chunk[-1]), end)


def _encode_cursor(after: str, position: int) -> str:
    raw = json.dumps([after, position], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[str, int]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        after, position = json.loads(base64.urlsafe_b64decode(padded))
        if isinstance(after, str) and isinstance(position, int) and position >= 0:
            return after, position
    except (binascii.Error, ValueError, TypeError, RecursionError):
        # RecursionError: a forged cursor can nest JSON arrays deeper than the decoder recurses.
        pass
    raise ProtocolError(f"Invalid cursor: {cursor[:40]}")
