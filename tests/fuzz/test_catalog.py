"""The catalog takes any listing without failing, maps every exposed name back, leaves a tool out only
for a name that is taken, and pages each item once."""

from __future__ import annotations

import base64
import json
from typing import Any

import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.catalog.merged import Catalog, Route, SourceListing, page
from gateway.catalog.naming import VALID_NAME
from gateway.catalog.tools import ToolRecord
from gateway.errors import ProtocolError

from . import RUNS, TEXT

# Namespaces come from the configuration, which allows only these (gateway/problems.py NAME_PATTERN).
NAMESPACE = st.from_regex(r"[A-Za-z0-9_-]{1,32}", fullmatch=True)


@st.composite
def listings(draw: st.DrawFn) -> list[SourceListing]:
    """Listings of distinct sources with distinct namespaces, under arbitrary tool, prompt and resource names."""
    namespaces = draw(st.lists(NAMESPACE, min_size=1, max_size=4, unique=True))
    result = []
    for namespace in namespaces:
        source = draw(st.one_of(st.just(namespace), TEXT))
        originals = draw(st.lists(TEXT, max_size=8, unique=True))
        overrides = draw(st.dictionaries(st.sampled_from(originals), TEXT, max_size=3)) if originals else {}
        tools = tuple(ToolRecord(name=name, source=source, original_name=name) for name in originals)
        prompts = tuple(types.Prompt(name=name) for name in draw(st.lists(TEXT, max_size=5, unique=True)))
        uris = draw(st.lists(TEXT, max_size=5))
        resources = tuple(types.Resource(uri=uri, name="r") for uri in uris)
        patterns = draw(st.lists(TEXT, max_size=3))
        templates = tuple(types.ResourceTemplate(uri_template=pattern, name="t") for pattern in patterns)
        result.append(SourceListing(source, namespace, tools, resources, templates, prompts, wanted_names=overrides))
    # Two listings of one source replace each other; keep the last as the catalog would.
    return list({listing.source: listing for listing in result}.values())


@RUNS
def test_any_listing_is_taken_and_every_exposed_name_maps_back(runs: settings) -> None:
    @runs
    @given(listings(), st.lists(TEXT, max_size=5))
    def check(sources: list[SourceListing], reserved: list[str]) -> None:
        catalog = Catalog(order=[listing.source for listing in reversed(sources)], reserved=reserved)
        for listing in sources:
            catalog.update(listing)
        names = [tool.name for tool in catalog.tools]
        assert len(set(names)) == len(names)
        assert not set(names) & set(reserved)
        assert len(names) + len(catalog.withheld) == sum(len(listing.tools) for listing in sources)
        originals = {(listing.source, tool.original_name) for listing in sources for tool in listing.tools}
        shown = {(tool.source, tool.original_name) for tool in catalog.tools}
        assert shown | {(left.source, left.original) for left in catalog.withheld} == originals
        for left in catalog.withheld:
            # A tool is left out only for a name the gateway or another listed tool has.
            assert left.name in reserved or catalog.tool(left.name) is not None
        for name in names:
            assert VALID_NAME.fullmatch(name)
            found = catalog.tool(name)
            assert found is not None and (found.source, found.original_name) in originals
        prompts = {(listing.source, prompt.name) for listing in sources for prompt in listing.prompts}
        assert {astuple(catalog.prompt_route(prompt.name)) for prompt in catalog.prompts} == prompts
        assert len(catalog.prompts) == len(prompts)
        resources = {(listing.source, resource.uri) for listing in sources for resource in listing.resources}
        assert {astuple(catalog.resource_route(resource.uri)) for resource in catalog.resources} == resources
        for template in catalog.templates:
            assert catalog.source_of(template.uri_template) is not None

    check()


def astuple(route: Route) -> tuple[str, str]:
    """A route as a plain pair."""
    return route.source, route.original


@RUNS
def test_removing_every_source_empties_the_catalog(runs: settings) -> None:
    @runs
    @given(listings())
    def check(sources: list[SourceListing]) -> None:
        catalog = Catalog()
        for listing in sources:
            catalog.update(listing)
        for listing in sources:
            catalog.remove(listing.source)
        assert (catalog.tools, catalog.prompts, catalog.resources, catalog.templates) == ([], [], [], [])

    check()


def forged_cursor(value: Any) -> str:
    """A cursor in the catalog's encoding around arbitrary JSON, as a hostile client could craft it."""
    return encoded(json.dumps(value))


def encoded(text: str) -> str:
    """`text` in the catalog's cursor encoding (unpadded URL-safe base64)."""
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


DEEP_JSON = "[" * 5000 + "]" * 5000


CURSORS = st.one_of(
    TEXT,
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=", max_size=60),
    st.builds(
        forged_cursor,
        st.one_of(
            st.tuples(TEXT, st.integers()),
            st.tuples(TEXT, st.integers(min_value=10**20)),
            st.lists(st.one_of(TEXT, st.integers(), st.none(), st.floats()), max_size=4),
            st.dictionaries(TEXT, st.integers(), max_size=2),
        ),
    ),
    st.sampled_from([encoded(DEEP_JSON), encoded('["x", ' + "9" * 5000 + "]"), encoded('["x", 1e999]')]),
)
KEYS = st.lists(st.text(alphabet="abc", max_size=3), max_size=25)


@RUNS
def test_any_cursor_gives_a_page_or_a_protocol_error(runs: settings) -> None:
    @runs
    @given(KEYS, CURSORS, st.integers(min_value=1, max_value=10))
    def check(keys: list[str], cursor: str, size: int) -> None:
        try:
            chunk, _ = page(keys, cursor, size, key=str)
        except ProtocolError:
            return
        assert len(chunk) <= size

    check()


@RUNS
def test_a_valid_cursor_of_another_listing_gives_a_page_or_a_protocol_error(runs: settings) -> None:
    @runs
    @given(KEYS, KEYS, st.integers(min_value=1, max_value=5))
    def check(first: list[str], second: list[str], size: int) -> None:
        _, cursor = page(first, None, size, key=str)
        try:
            chunk, _ = page(second, cursor, size, key=str)
        except ProtocolError:
            return
        assert len(chunk) <= size

    check()


@RUNS
def test_paging_with_the_returned_cursors_yields_every_item_exactly_once(runs: settings) -> None:
    @runs
    @given(KEYS, st.integers(min_value=1, max_value=6))
    def check(keys: list[str], size: int) -> None:
        # Items are (position, key): keys repeat (two resources with one URI), positions tell them apart.
        items = list(enumerate(keys))
        served: list[tuple[int, str]] = []
        cursor: str | None = None
        for _ in range(len(items) + 1):
            chunk, cursor = page(items, cursor, size, key=lambda item: item[1])
            served += chunk
            if cursor is None:
                break
        assert cursor is None, "paging did not end"
        assert served == items

    check()


def test_a_deeply_nested_forged_cursor_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        page(["a", "b"], encoded(DEEP_JSON), 1, key=str)
