"""The serving process's garbage collector once start-up is done."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from gateway.runtime.heap import YOUNG_THRESHOLD, settle_heap


@pytest.fixture
def restored_gc() -> Iterator[None]:
    """The test process's collector as it was, whatever the test did to it."""
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.mark.usefixtures("restored_gc")
def test_settling_freezes_the_heap_there_is_and_collects_young_objects_less_often() -> None:
    long_lived = [object() for _ in range(10)]
    _, older, oldest = gc.get_threshold()

    settle_heap()

    assert gc.get_freeze_count() >= len(long_lived)
    assert gc.get_threshold() == (YOUNG_THRESHOLD, older, oldest)
    assert gc.get_count()[0] < YOUNG_THRESHOLD
