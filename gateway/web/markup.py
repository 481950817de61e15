"""Markdown from third parties (SKILL.md) as safe HTML: raw HTML is shown as text, links are http(s) only."""

from __future__ import annotations

from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markupsafe import Markup

SAFE_SCHEMES = ("http", "https")


def safe_link(url: str) -> bool:
    """Whether `url` may be a link: absolute http or https with a host, and no control characters."""
    if any(ord(char) < 0x21 or ord(char) == 0x7F for char in url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme.lower() in SAFE_SCHEMES and bool(parts.netloc)


def _renderer() -> MarkdownIt:
    # "html": False makes raw HTML in the source text, escaped; an unsafe link stays plain text.
    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    md.validateLink = safe_link  # type: ignore[method-assign]  # markdown-it's documented hook
    return md


_MD = _renderer()


def render_markdown(text: str) -> Markup:
    """`text` rendered as HTML that runs nothing."""
    return Markup(_MD.render(text))
