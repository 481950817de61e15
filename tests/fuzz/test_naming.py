"""Exposed names stay valid, deterministic and unique whatever names the sources bring."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.catalog.naming import VALID_NAME, assign, exposed_name, fit_name

from . import ANY_TEXT, RUNS, TEXT

VALID = st.from_regex(VALID_NAME, fullmatch=True)


@RUNS
def test_every_exposed_name_is_valid_and_deterministic(runs: settings) -> None:
    @runs
    @given(ANY_TEXT, ANY_TEXT)
    def check(namespace: str, original: str) -> None:
        name = exposed_name(namespace, original)
        assert VALID_NAME.fullmatch(name)
        assert exposed_name(namespace, original) == name

    check()


@RUNS
def test_a_fitted_name_is_valid_and_a_valid_name_is_kept(runs: settings) -> None:
    @runs
    @given(ANY_TEXT, ANY_TEXT)
    def check(wanted: str, key: str) -> None:
        name = fit_name(wanted, key=key)
        assert VALID_NAME.fullmatch(name)
        assert fit_name(wanted, key=key) == name
        if VALID_NAME.fullmatch(wanted):
            assert name == wanted

    check()


@RUNS
def test_different_originals_get_different_exposed_names(runs: settings) -> None:
    @runs
    @given(TEXT, TEXT, TEXT)
    def check(namespace: str, first: str, second: str) -> None:
        if first != second:
            assert exposed_name(namespace, first) != exposed_name(namespace, second)

    check()


ENTRY = st.tuples(st.one_of(VALID, TEXT), TEXT)


@RUNS
def test_assign_gives_unique_names_that_avoid_reserved_ones(runs: settings) -> None:
    @runs
    @given(st.lists(ENTRY, max_size=30), st.lists(st.one_of(VALID, TEXT), max_size=10), st.data())
    def check(entries: list[tuple[str, str]], reserved: list[str], data: st.DataObject) -> None:
        # Duplicates and names colliding with reserved ones are the interesting cases: draw them on purpose.
        if entries:
            entries += data.draw(st.lists(st.sampled_from(entries), max_size=10))
            reserved += [wanted for wanted, _ in entries[:3]]
        names, clashes = assign(entries, reserved)
        assert len(names) == len(entries)
        assert len(set(names)) == len(names)
        assert not set(names) & set(reserved)
        assert assign(entries, reserved) == (names, clashes)
        for (wanted, _), name in zip(entries, names, strict=True):
            # Names that ask for a valid name get a valid one, renamed or not.
            if VALID_NAME.fullmatch(wanted):
                assert VALID_NAME.fullmatch(name)

    check()


@RUNS
def test_assign_keeps_every_name_that_nobody_else_wants(runs: settings) -> None:
    @runs
    @given(st.lists(ENTRY, max_size=30, unique_by=lambda entry: entry[0]))
    def check(entries: list[tuple[str, str]]) -> None:
        names, clashes = assign(entries)
        assert names == [wanted for wanted, _ in entries]
        assert clashes == []

    check()
