"""The servers page: live state (refreshed by a small script from `/servers/rows`), each server's calls
and errors of the last 24 hours as a sparkline, and where each server is defined, and for admins
forms to add servers (a pasted body in any form the admin API takes, or the fields of one) and to
enable, disable, restart or remove one, with problems shown next to the field they concern. A file
server is only restarted here (its entry is the config file's); removing asks first, on a page of
its own, and every action says what it did on the page it leads to."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from gateway.api.servers import change, register, visible_statuses
from gateway.errors import ConfigError, ConflictError, ForbiddenError, NotFoundError
from gateway.problems import ConfigProblems
from gateway.upstreams.connection import Status
from gateway.web.pages import PageError, Person, Web, form_of
from gateway.web.sparks import drawn, empty, sparks

ACTIONS = ("enable", "disable", "restart", "remove")
DONE = {"enable": "enabled", "disable": "disabled", "restart": "restarted", "remove": "removed"}
FIELDS = ("name", "command", "args", "url")


def body_of(values: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """Which form was sent (`paste` or `fields`) and the registration body it makes; raises
    `ConfigProblems` naming the field."""
    pasted = values.get("body", "").strip()
    if values.get("form") == "paste":
        try:
            body = json.loads(pasted)
        except ValueError as error:
            raise ConfigProblems("pasted text", [("body", f"not valid JSON: {error}")]) from None
        if not isinstance(body, dict):
            raise ConfigProblems("pasted text", [("body", "expected a JSON object")])
        return "paste", body
    entry: dict[str, Any] = {"name": values.get("name", "").strip()}
    command, url = values.get("command", "").strip(), values.get("url", "").strip()
    if (command and url) or not (command or url):
        raise ConfigProblems("the form", [("command", "give either a command or a URL, not both")])
    if command:
        entry["command"] = command
        entry["args"] = [line.strip() for line in values.get("args", "").splitlines() if line.strip()]
    else:
        entry["url"] = url
    return "fields", entry


def field_of(path: str, form: str) -> str:
    """The form field a problem's path points at: `servers.x.url` -> `url`; anything else the form's first."""
    if form == "paste":
        return "body"
    last = path.rsplit(".", 1)[-1].split("[", 1)[0]
    return last if last in FIELDS else "name"


def routes(web: Web) -> list[Route]:
    """`/servers`, its rows fragment, and the admin actions."""
    servers, reloader, visibility = web.gateway.servers, web.gateway.reloader, web.gateway.visibility

    async def listing(person: Person) -> dict[str, Any]:
        statuses = visible_statuses(servers, visibility, person.caller)
        shown = {status.name for status in statuses}
        served = {tool.name: tool.source for tool in web.gateway.catalog.tools if tool.source in shown}
        found = await sparks(web.gateway, served, served.get)
        # Values masked as the API shows them: the page never holds a credential.
        credentials = {
            status.name: servers.credentials(status.name)
            for status in statuses
            if person.admin and status.name in servers.members
        }
        return {
            "statuses": statuses,
            "credentials": credentials,
            "reload_errors": list(reloader.reload_errors) if person.admin else [],
            "sparks": {status.name: drawn(status.name, found.get(status.name, empty())) for status in statuses},
        }

    async def page(request: Request, person: Person) -> Response:
        done, person.session.flash = person.session.flash, ""
        return web.render(request, person, "servers.html", problems={}, values={}, done=done, **await listing(person))

    async def rows(request: Request, person: Person) -> Response:
        return web.render(request, person, "server_rows.html", **await listing(person))

    async def add(request: Request, person: Person) -> Response:
        person.caller.require_admin()
        values = form_of(request)
        form = "paste" if values.get("form") == "paste" else "fields"
        problems: dict[str, list[str]] = {}
        try:
            form, body = body_of(values)
            statuses = await register(servers, person.caller, body)
        except ConfigProblems as error:
            for path, problem in error.problems:
                problems.setdefault(field_of(path, form), []).append(f"{path}: {problem}" if path else problem)
        except ConfigError as error:
            problems.setdefault(field_of(error.path, form), []).append(f"{error.path}: {error.problem}")
        except ConflictError as error:
            problems.setdefault("body" if form == "paste" else "name", []).append(error.message)
        except ForbiddenError as error:
            # The registration policy refused the command or the URL the form gave.
            refused = "url" if values.get("url", "").strip() else "command"
            problems.setdefault("body" if form == "paste" else refused, []).append(error.message)
        if problems:
            return web.render(
                request, person, "servers.html", status=422, problems=problems, values=values, **await listing(person)
            )
        added = ", ".join(repr(status.name) for status in statuses)
        person.session.flash = f"Added {added}: the list shows the state as it connects."
        return RedirectResponse("/servers", status_code=303)

    def status_of(name: str) -> Status:
        status = next((status for status in servers.statuses() if status.name == name), None)
        if status is None:
            raise NotFoundError(f"No such server: {name!r}")
        return status

    async def confirm(request: Request, person: Person) -> Response:
        person.caller.require_admin()
        status = status_of(request.path_params["name"])
        if status.source == "file":
            raise PageError(409, f"Server {status.name!r} is defined in the config file: remove it there.")
        return web.render(request, person, "server_remove.html", status=200, server=status)

    async def act(request: Request, person: Person) -> Response:
        person.caller.require_admin()
        name: str = request.path_params["name"]
        action: str = request.path_params["action"]
        if action not in ACTIONS:
            raise PageError(404, f"No such action: {action!r}")
        status = status_of(name)
        if action != "restart" and status.source == "file":
            raise PageError(409, f"Server {name!r} is defined in the config file: {action} it there.")
        if action == "remove" and form_of(request).get("confirmed") != "yes":
            # Only the confirmation page's form says yes: any other POST is asked first.
            return RedirectResponse(f"/servers/{quote(name, safe='')}/remove", status_code=303)
        if action == "restart":
            await servers.restart(name)
        elif action == "remove":
            await servers.remove(name)
        else:
            await change(servers, person.caller, name, {"enabled": action == "enable"})
        person.session.flash = f"Server {name!r} was {DONE[action]}."
        return RedirectResponse("/servers", status_code=303)

    return [
        Route("/servers", web.page(page), methods=["GET"]),
        Route("/servers/rows", web.page(rows), methods=["GET"]),
        Route("/servers/add", web.page(add), methods=["POST"]),
        Route("/servers/{name}/remove", web.page(confirm), methods=["GET"]),
        Route("/servers/{name}/{action}", web.page(act), methods=["POST"]),
    ]
