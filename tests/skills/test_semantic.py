"""The semantic ranker's choice of the best scores: a full sort's head, at the cost of a partition."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.skills.semantic import top


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-3, 3), max_size=60), st.integers(1, 20), st.sampled_from([-1.0, 0.0, 0.15]))
def test_the_best_scores_are_a_full_sorts_first_ones_ties_to_the_lower_number(
    values: list[int], limit: int, floor: float
) -> None:
    # Few distinct values, so that ties straddle the limit.
    scores = np.asarray(values, dtype=np.float32) / 10
    ordered = np.argsort(-scores, kind="stable")[:limit]
    assert top(scores, limit, floor) == [int(number) for number in ordered if scores[number] >= floor]
