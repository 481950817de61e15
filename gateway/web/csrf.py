"""CSRF: every form carries a token, and every POST must bring it back.

A signed-in session's forms carry the session's token. The sign-in form comes before any session,
and nothing is stored for it: its token is an HMAC, under a key of this process, over the random
value of the browser's pre-sign-in cookie and an expiry, so it is good only in the browser that
holds that cookie, and only until then.

The session cookie is SameSite=Strict and the HTTP edge checks `Origin`; the token is the third lock,
for a browser or proxy that weakens either.
"""

from __future__ import annotations

import hashlib
import hmac
import re

from gateway.errors import OperationError

FIELD = "csrf"


class CsrfError(OperationError):
    """A form came back without its session's CSRF token."""

    status = 403


def check(expected: str, submitted: object) -> None:
    """Raise `CsrfError` unless `submitted` is the session's token `expected`."""
    if not isinstance(submitted, str) or not hmac.compare_digest(expected.encode(), submitted.encode()):
        raise CsrfError("the form's security token is missing or stale: reload the page and send it again")


def _mac(key: bytes, nonce: str, expires: int) -> str:
    return hmac.new(key, f"{expires}:{nonce}".encode(), hashlib.sha256).hexdigest()


def signin_token(key: bytes, nonce: str, expires: int) -> str:
    """The sign-in form's token for the browser whose pre-sign-in cookie holds `nonce`, good until
    `expires` (epoch seconds)."""
    return f"{expires}.{_mac(key, nonce, expires)}"


def check_signin(key: bytes, nonce: str | None, submitted: object, now: float) -> None:
    """Raise `CsrfError` unless `submitted` is a sign-in token made with `key` for `nonce` that has
    not expired at `now`."""
    expires, _, mac = submitted.partition(".") if isinstance(submitted, str) else ("", "", "")
    if (
        nonce is None
        or not re.fullmatch(r"[0-9]{1,12}", expires)
        or int(expires) <= now
        or not hmac.compare_digest(_mac(key, nonce, int(expires)).encode(), mac.encode())
    ):
        raise CsrfError("the sign-in form expired or is not this browser's: reload the page and paste the key again")
