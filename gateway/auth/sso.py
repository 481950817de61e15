"""The end of a web sign-in: the provider's code exchanged for an ID token, and the caller it names.

The ID token is checked like a bearer token (signature with the issuer's keys, issuer, expiry) but for
the web client's audience, and it must carry the nonce of this browser's flow. Its claims give the
caller and the role by the same rules as an MCP caller's token, so a person has one identity (and
one state) whether they call through a client or use the page.
"""

from __future__ import annotations

import hmac

from gateway.auth.authenticator import Authenticator
from gateway.auth.codeflow import Flow
from gateway.auth.identity import AuthenticationError, Identity
from gateway.auth.oidc import IdentityProviderError, exchange_code
from gateway.auth.tokens import identity_of, verified_claims


async def redeem(authenticator: Authenticator, flow: Flow, code: str, redirect_uri: str) -> tuple[Identity, float]:
    """The identity the provider's `code` names, and when its ID token expires (epoch seconds).

    AuthenticationError for a token that does not check out; IdentityProviderError when the provider
    cannot be reached or refuses the code.
    """
    settings, keys, signin = authenticator.settings.jwt, authenticator.keys, authenticator.settings.web_signin
    if settings is None or keys is None or signin is None:
        raise AuthenticationError("sign-in with the identity provider is not configured")
    if keys.token_endpoint is None:
        raise IdentityProviderError(f"the discovery document of {keys.issuer} names no usable token_endpoint")
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "code_verifier": flow.verifier,
        "client_id": signin.client_id,
    }
    credentials = None if signin.client_secret is None else (signin.client_id, signin.client_secret)
    answer = await exchange_code(keys.client, keys.token_endpoint, form, credentials)
    id_token = answer.get("id_token")
    if not isinstance(id_token, str):
        raise IdentityProviderError("the token endpoint answered without an ID token (is 'openid' among the scopes?)")
    claims = await authenticator.with_fresh_keys(
        lambda: verified_claims(id_token, settings, keys, audience=signin.client_id)
    )
    nonce = claims.get("nonce")
    if not isinstance(nonce, str) or not hmac.compare_digest(nonce.encode(), flow.nonce.encode()):
        raise AuthenticationError("the ID token was not made for this sign-in (its nonce differs): sign in again")
    return identity_of(claims, settings, authenticator.settings.known_roles), float(claims["exp"])
