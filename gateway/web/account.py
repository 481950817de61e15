"""Signing in (with the organisation's OpenID provider, by pasting an API key or a JWT, or with the
one-time link `serve` printed) and out."""

from __future__ import annotations

import logging
import secrets

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from gateway.auth import codeflow
from gateway.auth.codeflow import authorization_url
from gateway.auth.identity import HOST_CALLER, AuthenticationError, Identity
from gateway.auth.oidc import IdentityProviderError
from gateway.auth.sso import redeem
from gateway.errors import clip
from gateway.runtime.hostaccess import HOST_FILE, LINK_PATH
from gateway.web import csrf
from gateway.web.pages import Person, Web, read_form
from gateway.web.signin import COOKIE

FLOW_COOKIE = "gateway_signin_flow"
FLOW_PATH = "/signin/oidc"
CALLBACK_PATH = FLOW_PATH + "/callback"

log = logging.getLogger(__name__)


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path on this gateway only, never another site."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _callback(request: Request) -> str:
    """The redirect URI registered at the provider: this gateway's callback, as the browser reaches it."""
    return str(request.base_url).rstrip("/") + CALLBACK_PATH


def routes(web: Web) -> list[Route]:
    """`/signin` (with its OpenID Connect flow) and `/signout`."""

    def signin_page(
        request: Request,
        nonce: str,
        target: str,
        status: int = 200,
        error: str | None = None,
        sso_error: str | None = None,
    ) -> Response:
        return web.render(
            request,
            None,
            "signin.html",
            status=status,
            csrf_token=web.sessions.form_token(nonce),
            next=target,
            auth_on=web.gateway.authenticator.settings.enabled,
            sso=web.gateway.authenticator.settings.web_signin is not None,
            error=error,
            sso_error=sso_error,
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
            previous, credential = web.sessions.get(nonce), values.get("credential", "")
            # A pasted JWT of a key the cache lacks fetches the issuer's keys, as on /mcp.
            signed = await web.gateway.authenticator.with_fresh_keys(lambda: web.sessions.sign_in(previous, credential))
        except AuthenticationError as error:
            return signin_page(request, nonce, target, 401, error.message)
        return web.with_cookie(request, RedirectResponse(target, status_code=303), signed.id)

    async def sso_start(request: Request) -> Response:
        # A link, not a form: it only sends the browser to the provider with a flow bound to it.
        authenticator = web.gateway.authenticator
        signin, keys = authenticator.settings.web_signin, authenticator.keys
        if signin is None or keys is None:
            return web.error_page(request, None, 404, "Sign-in with an identity provider is not configured.")
        if not keys.loaded:
            await keys.refresh_for_unknown_key()
        if keys.authorization_endpoint is None:
            message = f"The identity provider {keys.issuer} cannot be reached now; sign in with an API key, or retry."
            log.warning(
                "web sign-in refused: %s", keys.error or "the discovery document names no authorization_endpoint"
            )
            return web.error_page(request, None, 503, message)
        flow, sealed = web.sessions.seal_flow(safe_next(request.query_params.get("next")))
        url = authorization_url(keys.authorization_endpoint, signin.client_id, _callback(request), signin.scopes, flow)
        response = RedirectResponse(url, status_code=303)
        # Lax, unlike the session cookie: it must come back on the provider's redirect, a cross-site navigation.
        response.set_cookie(
            FLOW_COOKIE,
            sealed,
            max_age=int(codeflow.FLOW_SECONDS),
            httponly=True,
            samesite="lax",
            secure=request.url.scheme == "https",
            path=FLOW_PATH,
        )
        return response

    async def sso_callback(request: Request) -> Response:
        query = request.query_params
        nonce = request.cookies.get(COOKIE) or secrets.token_urlsafe(32)
        try:
            flow = web.sessions.open_flow(request.cookies.get(FLOW_COOKIE), query.get("state"))
            if "error" in query:
                described = query.get("error_description") or query["error"]
                raise AuthenticationError(f"the identity provider did not sign you in: {clip(described)}")
            code = query.get("code")
            if not code:
                raise AuthenticationError("the identity provider's answer holds no code: sign in again")
            identity, expires = await redeem(web.gateway.authenticator, flow, code, _callback(request))
        except (AuthenticationError, IdentityProviderError) as error:
            log.info("web sign-in with the identity provider refused: %s", error.message)
            response = signin_page(request, nonce, "/", 401, sso_error=error.message)
            response.delete_cookie(FLOW_COOKIE, path=FLOW_PATH, httponly=True, samesite="lax")
            return web.with_cookie(request, response, nonce)
        previous = web.sessions.get(request.cookies.get(COOKIE))
        if previous is not None:
            web.sessions.end(previous.id)
        try:
            session = web.sessions.start(identity)
        except AuthenticationError as error:
            return signin_page(request, nonce, flow.target, 401, sso_error=error.message)
        session.expires = expires
        response = RedirectResponse(flow.target, status_code=303)
        response.delete_cookie(FLOW_COOKIE, path=FLOW_PATH, httponly=True, samesite="lax")
        return web.with_cookie(request, response, session.id)

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
        Route(FLOW_PATH, sso_start, methods=["GET"]),
        Route(CALLBACK_PATH, sso_callback, methods=["GET"]),
        Route(LINK_PATH + "/{code}", host_link, methods=["GET"]),
        Route("/signout", web.page(sign_out), methods=["POST"]),
    ]
