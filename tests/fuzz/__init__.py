"""Property tests of the pure core under hostile input: each property runs briefly by default, at length with -m slow.

A property is written once as a test taking `runs`, the hypothesis settings it is checked
under: `fast` in the default run, `thorough` (many more examples) behind the `slow` marker.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# No example database: failures print their reproduction blob instead of leaving files in the tree.
FAST = settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
THOROUGH = settings(max_examples=2000, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

RUNS = pytest.mark.parametrize(
    "runs", [pytest.param(FAST, id="fast"), pytest.param(THOROUGH, id="thorough", marks=pytest.mark.slow)]
)

# Lone surrogates included: JSON read with the standard library may carry them ("\ud800").
HOSTILE = ["", " ", "\x00", "\ud800", "a\udfff", "..", "../x", "\u202e", "${X}", "a" * 64, "a" * 65, "é" * 40]
TEXT = st.one_of(st.text(st.characters(exclude_categories=()), max_size=80), st.sampled_from(HOSTILE))
HUGE_TEXT = st.text(max_size=3000)
ANY_TEXT = st.one_of(TEXT, HUGE_TEXT)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**300, max_value=10**1000),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
)


def json_values(max_leaves: int = 30) -> st.SearchStrategy[Any]:
    """Arbitrary JSON-like data: scalars (huge ints, NaN included), lists and string-keyed maps."""
    return st.recursive(
        SCALARS,
        lambda children: st.lists(children, max_size=5) | st.dictionaries(TEXT, children, max_size=5),
        max_leaves=max_leaves,
    )


def nested(depth: int, leaf: Any = 1) -> Any:
    """`leaf` inside `depth` alternating lists and maps, built without recursion."""
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value
