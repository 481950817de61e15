"""Signing in (paste an API key or a JWT) and out."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from gateway.auth.identity import AuthenticationError
from gateway.web import csrf
from gateway.web.pages import Person, Web, read_form
from gateway.web.signin import COOKIE


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path on this gateway only, never another site."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def routes(web: Web) -> list[Route]:
    """`/signin` and `/signout`."""

    async def form(request: Request) -> Response:
        session = web.sessions.get(request.cookies.get(COOKIE))
        fresh = session is None
        session = session or web.sessions.start()
        page = web.render(
            request,
            None,
            "signin.html",
            csrf_token=session.csrf,
            next=safe_next(request.query_params.get("next")),
            auth_on=web.gateway.authenticator.settings.enabled,
            error=None,
        )
        return web.with_cookie(request, page, session) if fresh else page

    async def sign_in(request: Request) -> Response:
        session = web.sessions.get(request.cookies.get(COOKIE))
        try:
            values = await read_form(request)
            if session is None:
                raise csrf.CsrfError("your sign-in form expired: reload the page and paste the key again")
            csrf.check(session.csrf, values.get(csrf.FIELD))
        except Exception as error:
            return web.failure(request, None, error)
        target = safe_next(values.get("next"))
        try:
            signed = web.sessions.sign_in(session, values.get("credential", ""))
        except AuthenticationError as error:
            page = web.render(
                request,
                None,
                "signin.html",
                status=401,
                csrf_token=session.csrf,
                next=target,
                auth_on=web.gateway.authenticator.settings.enabled,
                error=error.message,
            )
            return page
        return web.with_cookie(request, RedirectResponse(target, status_code=303), signed)

    async def sign_out(request: Request, person: Person) -> Response:
        web.sessions.end(person.session.id)
        await web.gateway.close_session(person.session.context)
        response = RedirectResponse("/signin", status_code=303)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    return [
        Route("/signin", form, methods=["GET"]),
        Route("/signin", sign_in, methods=["POST"]),
        Route("/signout", web.page(sign_out), methods=["POST"]),
    ]
