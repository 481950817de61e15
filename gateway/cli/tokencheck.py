"""`check --token`: what a sample credential would get from this configuration, and why."""

from __future__ import annotations

import sys

from gateway.auth.authenticator import Authenticator
from gateway.auth.identity import AuthenticationError
from gateway.auth.roles import matching_rule


def read_token(value: str) -> str:
    """The token given on the command line, or read from stdin for `-` (which keeps it out of `ps`)."""
    return (sys.stdin.readline() if value == "-" else value).strip().removeprefix("Bearer ").strip()


async def token_report(authenticator: Authenticator, token: str) -> tuple[bool, list[str]]:
    """Whether the token is accepted, and the lines `check` prints: the issuer's keys, then the
    caller and role it gets with the rule that gave the role (or why it is refused)."""
    lines: list[str] = []
    try:
        identity = await authenticator.identify(f"Bearer {token}")
    except AuthenticationError as error:
        accepted, lines = False, [f"  [FAIL] token refused: {error.message}"]
    else:
        accepted = True
        lines.append(f"  [ok] token: caller '{identity.caller}', role '{identity.role}' ({_why(authenticator, token)})")
    keys = authenticator.keys
    if keys is not None:
        state = f"keys {', '.join(keys.kids())}" if keys.loaded else "no keys"
        problem = f"; last fetch failed: {keys.error}" if keys.error else ""
        lines.insert(0, f"  [{'ok' if keys.error is None else 'FAIL'}] issuer {keys.issuer}: {state}{problem}")
    return accepted, lines


def _why(authenticator: Authenticator, token: str) -> str:
    """How an accepted token got its role."""
    settings = authenticator.settings.jwt
    if token.count(".") != 2 or settings is None:
        return "an API key"
    import jwt

    # Verified a moment ago by `identify`; read again only to name the rule.
    claims = jwt.decode(token, options={"verify_signature": False})
    found = matching_rule(claims, settings.role_rules) if settings.role_rules else None
    if found is None:
        return f"by its '{settings.role_claim}' claim"
    index, rule = found
    return f"by auth.jwt.role_rules[{index}]: {rule.describe()}"
