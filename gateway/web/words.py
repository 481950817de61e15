"""Counts written with their noun, agreeing in number: `1 call`, `2 calls`, `0 calls`."""

from __future__ import annotations


def counted(count: int, one: str, many: str | None = None) -> str:
    """`count` and the noun phrase `one`, or `many` (`one` + "s" unless given) when `count` is not 1."""
    if count == 1:
        return f"1 {one}"
    return f"{count} {many if many is not None else one + 's'}"
