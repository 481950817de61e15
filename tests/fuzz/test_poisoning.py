"""Poisoning scans take any text, show nothing hidden in their excerpts, always find hidden text
slipped into a description, and stay linear on text built to make patterns backtrack."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.catalog.poisoning import REASONS, scan, scan_text, visible
from gateway.catalog.tools import ToolRecord

from . import ANY_TEXT, RUNS, TEXT, json_values

# The starts of every kind of phrase, and characters each pattern treats specially: repeated, they
# are what would make a backtracking pattern try again and again.
FRAGMENTS = [
    "ignore ", "ignore all ", "send ", "send a ", " to ", "to http", "do not ", "don't tell ", "the user ",
    "keep these ", "without ", "when using ", "side effects ", "include ", "conversation ", "<", "< ", "<|",
    "[", ".env", ".ssh/", "~/.ssh", "id_", "/etc/", "user ", " ", "\t", "\n", "\n \n", "\u200b", "\u200d",
    "\ufe0f", "\U000e0041", "👨", "a", "-", "@", ".", "\x00", "\uff49",
]  # fmt: skip
# A guard against super-linear scans, in CPU seconds of this thread so that a busy machine does not
# stretch it: the slowest of these texts (a hundred thousand characters, as many runs of hidden
# characters as can fit) scans in about 0.3 s; a quadratic scan would take minutes.
CPU_BOUND = 3.0
HIDDEN = st.one_of(
    st.text(st.characters(min_codepoint=0xE0020, max_codepoint=0xE007E), min_size=1, max_size=20),
    st.sampled_from(["\u200b", "\u200c", "\u2060", "\ufeff", "\u202e", "\u2066", "\u00ad", "\x1b"]),
)


@RUNS
def test_any_text_scans_to_known_kinds_at_most_one_each_with_nothing_hidden_in_the_excerpts(
    runs: settings,
) -> None:
    @runs
    @given(ANY_TEXT)
    def check(text: str) -> None:
        found = scan_text(text, "description")
        assert all(finding.kind in REASONS for finding in found)
        assert len({finding.kind for finding in found}) == len(found)
        assert all(visible(finding.excerpt) == finding.excerpt for finding in found)

    check()


@RUNS
def test_any_schema_scans_without_failing_and_gives_at_most_ten_findings(runs: settings) -> None:
    @runs
    @given(json_values(), TEXT, TEXT)
    def check(schema: object, title: str, description: str) -> None:
        tool = ToolRecord(
            name="t",
            source="s",
            original_name="t",
            title=title,
            description=description,
            input_schema={"properties": schema},
        )
        assert len(scan(tool)) <= 10

    check()


@RUNS
def test_hidden_characters_slipped_anywhere_into_a_description_are_always_found(runs: settings) -> None:
    @runs
    @given(st.text(st.characters(codec="ascii", categories=["L", "N", "P", "Zs"]), max_size=200), HIDDEN, st.data())
    def check(description: str, hidden: str, data: st.DataObject) -> None:
        at = data.draw(st.integers(min_value=0, max_value=len(description)))
        found = scan_text(description[:at] + hidden + description[at:], "description")
        assert {"tag_characters", "bidi_controls", "invisible_characters"} & {finding.kind for finding in found}

    check()


@RUNS
def test_text_built_to_make_patterns_backtrack_scans_in_linear_time(runs: settings) -> None:
    # Each example scans a hundred thousand characters: the thorough run takes fewer than elsewhere.
    @settings(runs, max_examples=min(runs.max_examples, 200))
    @given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=4))
    def check(pieces: list[str]) -> None:
        unit = "".join(pieces)
        text = unit * (100_000 // len(unit) + 1)
        started = time.thread_time()
        scan_text(text, "description")
        assert time.thread_time() - started < CPU_BOUND

    check()
