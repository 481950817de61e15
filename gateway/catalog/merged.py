"""The merged catalog: every source's tools, resources and prompts under exposed names.

Pure: sources hand in what they list, the catalog assigns exposed names (see `naming`), leaves
out a tool whose name is another source's (see `ownership`), answers look-ups in both directions
and pages listings with cursors of its own.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

import mcp_types as types
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

from gateway.catalog.apps import UI_SCHEME, view_of, with_view
from gateway.catalog.naming import Clash, assign, exposed_name, fit_name, suffixed
from gateway.catalog.ownership import NameBook, Withheld
from gateway.catalog.tools import ToolRecord
from gateway.errors import ProtocolError, clip

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

    def __init__(self, order: Sequence[str] = (), reserved: Sequence[str] = (), names: NameBook | None = None) -> None:
        self._order = {name: index for index, name in enumerate(order)}
        self._reserved = frozenset(reserved)
        self.names = names or NameBook()
        """Who owns each exposed tool name; change it through the gateway, then `refresh`."""
        self._listings: dict[str, SourceListing] = {}
        self.tools: list[ToolRecord] = []
        self.resources: list[types.Resource] = []
        self.templates: list[types.ResourceTemplate] = []
        self.prompts: list[types.Prompt] = []
        self.clashes: list[Clash] = []
        self.withheld: list[Withheld] = []
        """Tools left out because their exposed names are other sources' (or the gateway's own)."""
        self._tools: dict[str, ToolRecord] = {}
        self._resources: dict[str, Route] = {}
        self._prompts: dict[str, Route] = {}
        self._templates: dict[str, Route] = {}
        self._namespaces: dict[str, str] = {}
        self._prefixes: dict[str, str] = {}
        self._fallbacks: dict[str, str] = {}
        self._matchers: list[tuple[str, UriTemplate]] = []
        self._answers_unknown: str | None = None
        self._exposed: dict[tuple[str, str], str] = {}
        # A source's record by identity -> (that record, it under its exposed name), from the last rebuild.
        self._renamed: dict[int, tuple[ToolRecord, ToolRecord]] = {}

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

    def refresh(self) -> None:
        """Rebuild after the name book changed (names claimed elsewhere, freed, zones changed)."""
        self._rebuild()

    def listing(self, source: str) -> SourceListing | None:
        """What `source` listed last, if it is in the catalog."""
        return self._listings.get(source)

    def tool(self, name: str) -> ToolRecord | None:
        """The tool with that exposed name."""
        return self._tools.get(name)

    def resource_route(self, uri: str) -> Route:
        """The source and original URI behind an exposed resource URI (templates included).

        A listed URI or template (or a view a tool names) maps back exactly; `<namespace>+<uri>`
        (`ui://<namespace>+<rest>` for a view) goes to that namespace's source; a URI of a source
        without a prefix goes to the first whose templates match it, else to the first such source
        that lists resources (it answers for URIs it does not list).
        """
        route = self._resources.get(uri) or self._templates.get(uri)
        if route is not None:
            return route
        namespace, original = split_uri(uri)
        source = self._namespaces.get(namespace) if original is not None else None
        if source is not None and original is not None:
            return Route(source, original)
        for source, template in self._matchers:
            if template.match(uri) is not None:
                return Route(source, uri)
        if self._answers_unknown is not None:
            return Route(self._answers_unknown, uri)
        raise ProtocolError(f"Unknown resource: {clip(uri)}")

    def source_of(self, exposed_uri: str) -> str | None:
        """The source behind a listed (exposed) resource URI or URI template."""
        route = self._resources.get(exposed_uri) or self._templates.get(exposed_uri)
        return route.source if route is not None else None

    def exposed_uri(self, source: str, uri: str) -> str:
        """The URI under which a client reads `source`'s resource `uri` through the gateway."""
        listed = self._exposed.get((source, uri))
        if listed is not None:
            return listed
        prefix = self._prefixes.get(source)
        if prefix is None:
            return uri  # a source that offers no resources: nothing could read it back
        if prefix:
            return joined_uri(prefix, uri)
        try:
            if self.resource_route(uri).source == source:
                return uri
        except ProtocolError:
            pass
        return joined_uri(self._fallbacks[source], uri)

    def exposed_links(self, source: str, result: types.CallToolResult) -> types.CallToolResult:
        """`result` with each resource link's and embedded resource's URI exposed, so a client can read it back."""
        content = [self._exposed_block(source, block) for block in result.content]
        if all(new is old for new, old in zip(content, result.content, strict=True)):
            return result
        return result.model_copy(update={"content": content})

    def exposed_prompt(self, source: str, result: types.GetPromptResult) -> types.GetPromptResult:
        """`result` with the URI of each message's resource link or embedded resource exposed, as `exposed_links`."""
        messages = [
            message
            if (block := self._exposed_block(source, message.content)) is message.content
            else message.model_copy(update={"content": block})
            for message in result.messages
        ]
        if all(new is old for new, old in zip(messages, result.messages, strict=True)):
            return result
        return result.model_copy(update={"messages": messages})

    def _exposed_block(self, source: str, block: types.ContentBlock) -> types.ContentBlock:
        if isinstance(block, types.ResourceLink):
            uri = self.exposed_uri(source, block.uri)
            return block if uri == block.uri else block.model_copy(update={"uri": uri})
        if isinstance(block, types.EmbeddedResource):
            uri = self.exposed_uri(source, block.resource.uri)
            if uri != block.resource.uri:
                return block.model_copy(update={"resource": block.resource.model_copy(update={"uri": uri})})
        return block

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
        # Resources first: a tool naming a view is exposed with the view's exposed URI.
        resource_clashes = self._expose_resources(listings)
        records: list[ToolRecord] = []
        self.tools, self.withheld = [], []
        self._tools = {}
        for listing in listings:
            for record in listing.tools:
                name, _ = wanted_tool_name(listing, record.original_name)
                refused = self._refusal(listing.source, record.original_name, name)
                if refused is not None:
                    self.withheld.append(refused)
                    continue
                self.names.claim(name, listing.source)
                tool = self._exposed_record(record, name)
                records.append(record)
                self.tools.append(tool)
                self._tools[name] = tool
        # Sources join one at a time; the records of those already listed keep their exposed copies.
        self._renamed = {id(record): (record, tool) for record, tool in zip(records, self.tools, strict=True)}

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
        self.clashes = prompt_clashes + resource_clashes

    def _refusal(self, source: str, original: str, name: str) -> Withheld | None:
        if name in self._reserved:
            return Withheld(source, original, name, "gateway", f"the name '{name}' is one of the gateway's own tools")
        refused = self.names.withheld(source, original, name)
        if refused is None and name in self._tools:
            # Two tools of one source wanting one name (an override equal to another's name): the first keeps it.
            return Withheld(source, original, name, source, f"the name '{name}' is taken by another of its tools")
        return refused

    def _exposed_record(self, record: ToolRecord, name: str) -> ToolRecord:
        floor = self.names.floor(name)
        view = view_of(record.meta)
        exposed_view = None if view is None else self.exposed_uri(record.source, view)
        kept = self._renamed.get(id(record))
        if (
            kept is not None
            and kept[0] is record
            and kept[1].name == name
            and kept[1].risk_floor == floor
            and (view is None or view_of(kept[1].meta) == exposed_view)
        ):
            return kept[1]
        if record.meta is None or exposed_view is None or exposed_view == view:
            return replace(record, name=name, risk_floor=floor)
        return replace(record, name=name, risk_floor=floor, meta=with_view(record.meta, exposed_view))

    def _expose_resources(self, listings: list[SourceListing]) -> list[Clash]:
        """Expose every source's resources, templates and the views its tools name: `<namespace>+<uri>`
        (`ui://<namespace>+<rest>` for a `ui://` URI), or as the source has them when its namespace is
        empty. Where such a URI is taken already (config order decides), the later source's is exposed
        under its source name instead of its namespace. A view a tool names is routed like a listed
        resource but listed only if its server lists it (MCP Apps lets servers leave views out)."""
        views = {listing.source: _views(listing) for listing in listings}
        # Only a source that offers resources can answer a read of a URI it names in a result.
        self._prefixes = {
            listing.source: listing.namespace
            for listing in listings
            if listing.resources or listing.templates or views[listing.source]
        }
        self._namespaces = {listing.namespace: listing.source for listing in listings if listing.namespace}
        self._fallbacks = {}
        for listing in listings:
            if not listing.namespace:
                # Its own name prefixes what clashes; a name that is another's namespace gets a hash.
                name = listing.source if listing.source not in self._namespaces else suffixed(listing.source, "+")
                self._fallbacks[listing.source] = name
                self._namespaces.setdefault(name, listing.source)
        unprefixed = [listing for listing in listings if not listing.namespace]
        self._matchers = [
            (listing.source, template)
            for listing in unprefixed
            for template in map(_parsed_template, listing.templates)
            if template is not None
        ]
        self._answers_unknown = next(
            (
                listing.source
                for listing in unprefixed
                if listing.resources or listing.templates or views[listing.source]
            ),
            None,
        )
        self._exposed = {}
        self.resources, self._resources = [], {}
        self.templates, self._templates = [], {}
        clashes: list[Clash] = []
        for listing in listings:
            for resource in listing.resources:
                uri = self._claim(listing, resource.uri, self._resources, clashes)
                if uri is not None:
                    self._exposed.setdefault((listing.source, resource.uri), uri)
                    self.resources.append(resource.model_copy(update={"uri": uri}))
            for template in listing.templates:
                pattern = self._claim(listing, template.uri_template, self._templates, clashes)
                if pattern is not None:
                    self.templates.append(template.model_copy(update={"uri_template": pattern}))
            for view in views[listing.source]:
                if (listing.source, view) not in self._exposed:
                    uri = self._claim(listing, view, self._resources, clashes)
                    if uri is not None:
                        self._exposed[(listing.source, view)] = uri
        return clashes

    def _claim(
        self, listing: SourceListing, original: str, routes: dict[str, Route], clashes: list[Clash]
    ) -> str | None:
        """The exposed form of `original` for `listing`, entered in `routes`; None when it cannot be exposed."""
        wanted = joined_uri(listing.namespace, original) if listing.namespace else original
        exposed: str | None = wanted
        owner = routes.get(wanted)
        if owner is not None and owner.source != listing.source:
            fallback = self._fallbacks.get(listing.source)
            # A prefixed URI taken by a source without a prefix has nowhere else to go: it stays unlisted.
            exposed = joined_uri(fallback, original) if fallback else None
            moved = ((f"{listing.source}/{original}", exposed or "(not listed)"),)
            clashes.append(Clash(wanted, f"{owner.source}/{owner.original}", moved))
        if exposed is not None:
            routes.setdefault(exposed, Route(listing.source, original))
        return exposed


def joined_uri(prefix: str, uri: str) -> str:
    """`uri` exposed under `prefix`: `<prefix>+<uri>`, or `ui://<prefix>+<rest>` for a `ui://` URI,
    which MCP Apps hosts require to keep its scheme."""
    if uri.startswith(UI_SCHEME):
        return f"{UI_SCHEME}{prefix}{URI_JOIN}{uri[len(UI_SCHEME) :]}"
    return f"{prefix}{URI_JOIN}{uri}"


def split_uri(uri: str) -> tuple[str, str | None]:
    """The prefix and original URI of a URI `joined_uri` made; (uri, None) when it has no prefix."""
    inner = uri[len(UI_SCHEME) :] if uri.startswith(UI_SCHEME) else ""
    # The prefix is in a view's authority, before its path.
    if URI_JOIN in inner.partition("/")[0]:
        prefix, _, rest = inner.partition(URI_JOIN)
        return prefix, f"{UI_SCHEME}{rest}"
    prefix, sep, rest = uri.partition(URI_JOIN)
    return (prefix, rest) if sep else (uri, None)


def _views(listing: SourceListing) -> list[str]:
    """The views the source's tools name, each once, in listing order."""
    return list(dict.fromkeys(view for record in listing.tools if (view := view_of(record.meta)) is not None))


def _parsed_template(template: types.ResourceTemplate) -> UriTemplate | None:
    try:
        return UriTemplate.parse(template.uri_template)
    except InvalidUriTemplate:
        return None  # a template that cannot be matched; its URIs still reach the source by the fallback


def wanted_tool_name(listing: SourceListing, original: str) -> tuple[str, str]:
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
