"""Counts written with their noun agree in number on the web pages."""

from __future__ import annotations

from gateway.web.words import counted


def test_one_of_a_thing_is_singular_and_none_or_many_are_plural() -> None:
    assert counted(1, "call") == "1 call"
    assert [counted(count, "call") for count in (0, 2, 931)] == ["0 calls", "2 calls", "931 calls"]


def test_a_phrase_whose_plural_is_not_its_noun_and_an_s_is_given_it() -> None:
    assert counted(1, "skill loaded", "skills loaded") == "1 skill loaded"
    assert counted(3, "Find_Tools search", "Find_Tools searches") == "3 Find_Tools searches"
