"""Groups and Connect: each endpoint's URL and the snippets that connect Claude Desktop, Claude Code,
VS Code and Cursor to it, with copy buttons (the `client-config` command's snippets)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.auth.identity import Identity
from gateway.config.clientfiles import CLIENTS, endpoint_path, gateway_snippet, stdio_command
from gateway.web.pages import Person, Web

CLIENT_NAMES = {
    "claude-desktop": "Claude Desktop",
    "claude-code": "Claude Code",
    "vscode": "VS Code",
    "cursor": "Cursor",
}


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The gateway's endpoint or one group's, with a snippet per client."""

    group: str | None
    description: str
    tools: int
    url: str
    snippets: list[tuple[str, str]]


def routes(web: Web) -> list[Route]:
    """`/connect`."""
    gateway = web.gateway

    def endpoint(base: str, group: str | None, description: str, tools: int, identity: Identity) -> Endpoint:
        # Launched as a command, the gateway takes the page's reader's role: without one, with
        # roles, that client would see only the meta-tools.
        caller = identity.caller if identity.role is not None else None
        command = stdio_command(gateway.config.path, caller, identity.role)
        authorized = gateway.authenticator.settings.enabled
        snippets = []
        for client in CLIENTS:
            # Claude Desktop's file starts servers as commands only.
            url = None if client == "claude-desktop" else base
            snippet = gateway_snippet(client, group, base_url=url, stdio_command=command, authorized=authorized)
            snippets.append((CLIENT_NAMES[client], json.dumps(snippet, indent=2)))
        return Endpoint(group, description, tools, base + endpoint_path(group), snippets)

    async def page(request: Request, person: Person) -> Response:
        base = str(request.base_url).rstrip("/")
        identity = person.caller.identity
        role = identity.role
        everything = len(web.visible.entries(person.caller))
        endpoints = [endpoint(base, None, "Every tool you may use.", everything, identity)]
        for group in gateway.groups.all():
            tools = len(gateway.groups.tools(group.name, role))
            if tools:
                endpoints.append(endpoint(base, group.name, group.description, tools, identity))
        return web.render(request, person, "connect.html", endpoints=endpoints)

    return [Route("/connect", web.page(page), methods=["GET"])]
