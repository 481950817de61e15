"""The merged catalog: names both ways, routes for resources and prompts, and its own page cursors."""

from __future__ import annotations

from dataclasses import replace

import mcp_types as types
import pytest

from gateway.auth.policy import derive_risk
from gateway.catalog.merged import Catalog, Route, SourceListing, page
from gateway.catalog.naming import VALID_NAME
from gateway.catalog.ownership import NameBook
from gateway.catalog.tools import Risk, ToolRecord
from gateway.errors import ProtocolError


def listing(source: str, *tools: str, namespace: str | None = None, **extra: object) -> SourceListing:
    """What a source with these tool names lists (under its own name as namespace unless given one)."""
    records = tuple(ToolRecord(name=tool, source=source, original_name=tool) for tool in tools)
    return SourceListing(source=source, namespace=source if namespace is None else namespace, tools=records, **extra)  # type: ignore[arg-type]


def test_tools_follow_the_configured_source_order_whatever_the_arrival_order() -> None:
    catalog = Catalog(order=["alpha", "beta"])
    catalog.update(listing("beta", "echo"))
    catalog.update(listing("alpha", "echo"))
    assert [tool.name for tool in catalog.tools] == ["alpha__echo", "beta__echo"]
    assert catalog.sources() == ["alpha", "beta"]


def test_an_exposed_name_maps_back_to_its_source_and_original() -> None:
    catalog = Catalog()
    catalog.update(listing("weather", "get.forecast"))
    (tool,) = catalog.tools
    assert VALID_NAME.match(tool.name)
    found = catalog.tool(tool.name)
    assert found is not None and (found.source, found.original_name) == ("weather", "get.forecast")


def test_a_prefix_that_runs_into_a_name_already_held_leaves_the_later_tool_out() -> None:
    catalog = Catalog(order=["a__b", "a"])
    catalog.update(listing("a", "b__c"))
    catalog.update(listing("a__b", "c"))
    assert [(tool.name, tool.source) for tool in catalog.tools] == [("a__b__c", "a")]
    (left,) = catalog.withheld
    assert (left.source, left.original, left.name, left.holder) == ("a__b", "c", "a__b__c", "a")
    assert "belongs to server 'a', which held it first" in left.describe()


def test_a_name_under_another_source_s_namespace_is_never_given_to_a_source_without_one() -> None:
    book = NameBook()
    book.protect({"calc": "calc", "python": "python"})
    catalog = Catalog(order=["plain", "calc"], names=book)
    catalog.update(listing("plain", "calc__evaluate", "python__run_python", "python", "calcx__y", namespace=""))
    assert [tool.name for tool in catalog.tools] == ["python", "calcx__y"]
    assert [(left.name, left.holder) for left in catalog.withheld] == [
        ("calc__evaluate", "calc"),
        ("python__run_python", "python"),
    ]
    catalog.update(listing("calc", "evaluate"))
    assert catalog.tool("calc__evaluate").source == "calc"  # type: ignore[union-attr]


def test_of_two_namespaces_that_prefix_a_name_the_longer_decides_whose_it_is() -> None:
    book = NameBook()
    book.protect({"a": "a", "a__b": "b"})
    catalog = Catalog(order=["a", "b"], names=book)
    catalog.update(listing("a", "b__c", "x"))
    catalog.update(listing("b", "c", namespace="a__b"))
    assert [(tool.name, tool.source) for tool in catalog.tools] == [("a__x", "a"), ("a__b__c", "b")]
    assert [(left.source, left.holder) for left in catalog.withheld] == [("a", "b")]


def test_an_owned_name_stays_with_its_owner_whoever_lists_first() -> None:
    book = NameBook()
    book.load([("echo", "one", None)])
    catalog = Catalog(order=["two", "one"], names=book)
    catalog.update(listing("two", "echo", namespace=""))
    assert catalog.tools == [] and catalog.tool("echo") is None
    catalog.update(listing("one", "echo", namespace=""))
    assert [(tool.name, tool.source) for tool in catalog.tools] == [("echo", "one")]
    assert [(left.source, left.holder) for left in catalog.withheld] == [("two", "one")]


def test_a_name_keeps_the_highest_risk_it_carried_below_an_operator_s_setting() -> None:
    book = NameBook()
    book.observe("python__run_python", Risk.HIGH)
    book.observe("python__run_python", Risk.LOW)
    catalog = Catalog(names=book)
    read_only = types.ToolAnnotations(read_only_hint=True)
    record = ToolRecord(name="run_python", source="python", original_name="run_python", annotations=read_only)
    catalog.update(SourceListing(source="python", namespace="python", tools=(record,)))
    (tool,) = catalog.tools
    assert derive_risk(record) is Risk.LOW and derive_risk(tool) is Risk.HIGH
    assert derive_risk(replace(tool, risk=Risk.LOW)) is Risk.LOW


def test_an_override_is_the_exposed_name_and_made_valid_when_it_is_not() -> None:
    catalog = Catalog()
    catalog.update(listing("s", "one", "two", wanted_names={"one": "first", "two": "second.tool"}))
    names = [tool.name for tool in catalog.tools]
    assert names[0] == "first"
    assert names[1].startswith("second_tool_") and VALID_NAME.match(names[1])


def test_replacing_one_source_leaves_the_others_untouched() -> None:
    catalog = Catalog(order=["a", "b"])
    catalog.update(listing("a", "x"))
    catalog.update(listing("b", "y"))
    catalog.update(listing("a", "x", "z"))
    assert [tool.name for tool in catalog.tools] == ["a__x", "a__z", "b__y"]
    catalog.remove("a")
    assert [tool.name for tool in catalog.tools] == ["b__y"]
    assert catalog.tool("a__x") is None


def test_resources_templates_and_prompts_route_back_to_their_source() -> None:
    catalog = Catalog()
    resource = types.Resource(uri="toy://readme", name="readme")
    template = types.ResourceTemplate(uri_template="toy://items/{item}", name="item")
    prompt = types.Prompt(name="greet")
    catalog.update(listing("toy", namespace="t", resources=(resource,), templates=(template,), prompts=(prompt,)))
    assert [r.uri for r in catalog.resources] == ["t+toy://readme"]
    assert [t.uri_template for t in catalog.templates] == ["t+toy://items/{item}"]
    assert [p.name for p in catalog.prompts] == ["t__greet"]
    assert catalog.resource_route("t+toy://readme") == Route("toy", "toy://readme")
    assert catalog.resource_route("t+toy://items/cup") == Route("toy", "toy://items/cup")
    assert catalog.prompt_route("t__greet") == Route("toy", "greet")


@pytest.mark.parametrize("uri", ["toy://readme", "other+toy://readme"])
def test_a_resource_of_no_known_namespace_is_a_protocol_error(uri: str) -> None:
    catalog = Catalog()
    catalog.update(listing("toy", resources=(types.Resource(uri="toy://readme", name="readme"),)))
    with pytest.raises(ProtocolError, match="Unknown resource"):
        catalog.resource_route(uri)


def test_an_unknown_prompt_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="Unknown prompt"):
        Catalog().prompt_route("toy__greet")


def test_pages_cover_every_item_once_in_order() -> None:
    items = [f"item{i}" for i in range(11)]
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(10):
        chunk, cursor = page(items, cursor, 4, key=str)
        seen += chunk
        if cursor is None:
            break
    assert seen == items


def test_a_listing_that_fits_one_page_has_no_cursor() -> None:
    assert page(["a", "b"], None, 5, key=str) == (["a", "b"], None)
    assert page([], None, 5, key=str) == ([], None)


def test_a_page_resumes_after_its_last_item_when_items_were_added_before_it() -> None:
    first, cursor = page(["b", "c", "d", "e"], None, 2, key=str)
    second, _ = page(["a", "b", "c", "d", "e"], cursor, 2, key=str)
    assert first == ["b", "c"] and second == ["d", "e"]


@pytest.mark.parametrize("cursor", ["not-a-cursor!", "e30", "WyJ4IiwgLTFd", "bnVsbA"])
def test_a_cursor_the_gateway_did_not_mint_is_a_protocol_error(cursor: str) -> None:
    with pytest.raises(ProtocolError, match="Invalid cursor"):
        page(["a", "b", "c"], cursor, 1, key=str)


def test_a_source_without_a_namespace_keeps_its_names_and_uris() -> None:
    catalog = Catalog()
    resource = types.Resource(uri="demo://readme", name="readme")
    template = types.ResourceTemplate(uri_template="demo://blob/{id}", name="blob")
    unprefixed = SourceListing(
        source="demo",
        namespace="",
        tools=(ToolRecord(name="echo", source="demo", original_name="echo"),),
        resources=(resource,),
        templates=(template,),
        prompts=(types.Prompt(name="hello"),),
    )
    catalog.update(unprefixed)
    assert [tool.name for tool in catalog.tools] == ["echo"]
    assert [prompt.name for prompt in catalog.prompts] == ["hello"]
    assert ([r.uri for r in catalog.resources], [t.uri_template for t in catalog.templates]) == (
        ["demo://readme"],
        ["demo://blob/{id}"],
    )
    assert catalog.resource_route("demo://blob/7") == Route("demo", "demo://blob/7")
    assert catalog.resource_route("demo://blob/{id}") == Route("demo", "demo://blob/{id}")
    # A URI it neither lists nor templates is still its to answer.
    assert catalog.resource_route("demo://other") == Route("demo", "demo://other")
    assert catalog.source_of("demo://readme") == "demo"


def test_a_uri_two_sources_without_a_namespace_list_goes_to_the_first_and_the_other_gets_its_name() -> None:
    readme = types.Resource(uri="demo://readme", name="readme")
    catalog = Catalog(order=["one", "two"])
    catalog.update(SourceListing(source="two", namespace="", resources=(readme,)))
    catalog.update(SourceListing(source="one", namespace="", resources=(readme,)))
    assert [r.uri for r in catalog.resources] == ["demo://readme", "two+demo://readme"]
    assert catalog.resource_route("demo://readme") == Route("one", "demo://readme")
    assert catalog.resource_route("two+demo://readme") == Route("two", "demo://readme")
    assert catalog.exposed_uri("two", "demo://readme") == "two+demo://readme"
    assert catalog.exposed_uri("two", "demo://unlisted") == "two+demo://unlisted"
    assert catalog.exposed_uri("one", "demo://unlisted") == "demo://unlisted"
    (clash,) = catalog.clashes
    assert "kept one/demo://readme" in clash.describe() and "two/demo://readme -> two+demo://readme" in clash.describe()


def test_links_in_a_result_are_exposed_and_other_content_is_untouched() -> None:
    catalog = Catalog()
    catalog.update(listing("toy", namespace="t", resources=(types.Resource(uri="toy://readme", name="readme"),)))
    contents = types.TextResourceContents(uri="toy://readme", text="r")
    result = types.CallToolResult(
        content=[
            types.TextContent(text="toy://readme"),
            types.ResourceLink(uri="toy://items/1", name="item"),
            types.EmbeddedResource(resource=contents),
        ]
    )
    exposed = catalog.exposed_links("toy", result)
    assert exposed.content[0] == result.content[0]
    assert exposed.content[1].uri == "t+toy://items/1"  # type: ignore[union-attr]
    assert exposed.content[2].resource.uri == "t+toy://readme"  # type: ignore[union-attr]
    assert catalog.exposed_links("local", result) is result


def test_a_source_joining_leaves_the_exposed_records_of_the_others_as_they_were() -> None:
    catalog = Catalog(order=["a", "b"])
    catalog.update(listing("a", "x"))
    before = catalog.tool("a__x")
    catalog.update(listing("b", "x"))
    assert catalog.tool("a__x") is before
    catalog.update(listing("a", "x"))  # listed again: new records, exposed anew
    assert catalog.tool("a__x") is not before and catalog.tool("a__x") == before


def test_a_view_a_tool_names_is_exposed_inside_its_scheme_and_routes_back_to_its_source() -> None:
    catalog = Catalog(order=["apps", "other"])
    meta = {"ui": {"resourceUri": "ui://clock/view.html"}, "ui/resourceUri": "ui://clock/view.html", "k": 1}
    clock = ToolRecord(name="clock", source="apps", original_name="clock", meta=meta)
    catalog.update(SourceListing(source="apps", namespace="apps", tools=(clock,)))
    catalog.update(listing("other", resources=(types.Resource(uri="ui://clock/view.html", name="view"),)))
    exposed = catalog.tool("apps__clock")
    assert exposed is not None and exposed.meta == {
        "ui": {"resourceUri": "ui://apps+clock/view.html"},
        "ui/resourceUri": "ui://apps+clock/view.html",
        "k": 1,
    }
    assert clock.meta is meta and meta["ui"] == {"resourceUri": "ui://clock/view.html"}
    assert [resource.uri for resource in catalog.resources] == ["ui://other+clock/view.html"]
    assert catalog.resource_route("ui://apps+clock/view.html") == Route("apps", "ui://clock/view.html")
    assert catalog.resource_route("apps+ui://clock/view.html") == Route("apps", "ui://clock/view.html")
    assert catalog.resource_route("ui://other+clock/view.html") == Route("other", "ui://clock/view.html")
    catalog.update(listing("other"))  # the other source leaves: the exposed record is kept
    assert catalog.tool("apps__clock") is exposed
