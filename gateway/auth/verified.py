"""Tokens verified already: a bounded cache from a token's digest to the identity it names.

Pure (the clock is passed in). An MCP client sends the same bearer token on every request of a
session; checking its signature each time would cost more than the rest of the request's
authentication (docs/decisions/0111). An entry lasts until the token expires and no longer: it is
dropped when the issuer's key set changes (a token of a key the provider removed is refused at once)
and when the `auth` section is reloaded (the role rules may have changed). Tokens are kept only as
SHA-256 digests.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from gateway.auth.identity import Identity

MAX_ENTRIES = 10_000


class VerifiedTokens:
    """Identities of verified tokens, least recently used first, valid for one key set generation."""

    def __init__(self, limit: int = MAX_ENTRIES) -> None:
        self._limit = limit
        self._entries: OrderedDict[bytes, tuple[Identity, float]] = OrderedDict()
        self._generation: object = None

    def get(self, token: str, generation: object, now: float) -> Identity | None:
        """The identity `token` was verified as under key set `generation`, while it has not expired."""
        if generation != self._generation:
            self.clear()
            self._generation = generation
            return None
        digest = hashlib.sha256(token.encode()).digest()
        found = self._entries.get(digest)
        if found is None:
            return None
        if now >= found[1]:
            del self._entries[digest]
            return None
        self._entries.move_to_end(digest)
        return found[0]

    def put(self, token: str, generation: object, identity: Identity, expires: float) -> None:
        """Remember that `token` names `identity` until `expires` (epoch seconds) under `generation`."""
        if generation != self._generation:
            self.clear()
            self._generation = generation
        self._entries[hashlib.sha256(token.encode()).digest()] = (identity, expires)
        if len(self._entries) > self._limit:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        """Forget every token."""
        self._entries.clear()
