"""The tool page as an MCP Apps host: a tool's view served into a sandboxed frame with the CSP the
extension asks for, and the calls the view makes.

The view (the `ui://` resource the tool's `_meta` names, `gateway.catalog.apps`) is read through
the gateway as the person, like any resource, and served at `/tools/<name>/app` with a
Content-Security-Policy built from its `_meta.ui.csp` (`view_csp`). That policy's `sandbox
allow-scripts` gives the view an opaque origin of its own, so it reaches neither the page's cookies
nor its routes, even when opened outside the frame. The page's script (`web.js`) relays the view's
messages: `ui/initialize`, the call's input and result, sizes, links, and `tools/call` of the view's
own server's tools by their names on that server, posted to `/tools/<name>/app/call`, which runs
them through the pipeline as the person (docs/decisions/0051-mcp-apps-on-the-tool-page.md).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import mcp_types as types
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.api.tools import tool_detail
from gateway.catalog.apps import MIME_TYPE, UI_KEY, app_may_call, view_of
from gateway.catalog.tools import ToolRecord
from gateway.errors import GatewayError, NotFoundError, clip
from gateway.web.pages import Person, Web, form_of

# An origin as the extension's `csp` lists them: a scheme, a host (a leading `*.` allowed) and a
# port. Anything else (a quote, a semicolon, a keyword) would change the policy, and is dropped.
ORIGIN = re.compile(r"(https?|wss?)://(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:[0-9]{1,5})?")
CSP_KEYS = ("resourceDomains", "connectDomains", "frameDomains", "baseUriDomains")
INVALID_PARAMS = -32602
NONE = "'none'"


def view_csp(ui: Mapping[str, Any] | None) -> str:
    """The Content-Security-Policy of a view whose resource `_meta.ui` is `ui`.

    The extension's restrictive default, with the origins the view declares added where it says
    (`resourceDomains` to scripts, styles, images, fonts and media; `connectDomains`, `frameDomains`,
    `baseUriDomains` to theirs) and nothing else: no `'self'` (the page's origin is not the view's),
    no plugins, no forms, framed only by the page, sandboxed with scripts alone."""
    csp = ui.get("csp") if ui else None
    declared = {key: _origins(csp.get(key) if isinstance(csp, Mapping) else None) for key in CSP_KEYS}
    resources = declared["resourceDomains"]
    return "; ".join(
        [
            "default-src 'none'",
            _directive("script-src", "'unsafe-inline'", *resources),
            _directive("style-src", "'unsafe-inline'", *resources),
            _directive("img-src", "data:", *resources),
            _directive("media-src", "data:", *resources),
            _directive("font-src", *resources),
            _directive("connect-src", *declared["connectDomains"]),
            _directive("frame-src", *declared["frameDomains"]),
            _directive("base-uri", *declared["baseUriDomains"]),
            "object-src 'none'",
            "form-action 'none'",
            "frame-ancestors 'self'",
            "sandbox allow-scripts",
        ]
    )


def _origins(value: object) -> list[str]:
    return (
        [item for item in value if isinstance(item, str) and ORIGIN.fullmatch(item)] if isinstance(value, list) else []
    )


def _directive(name: str, *sources: str) -> str:
    return f"{name} {' '.join(sources) or NONE}"


def view_document(result: types.ReadResourceResult) -> tuple[str, Mapping[str, Any] | None]:
    """The view's HTML and its `_meta.ui`, from what reading its resource gave; `NotFoundError`
    when that is not an MCP App's HTML."""
    for content in result.contents:
        if content.mime_type != MIME_TYPE:
            continue
        ui = (content.meta or {}).get(UI_KEY)
        ui = ui if isinstance(ui, Mapping) else None
        if isinstance(content, types.TextResourceContents):
            return content.text, ui
        try:
            return base64.b64decode(content.blob, validate=True).decode("utf-8"), ui
        except (binascii.Error, ValueError):
            break
    raise NotFoundError(f"The view is not {MIME_TYPE} content.")


def host_data(tool: ToolRecord, arguments: Mapping[str, Any], result: types.CallToolResult) -> dict[str, Any]:
    """What the page's script gives the view: the tool as its server lists it, the call's arguments and result."""
    listed = tool.to_mcp().model_copy(update={"name": tool.original_name})
    return {
        "tool": listed.model_dump(mode="json", by_alias=True, exclude_none=True),
        "arguments": dict(arguments),
        "result": result.model_dump(mode="json", by_alias=True, exclude_none=True),
        "call": f"/tools/{quote(tool.name, safe='')}/app/call",
    }


def routes(web: Web) -> list[Route]:
    """`/tools/{name}/app`, the view, and `/tools/{name}/app/call`, the view's tool calls."""
    gateway = web.gateway

    async def view(request: Request, person: Person) -> Response:
        tool = tool_detail(gateway, person.caller, request.path_params["name"]).tool
        uri = view_of(tool.meta)
        if uri is None:
            raise NotFoundError(f"Tool {tool.name!r} has no view.")
        html, ui = view_document(await gateway.resources.read(web.context(person), uri))
        headers = {
            "Content-Security-Policy": view_csp(ui),
            "X-Frame-Options": "SAMEORIGIN",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-store",
        }
        return Response(html, media_type="text/html; charset=utf-8", headers=headers)

    async def call(request: Request, person: Person) -> Response:
        app = tool_detail(gateway, person.caller, request.path_params["name"]).tool
        form = form_of(request)
        try:
            arguments = json.loads(form.get("arguments") or "{}")
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            return _refused("arguments must be a JSON object")
        # The view names its own server's tools as that server does; no other server's.
        wanted = form.get("name", "")
        target = next(
            (t for t in gateway.catalog.tools if t.source == app.source and t.original_name == wanted),
            None,
        )
        if target is None or not gateway.visibility.may_see(person.caller.session(), target):
            return _refused(f"Unknown tool: {clip(wanted)}")
        if not app_may_call(target.meta):
            return _refused(f"Tool {clip(wanted)} is not callable by apps")
        try:
            result = await gateway.calls.call_tool(web.context(person), target.name, arguments)
        except GatewayError as error:
            return _refused(gateway.redact(error.client_text()))
        return JSONResponse({"result": result.model_dump(mode="json", by_alias=True, exclude_none=True)})

    return [
        Route("/tools/{name}/app", web.page(view), methods=["GET"]),
        Route("/tools/{name}/app/call", web.page(call), methods=["POST"]),
    ]


def _refused(message: str) -> Response:
    """A view's call refused, as the JSON-RPC error the page's script hands the view."""
    return JSONResponse({"error": {"code": INVALID_PARAMS, "message": message}}, status_code=400)
