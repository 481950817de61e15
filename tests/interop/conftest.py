"""Interop fixtures: the web tests' headless Chromium, for pages where a third-party server's content renders."""

from __future__ import annotations

from tests.web.conftest import browser, browser_tools

__all__ = ["browser", "browser_tools"]
