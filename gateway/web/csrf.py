"""CSRF: every form carries its web session's token, and every POST must bring it back.

The session cookie is SameSite=Strict and the HTTP edge checks `Origin`; the token is the third lock,
for a browser or proxy that weakens either.
"""

from __future__ import annotations

import hmac

from gateway.errors import OperationError

FIELD = "csrf"


class CsrfError(OperationError):
    """A form came back without its session's CSRF token."""

    status = 403


def check(expected: str, submitted: object) -> None:
    """Raise `CsrfError` unless `submitted` is the session's token `expected`."""
    if not isinstance(submitted, str) or not hmac.compare_digest(expected.encode(), submitted.encode()):
        raise CsrfError("the form's security token is missing or stale: reload the page and send it again")
