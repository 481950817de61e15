"""Every relative link in the documentation leads somewhere: its file exists and its anchor is a heading there.

Anchors are worked out as GitHub writes them (lowercase, punctuation dropped, spaces to hyphens,
`-1`, `-2` after a repeated heading). Links inside code blocks and inline code are not links.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support.harness import REPO

_FENCE = re.compile(r"^(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
# A docs path named in prose or a docstring, e.g. docs/decisions/0030-audit-spool.md.
_DOCS_PATH = re.compile(r"\bdocs/[\w./-]+\.md\b")


def _markdown_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return [REPO / name for name in listed.stdout.split() if not name.startswith("tests/")]


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, each without its inline code."""
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(_INLINE_CODE.sub("", line))
    return lines


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    text = "".join(char for char in text if char.isalnum() or char in " -_")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor the headings of the Markdown file at `path` give."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        heading = None if fenced else _HEADING.match(line)
        if heading is None:
            continue
        slug = _slug(heading.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(path: Path) -> list[str]:
    """The relative links of the Markdown file at `path` that lead nowhere, each with why."""
    broken: list[str] = []
    for line in _prose_lines(path.read_text(encoding="utf-8")):
        for target in _LINK.findall(line):
            if _SCHEME.match(target):
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                broken.append(f"{target}: no such file")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{target}: no heading with that anchor")
    return broken


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda path: str(path.relative_to(REPO)))
def test_every_relative_link_of_a_document_leads_to_a_file_and_heading_that_exist(path: Path) -> None:
    assert broken_links(path) == []


def test_every_docs_path_named_in_code_or_benchmarks_exists() -> None:
    named = {
        (source.relative_to(REPO), mention)
        for folder in ("gateway", "benchmarks")
        for source in (REPO / folder).rglob("*.py")
        for mention in _DOCS_PATH.findall(source.read_text(encoding="utf-8"))
    }
    missing = sorted(f"{source}: {mention}" for source, mention in named if not (REPO / mention).exists())
    assert missing == []


def test_anchors_are_worked_out_as_github_writes_them(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Per call: latency, throughput and CPU\n"
        "## Logs: `--log-format`\n"
        "```\n# not a heading\n```\n"
        "## Find_Tools on a public benchmark\n"
        "## Repeated\n## Repeated\n",
        encoding="utf-8",
    )
    assert anchors(page) == {
        "per-call-latency-throughput-and-cpu",
        "logs---log-format",
        "find_tools-on-a-public-benchmark",
        "repeated",
        "repeated-1",
    }


def test_a_link_to_a_missing_heading_or_file_is_found_and_one_in_code_is_not(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# There\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#there) [gone](other.md#elsewhere) [none](missing.md) [web](https://example.org/x)\n"
        "`[code](missing.md)`\n```\n[fenced](missing.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page) == ["other.md#elsewhere: no heading with that anchor", "missing.md: no such file"]
