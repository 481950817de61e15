"""A tool's or a server's icon as the page shows it (pure): a `data:` URL of a raster image, or none.

The page loads no image from elsewhere (its CSP says `img-src 'self' data:`): an icon at an `https:`
URL would tell a third party who opens which page. SVG is left out as for results, since it can
carry script.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable

import mcp_types as types

from gateway.web.results import IMAGE_TYPES

DATA_PREFIX = "data:"
BASE64_MARK = ";base64,"


def icon_url(icons: Iterable[types.Icon] | None) -> str | None:
    """The first icon that is a `data:` URL of a raster type with valid base64, light theme first."""
    ordered = sorted(icons or (), key=lambda icon: icon.theme == "dark")
    return next((icon.src for icon in ordered if _showable(icon.src)), None)


def _showable(src: str) -> bool:
    if not src.startswith(DATA_PREFIX) or BASE64_MARK not in src:
        return False
    mime, _, data = src[len(DATA_PREFIX) :].partition(BASE64_MARK)
    if mime not in IMAGE_TYPES:
        return False
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True
