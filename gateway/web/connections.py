"""The connections page: the servers that act as each user (`oauth:`), whether the person looking
has connected each, and Connect (to the provider's consent and back) and Disconnect; admins also
see every caller's grants and revoke any of them."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from gateway.config.model import ServerConfig
from gateway.errors import NotFoundError, OperationError
from gateway.upstreams.connection import State
from gateway.upstreams.grants import CALLBACK_PATH, PAGE_PATH
from gateway.web.pages import PageError, Person, Web, form_of

RESUMED = "resumed"
"""Marks the callback's second, same-site request (see `callback`)."""


def routes(web: Web) -> list[Route]:
    """`/connections`, Connect and its callback, Disconnect, and an admin's Revoke."""
    gateway = web.gateway

    def granted_servers() -> list[ServerConfig]:
        return sorted(
            (member.config for member in gateway.servers.members.values() if member.config.oauth is not None),
            key=lambda server: server.name,
        )

    def server_of(name: str) -> ServerConfig:
        server = next((server for server in granted_servers() if server.name == name), None)
        if server is None:
            raise NotFoundError(f"No server {name!r} acts with each user's own account.")
        return server

    def caller_of(person: Person) -> str:
        if person.caller.identity.method == "anonymous":
            raise PageError(403, "Sign in first: a connection belongs to the person who made it.")
        return person.caller.identity.key

    async def listing(person: Person) -> dict[str, Any]:
        held = await gateway.grants.run(gateway.grants.store.grants)
        mine = {grant.server for grant in held if grant.caller == person.caller.identity.key}
        # The server's host alone: its URL may carry a secret in its query or user-info.
        rows = [
            (
                server,
                urlsplit(server.url or "").hostname or "",
                server.name in mine,
                gateway.grants.lost.get((server.name, person.caller.identity.key)),
            )
            for server in granted_servers()
        ]
        return {"rows": rows, "grants": held if person.admin else []}

    async def page(request: Request, person: Person) -> Response:
        done, person.session.flash = person.session.flash, ""
        return web.render(request, person, "connections.html", done=done, **await listing(person))

    async def connect(request: Request, person: Person) -> Response:
        server = server_of(request.path_params["name"])
        assert gateway.router.group is not None
        url = await gateway.grants.start(server, caller_of(person), str(request.base_url), gateway.router.group)
        # A page that moves on by itself, not a redirect: the form's CSP (`form-action 'self'`)
        # refuses a redirect to another site, and the person sees where they are sent.
        host = urlsplit(url).netloc
        text = f"Server {server.name!r} asks you to sign in at {host} and agree there; you come back here after."
        return web.render(request, person, "connections_continue.html", heading="Connecting", text=text, target=url)

    async def callback(request: Request) -> Response:
        # The provider sends the browser back from another site, and the session cookie is
        # SameSite=Strict: it comes only with a navigation this site starts. So the first answer
        # is a page that comes back here at once; that request carries the cookie.
        person, _ = web.person(request)
        params = dict(request.query_params)
        if person is None:
            if params.pop(RESUMED, None) is not None:
                return RedirectResponse(f"/signin?next={PAGE_PATH}", status_code=303)
            again = f"{CALLBACK_PATH}?{urlencode({**params, RESUMED: '1'})}"
            text = "The provider sent you back."
            return web.render(request, None, "connections_continue.html", heading="Connecting", text=text, target=again)
        params.pop(RESUMED, None)
        try:
            name = await gateway.grants.finish(caller_of(person), params)
        except OperationError as error:
            return web.failure(request, person, error)
        upstream = gateway.upstreams.get(name)
        if upstream is not None and upstream.status().state != State.READY:
            # Its tools are listed with a connected user's grant: the first one lets it connect.
            await gateway.servers.restart(name)
        person.session.flash = f"Connected server {name!r}: its tools now act as you."
        return RedirectResponse(PAGE_PATH, status_code=303)

    async def end(server: ServerConfig, caller: str) -> bool:
        held = await gateway.callers.disconnect(server, caller)
        if gateway.grants.listed_with.get(server.name) == caller:
            # The server's shared connection listed with this grant: it lists with another's from now on.
            await gateway.servers.restart(server.name)
        return held

    async def disconnect(request: Request, person: Person) -> Response:
        server = server_of(request.path_params["name"])
        await end(server, caller_of(person))
        person.session.flash = f"Disconnected server {server.name!r}: the gateway holds no token of yours for it."
        return RedirectResponse(PAGE_PATH, status_code=303)

    async def revoke(request: Request, person: Person) -> Response:
        person.caller.require_admin()
        server, caller = server_of(request.path_params["name"]), form_of(request).get("caller", "")
        name = server.name
        if not await end(server, caller):
            raise NotFoundError(f"{caller!r} holds no grant for server {name!r}.")
        person.session.flash = f"Revoked the grant of {caller!r} for server {name!r}."
        return RedirectResponse(PAGE_PATH, status_code=303)

    return [
        Route(PAGE_PATH, web.page(page), methods=["GET"]),
        Route(CALLBACK_PATH, callback, methods=["GET"]),
        Route(f"{PAGE_PATH}/{{name}}/connect", web.page(connect), methods=["POST"]),
        Route(f"{PAGE_PATH}/{{name}}/disconnect", web.page(disconnect), methods=["POST"]),
        Route(f"{PAGE_PATH}/{{name}}/revoke", web.page(revoke), methods=["POST"]),
    ]
