"""Signing in (paste an API key or a JWT, or open the one-time link `serve` printed) and out."""

from __future__ import annotations

import secrets

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from gateway.auth.identity import HOST_CALLER, AuthenticationError, Identity
from gateway.runtime.hostaccess import HOST_FILE, LINK_PATH
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

    def signin_page(request: Request, nonce: str, target: str, status: int = 200, error: str | None = None) -> Response:
        return web.render(
            request,
            None,
            "signin.html",
            status=status,
            csrf_token=web.sessions.form_token(nonce),
            next=target,
            auth_on=web.gateway.authenticator.settings.enabled,
            error=error,
        )

    async def form(request: Request) -> Response:
        # The form's token is bound to the cookie the browser holds (a session's id, or a random
        # value given here), and nothing is stored until someone signs in.
        target = safe_next(request.query_params.get("next"))
        nonce = request.cookies.get(COOKIE)
        if nonce:
            return signin_page(request, nonce, target)
        nonce = secrets.token_urlsafe(32)
        return web.with_cookie(request, signin_page(request, nonce, target), nonce)

    async def sign_in(request: Request) -> Response:
        nonce = request.cookies.get(COOKIE)
        try:
            values = await read_form(request)
            web.sessions.check_form(nonce, values.get(csrf.FIELD))
        except Exception as error:
            return web.failure(request, None, error)
        assert nonce is not None  # check_form refuses a browser without the cookie
        target = safe_next(values.get("next"))
        try:
            signed = web.sessions.sign_in(web.sessions.get(nonce), values.get("credential", ""))
        except AuthenticationError as error:
            return signin_page(request, nonce, target, 401, error.message)
        return web.with_cookie(request, RedirectResponse(target, status_code=303), signed.id)

    async def host_link(request: Request) -> Response:
        # The link works once, and only with the code this process printed on its terminal.
        access = web.gateway.host_access
        code: str = request.path_params["code"]
        if access is None or not access.redeem(code):
            message = (
                "This sign-in link was used already, or is not this gateway's: a link works once. On the gateway's "
                "host, `python -m gateway approvals list` shows what waits and `python -m gateway approvals approve "
                f"ID` approves it (they find the gateway through {HOST_FILE} in its data directory)."
            )
            return web.error_page(request, None, 403, message)
        previous = web.sessions.get(request.cookies.get(COOKIE))
        if previous is not None:
            web.sessions.end(previous.id)
        session = web.sessions.start(Identity(HOST_CALLER, None, "host"))
        return web.with_cookie(request, RedirectResponse("/approvals", status_code=303), session.id)

    async def sign_out(request: Request, person: Person) -> Response:
        web.sessions.end(person.session.id)
        await web.gateway.sessions.close(person.session.context)
        response = RedirectResponse("/signin", status_code=303)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    return [
        Route("/signin", form, methods=["GET"]),
        Route("/signin", sign_in, methods=["POST"]),
        Route(LINK_PATH + "/{code}", host_link, methods=["GET"]),
        Route("/signout", web.page(sign_out), methods=["POST"]),
    ]
