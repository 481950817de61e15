"""A tool's result as the try-it form shows it (pure): text, images as data: URLs, structured content."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field

import mcp_types as types

# Raster formats only: an SVG can carry script.
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


@dataclass(frozen=True, slots=True)
class Block:
    """One content block: `text` (shown as preformatted text) or `image` (a checked data: URL)."""

    kind: str
    text: str = ""
    url: str = ""


@dataclass(frozen=True, slots=True)
class Shown:
    """A call's result: whether it failed, its blocks, and its structured content as JSON text."""

    is_error: bool
    blocks: list[Block] = field(default_factory=list)
    structured: str | None = None


def image_url(mime: str, data: str) -> str | None:
    """A `data:` URL for image content, or None unless it is a raster type with valid base64."""
    if mime not in IMAGE_TYPES:
        return None
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    return f"data:{mime};base64,{data}"


def shown(result: types.CallToolResult) -> Shown:
    """`result` as blocks to show; anything that is neither text nor a valid image is shown as JSON text."""
    blocks = []
    for item in result.content:
        if isinstance(item, types.TextContent):
            blocks.append(Block("text", item.text))
            continue
        if isinstance(item, types.ImageContent):
            url = image_url(item.mime_type, item.data)
            if url is not None:
                blocks.append(Block("image", text=item.mime_type, url=url))
                continue
        blocks.append(Block("text", json.dumps(item.model_dump(mode="json", exclude_none=True), indent=2)[:20000]))
    structured = None
    if result.structured_content is not None:
        structured = json.dumps(result.structured_content, indent=2, ensure_ascii=False)
    return Shown(bool(result.is_error), blocks, structured)
