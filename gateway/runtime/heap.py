"""The garbage collector for a serving process: the start-up heap set aside, young objects collected less often.

A gateway that has started holds a large heap that lives as long as the process (modules, the SDK's
and our pydantic models, compiled schemas, the catalog), and a call allocates a few hundred
container objects that nearly all die with it. CPython's default schedule runs a collection every
700 allocations and, now and then, an older generation's over the whole start-up heap again: for
objects that never become garbage. Frozen, the start-up heap is never scanned again, and a
generation-0 threshold of 10,000 lets a call's short-lived objects go by reference counting first.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000


def settle_heap() -> None:
    """Once start-up is done: collect what it left, freeze the rest, and collect young objects less often."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
