"""API keys: held only as digests, and what a usable key looks like."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

MIN_KEY_LENGTH = 16
# RFC 6750 b64token: the characters a Bearer credential may hold.
TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
TOKEN68_RULE = "letters, digits and -._~+/ (the characters a Bearer token may hold)"


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One accepted API key, held only as the SHA-256 digest of the key."""

    caller: str
    role: str
    digest: bytes


def hash_key(key: str) -> str:
    """The hex SHA-256 of an API key, as written in `key_sha256`."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_problem(key: str) -> str | None:
    """Why `key` cannot serve as an API key, or None when it can."""
    if len(key) < MIN_KEY_LENGTH:
        return f"an API key must be at least {MIN_KEY_LENGTH} characters"
    if not TOKEN68.fullmatch(key):
        return f"an API key may hold only {TOKEN68_RULE}"
    return None
