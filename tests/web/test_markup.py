"""Third-party Markdown rendered safely: raw HTML as text, links only to http and https."""

from __future__ import annotations

import pytest

from gateway.web.markup import render_markdown, safe_link


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        "data:text/html,x",
        "vbscript:x",
        "file:///etc/passwd",
        "/relative",
        "//evil.test/x",
        "http://",
        "https://a.test/\x00x",
        "java\nscript:alert(1)",
    ],
)
def test_only_absolute_http_and_https_links_are_safe(url: str) -> None:
    assert not safe_link(url)


def test_http_and_https_links_are_kept() -> None:
    assert safe_link("https://example.com/a?b=c#d") and safe_link("http://127.0.0.1:8000/")


def test_raw_html_and_unsafe_links_in_markdown_come_out_inert() -> None:
    html = render_markdown(
        "<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n"
        "[a](javascript:alert(3)) [b](https://example.com) ![c](javascript:alert(4)) <javascript:alert(5)>"
    )
    assert "<script" not in html
    assert "<img src=x" not in html
    assert 'href="javascript' not in html and 'src="javascript' not in html
    assert "&lt;script&gt;" in html and "(javascript:alert(3))" in html
    assert '<a href="https://example.com">b</a>' in html
