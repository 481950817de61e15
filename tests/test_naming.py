"""Exposed names: valid everywhere, deterministic, unique, reported when they clash, and recognised when misspelt."""

from __future__ import annotations

import pytest

from gateway.catalog.naming import MAX_NAME, VALID_NAME, assign, exposed_name, fit_name, near_misses
from gateway.errors import UnknownToolError


def test_a_plain_name_is_namespace_separator_original() -> None:
    assert exposed_name("files", "read_file") == "files__read_file"


def test_an_empty_namespace_leaves_the_original_name() -> None:
    assert exposed_name("", "echo") == "echo"


@pytest.mark.parametrize(
    "original",
    ["get.weather", "with space", "ünïcödé", "slash/name", "", "x" * 200, "a" * 60 + ".b", "名前"],
)
def test_every_exposed_name_is_valid_for_clients(original: str) -> None:
    name = exposed_name("server", original)
    assert VALID_NAME.match(name), name


def test_names_are_the_same_on_every_call() -> None:
    assert exposed_name("s", "get.weather") == exposed_name("s", "get.weather")
    assert exposed_name("s", "y" * 100) == exposed_name("s", "y" * 100)


def test_a_name_too_long_is_cut_to_the_limit_keeping_its_start() -> None:
    name = exposed_name("server", "very_long_tool_name_" * 5)
    assert len(name) == MAX_NAME
    assert name.startswith("server__very_long_tool_name_")


def test_two_long_names_with_the_same_start_stay_distinct() -> None:
    first = exposed_name("server", "x" * 80 + "_one")
    second = exposed_name("server", "x" * 80 + "_two")
    assert first != second and len(first) == len(second) == MAX_NAME


def test_originals_that_clean_to_the_same_text_stay_distinct() -> None:
    names = {exposed_name("s", "a.b"), exposed_name("s", "a_b"), exposed_name("s", "a/b")}
    assert len(names) == 3
    assert "s__a_b" in names


def test_a_name_at_exactly_the_limit_is_kept_as_it_is() -> None:
    wanted = "n" * MAX_NAME
    assert fit_name(wanted, key="k") == wanted


def test_the_first_claimant_keeps_a_name_and_the_next_is_renamed() -> None:
    names, clashes = assign([("a__b__c", "a/b__c"), ("a__b__c", "a__b/c")])
    assert names[0] == "a__b__c"
    assert names[1] != "a__b__c" and names[1].startswith("a__b__c_") and VALID_NAME.match(names[1])
    assert len(clashes) == 1
    assert clashes[0].kept == "a/b__c" and clashes[0].renamed == (("a__b/c", names[1]),)
    assert "a__b__c" in clashes[0].describe() and "a__b/c" in clashes[0].describe()


def test_a_renamed_entry_gets_the_same_name_every_time() -> None:
    entries = [("x__y", "one/y"), ("x__y", "two/y"), ("x__y", "three/y")]
    assert assign(entries) == assign(entries)
    names, _ = assign(entries)
    assert len(set(names)) == 3


def test_a_reserved_name_is_never_given_out() -> None:
    names, clashes = assign([("search", "local/search")], reserved=["search"])
    assert names[0] != "search"
    assert clashes[0].kept == "(reserved)"


def test_without_duplicates_nothing_is_reported() -> None:
    names, clashes = assign([("a__x", "a/x"), ("b__x", "b/x")])
    assert names == ["a__x", "b__x"] and clashes == []


VISIBLE = ["Use_Tool", "calc__evaluate", "files__read_file", "files__list", "notes__list", "a__b__c"]


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("evaluate", ["calc__evaluate"]),
        ("calc_evaluate", ["calc__evaluate"]),
        ("calc.evaluate", ["calc__evaluate"]),
        ("calc-evaluate", ["calc__evaluate"]),
        ("calc/evaluate", ["calc__evaluate"]),
        ("calc::evaluate", ["calc__evaluate"]),
        ("calc evaluate", ["calc__evaluate"]),
        ("files_read_file", ["files__read_file"]),
        ("list", ["files__list", "notes__list"]),
        ("b__c", ["a__b__c"]),
        ("a.b__c", ["a__b__c"]),
    ],
)
def test_a_name_missing_its_namespace_or_with_another_separator_is_a_near_miss(name: str, meant: list[str]) -> None:
    assert near_misses(name, VISIBLE) == meant


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("calc__evalute", ["calc__evaluate"]),
        ("calc__evaluat", ["calc__evaluate"]),
        ("calc__evalaute", ["calc__evaluate"]),
        ("evalute", ["calc__evaluate"]),
        ("calcevaluate", ["calc__evaluate"]),
        ("Calc_evaluate", ["calc__evaluate"]),
        ("_evaluate", ["calc__evaluate"]),
        ("filse__list", ["files__list"]),
        ("files__lists", ["files__list"]),
    ],
)
def test_a_name_a_typo_or_two_from_a_tool_is_a_near_miss_closest_first(name: str, meant: list[str]) -> None:
    assert near_misses(name, VISIBLE) == meant


def test_a_near_miss_without_its_namespace_comes_before_a_typo() -> None:
    assert near_misses("list", ["a__lost", "files__list"]) == ["files__list", "a__lost"]
    assert near_misses("lists", ["notes__lists", "files__list"]) == ["notes__lists", "files__list"]


def test_at_most_three_typos_are_suggested() -> None:
    assert near_misses("tool__ab", [f"tool__a{c}" for c in "cdefg"]) == ["tool__ac", "tool__ad", "tool__ae"]


@pytest.mark.parametrize("name", ["other__evaluate", "calc_", "use_tool", "read", "ad", "calc__evaXXte", ""])
def test_a_name_that_differs_in_more_than_namespace_separator_or_a_typo_or_two_is_no_near_miss(name: str) -> None:
    assert near_misses(name, VISIBLE) == []


def test_only_the_given_candidates_are_near_misses() -> None:
    assert near_misses("calc_evaluate", ["files__read_file"]) == []


def test_an_unknown_tool_names_its_near_misses_in_its_message() -> None:
    assert UnknownToolError("x").message == "Unknown tool: 'x'"
    assert UnknownToolError("e", ["c__e"]).message == "Unknown tool: 'e'. Did you mean 'c__e'?"
    assert UnknownToolError("e", ["a__e", "b__e", "c__e"]).message == (
        "Unknown tool: 'e'. Did you mean 'a__e', 'b__e' or 'c__e'?"
    )
