"""Demultiplexing Docker's attach stream (pure, no Docker needed)."""

from __future__ import annotations

from gateway.sandbox.containers import FrameDecoder

FRAMES = b"\x01\x00\x00\x00\x00\x00\x00\x03abc" + b"\x02\x00\x00\x00\x00\x00\x00\x02de"


def test_frames_are_split_across_chunk_boundaries() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(FRAMES[:5]) == []
    assert decoder.feed(FRAMES[5:13]) == [(1, b"abc")]
    assert decoder.feed(FRAMES[13:]) == [(2, b"de")]


def test_several_frames_in_one_chunk_come_out_in_order() -> None:
    assert FrameDecoder().feed(FRAMES) == [(1, b"abc"), (2, b"de")]
