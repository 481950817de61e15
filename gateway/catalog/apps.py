"""MCP Apps (the `io.modelcontextprotocol/ui` extension) as the catalog holds them: the view a tool
names in its `_meta`, and who may call a tool.

A tool names its interactive view as `_meta.ui.resourceUri` (and, as the extension's helpers still
write it, the flat `_meta["ui/resourceUri"]`); the view is a `ui://` resource of type
`text/html;profile=mcp-app` that a host reads with `resources/read` and renders in a sandboxed
frame. The extension requires the URI to start with `ui://`, so the catalog exposes such a URI
under a namespace inside its scheme (`gateway.catalog.merged`, docs/decisions/0050-mcp-apps-uris.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

UI_SCHEME = "ui://"
MIME_TYPE = "text/html;profile=mcp-app"
UI_KEY = "ui"
FLAT_KEY = "ui/resourceUri"
"""The extension's first form of the view's URI, which its server helpers still write beside `ui.resourceUri`."""


def view_of(meta: Mapping[str, Any] | None) -> str | None:
    """The `ui://` URI of the view a tool's `_meta` names, if it names one."""
    if not meta:
        return None
    ui = meta.get(UI_KEY)
    uri = ui.get("resourceUri") if isinstance(ui, Mapping) else None
    if not isinstance(uri, str):
        uri = meta.get(FLAT_KEY)
    return uri if isinstance(uri, str) and uri.startswith(UI_SCHEME) else None


def with_view(meta: Mapping[str, Any], uri: str) -> dict[str, Any]:
    """`meta` (which names a view) naming `uri` instead, in each key that named the view; every other key kept."""
    moved = dict(meta)
    ui = meta.get(UI_KEY)
    if isinstance(ui, Mapping) and isinstance(ui.get("resourceUri"), str):
        moved[UI_KEY] = {**ui, "resourceUri": uri}
    if isinstance(meta.get(FLAT_KEY), str):
        moved[FLAT_KEY] = uri
    return moved


def app_may_call(meta: Mapping[str, Any] | None) -> bool:
    """Whether a view may call this tool: its `_meta.ui.visibility` includes `app` (the default)."""
    ui = meta.get(UI_KEY) if meta else None
    visibility = ui.get("visibility") if isinstance(ui, Mapping) else None
    return not isinstance(visibility, list) or "app" in visibility
