"""Caller keys are injective: no two different callers, sessions or handles ever share a key."""

from __future__ import annotations

from typing import get_args
from urllib.parse import unquote

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gateway.auth.identity import Identity, Method, caller_key, handle_key
from gateway.clients.session import state_key

from . import RUNS, TEXT

# Few characters, the separators and escapes among them, so that near-collisions come up often.
NEAR = st.text(st.sampled_from([":", "%", "3", "A", "2", "5", "a"]), max_size=6)
PART = st.one_of(NEAR, TEXT)
IDENTITIES = st.builds(Identity, caller=PART, role=st.none(), method=st.sampled_from(get_args(Method)), issuer=PART)


def who(identity: Identity, session_id: str) -> tuple[str, ...]:
    """What tells one caller's state from another's: how it signed in and as whom (anonymous: its session)."""
    if identity.method == "anonymous":
        return ("anonymous", session_id)
    return (identity.method, identity.issuer or "" if identity.method == "jwt" else "", identity.caller)


@RUNS
def test_a_state_key_splits_back_into_exactly_its_parts(runs: settings) -> None:
    @runs
    @given(st.lists(PART, min_size=1, max_size=4))
    def check(parts: list[str]) -> None:
        assert [unquote(piece) for piece in state_key(*parts).split(":")] == parts

    check()


@RUNS
def test_two_callers_share_a_key_only_when_they_are_the_same_caller(runs: settings) -> None:
    @runs
    @given(IDENTITIES, PART, IDENTITIES, PART)
    @example(Identity("alice", None, "api_key"), "s", Identity("alice", None, "jwt", issuer="https://i"), "s")
    @example(Identity("anonymous", None, "api_key"), "s", Identity("anonymous", None, "anonymous"), "s")
    @example(Identity("x", None, "anonymous"), "s1", Identity("x", None, "anonymous"), "s2")
    def check(first: Identity, first_session: str, second: Identity, second_session: str) -> None:
        same = who(first, first_session) == who(second, second_session)
        assert (caller_key(first, first_session) == caller_key(second, second_session)) == same

    check()


@RUNS
def test_two_stateless_states_share_an_id_only_for_the_same_caller_and_handle(runs: settings) -> None:
    @runs
    @given(IDENTITIES.filter(lambda i: i.method != "anonymous"), PART, IDENTITIES, PART)
    @example(Identity("dave", None, "api_key"), "ops:default", Identity("dave:ops", None, "api_key"), "default")
    def check(first: Identity, first_handle: str, second: Identity, second_handle: str) -> None:
        same = (who(first, ""), first_handle) == (who(second, ""), second_handle)
        assert (handle_key(first, first_handle) == handle_key(second, second_handle)) == same

    check()
