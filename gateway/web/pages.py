"""What every web page shares: who is looking
(`Person`), the session cookie, CSRF on every POST, rendering, and errors as pages.

Who a person is comes from their web session (`signin.py`). With authentication off the page is
open, as `/mcp` is, and a visitor gets a session of the local caller at once; with an
`anonymous_role` a visitor sees what anonymous MCP callers see until they sign in; otherwise every
page but sign-in sends them to sign in. Nothing the client sends makes a page answer with a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from gateway.api.common import MAX_BODY_BYTES, Caller, caller_of
from gateway.api.tools import VisibleTools
from gateway.catalog.poisoning import visible
from gateway.clients.session import SessionContext
from gateway.errors import ConfigError, GatewayError, OperationError
from gateway.service import Gateway
from gateway.stores import DatabaseError
from gateway.web import csrf
from gateway.web.icons import icon_url
from gateway.web.signin import COOKIE, WebSession, WebSessions, signed
from gateway.web.words import counted

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Person:
    """Who is looking at a page: their web session and what they may do."""

    session: WebSession
    caller: Caller

    @property
    def admin(self) -> bool:
        """Whether they operate the gateway."""
        return self.caller.admin

    @property
    def signed_in(self) -> bool:
        """Whether they signed in with a credential (rather than being let in without one)."""
        return signed(self.caller.identity)


Handler = Callable[[Request, Person], Awaitable[Response]]


class PageError(OperationError):
    """A request a page cannot serve, with the status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Web:
    """The gateway, the web sessions and the templates every page uses."""

    def __init__(self, gateway: Gateway, sessions: WebSessions | None = None) -> None:
        self.gateway = gateway
        self.sessions = sessions or WebSessions(lambda: gateway.authenticator)
        self.visible = VisibleTools(gateway.catalog, gateway.visibility)
        self.templates = Environment(
            loader=PackageLoader("gateway.web", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        # Upstream text with the characters a browser would not show written out (`<U+200B>`).
        self.templates.filters["visible"] = visible
        self.templates.filters["icon"] = icon_url
        self.templates.filters["clock"] = clock
        self.templates.filters["took"] = took
        self.templates.filters["ms"] = milliseconds
        self.templates.filters["counted"] = counted

    @property
    def open(self) -> bool:
        """Whether a visitor who has not signed in is let in (authentication off, or an anonymous role)."""
        settings = self.gateway.authenticator.settings
        return not settings.enabled or settings.anonymous_role is not None

    def context(self, person: Person) -> SessionContext:
        """The MCP session context the person's calls run in: one per web session, like one MCP client."""
        return self.gateway.sessions.open(person.session.context, person.caller.identity, "http")

    def render(
        self, request: Request, person: Person | None, template: str, status: int = 200, **values: Any
    ) -> Response:
        """The page `template` filled with `values`, never cached."""
        sandbox_note = None
        if self.gateway.sandboxes.docker is not None:
            available, reason = self.gateway.sandboxes.availability()
            sandbox_note = None if available else reason
        html = self.templates.get_template(template).render(
            request=request, person=person, sandbox_note=sandbox_note, path=request.url.path, **values
        )
        return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})

    def error_page(self, request: Request, person: Person | None, status: int, message: str) -> Response:
        """An error as a page saying what went wrong."""
        return self.render(request, person, "error.html", status=status, status_code=status, message=message)

    def with_cookie(self, request: Request, response: Response, value: str) -> Response:
        """`response` setting the session cookie to `value` (a session's id, or the random value a
        browser holds before sign-in): HttpOnly, SameSite=Strict, Secure over HTTPS."""
        response.set_cookie(
            COOKIE,
            value,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    def person(self, request: Request) -> tuple[Person | None, bool]:
        """Who is asking, and whether their session is new (its cookie must be set); None: not signed in."""
        session = self.sessions.get(request.cookies.get(COOKIE))
        fresh = False
        if session is None:
            if not self.open:
                return None, False
            session = self.sessions.start(self.gateway.authenticator.authenticate(None))
            fresh = True
        return Person(session, caller_of(self.gateway, session.identity)), fresh

    def page(self, handler: Handler, *, admin: bool = False) -> Callable[[Request], Awaitable[Response]]:
        """`handler` behind sign-in (admins only when `admin`), CSRF on POST, and errors as pages."""

        async def endpoint(request: Request) -> Response:
            person, fresh = self.person(request)
            if person is None:
                target = quote(request.url.path + (f"?{request.url.query}" if request.url.query else ""), safe="")
                return RedirectResponse(f"/signin?next={target}", status_code=303)
            try:
                if admin and not person.admin:
                    raise PageError(403, "This page is for admins.")
                if request.method == "POST":
                    form = await read_form(request)
                    csrf.check(person.session.csrf, form.get(csrf.FIELD))
                    request.state.form = form
                response = await handler(request, person)
            except Exception as error:  # every failure is a page, never a traceback
                response = self.failure(request, person, error)
            return self.with_cookie(request, response, person.session.id) if fresh else response

        return endpoint

    def failure(self, request: Request, person: Person | None, error: Exception) -> Response:
        """The page for an error a handler raised."""
        if isinstance(error, OperationError):
            return self.error_page(request, person, error.status, error.message)
        if isinstance(error, ConfigError):
            return self.error_page(request, person, 422, str(error))
        if isinstance(error, DatabaseError):
            log.warning("the store failed web page %s: %s", request.url.path, error.message)
            return self.error_page(
                request, person, 503, "The gateway's store cannot be read or written now; nothing was changed."
            )
        if isinstance(error, GatewayError):
            return self.error_page(request, person, 400, error.message)
        log.exception("web page %s failed", request.url.path)
        return self.error_page(request, person, 500, "Something went wrong; the gateway's log has the details.")


async def read_form(request: Request) -> dict[str, str]:
    """The POSTed form's fields (the last value of each), refused past the API's body limit."""
    declared = request.headers.get("content-length", "")
    if not declared.isdigit() or int(declared) > MAX_BODY_BYTES:
        raise PageError(413, f"Send a form of at most {MAX_BODY_BYTES} bytes.")
    form = await request.form(max_files=0)
    return {key: value for key, value in form.items() if isinstance(value, str)}


def clock(epoch: float, days: bool = False) -> str:
    """`epoch` as the time of day in UTC (`14:05`), with the weekday when `days` (`Tue 14:05`)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%a %H:%M" if days else "%H:%M")


def took(seconds: float | None) -> str:
    """A length of time in words: `45 s`, `3 min 20 s`, `2 h 5 min`; a dash for none."""
    if seconds is None:
        return "-"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s" if whole % 60 else f"{whole // 60} min"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def milliseconds(value: float | None) -> str:
    """A duration in ms as shown: `12.5 ms`, `1.2 s`; a dash for none."""
    if value is None:
        return "-"
    return f"{value / 1000:.1f} s" if value >= 1000 else f"{value:.1f} ms"


def form_of(request: Request) -> dict[str, str]:
    """The form `Web.page` read and checked for this POST."""
    form: dict[str, str] = request.state.form
    return form
