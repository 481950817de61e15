"""Each caller's OAuth grant for an upstream server, kept across restarts and sealed at rest.

Two tables behind the store seam (`gateway.stores`): `grants.db` under the data directory, or the
PostgreSQL database replicas share. A grant's tokens (access and refresh) and a server's OAuth
client (its secret, when it has one) are encrypted with the key that seals registrations
(`gateway.stores.sealing`): a copy of the database alone gives no token.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Self

from gateway.stores import Database, MigratedStore, StoreSettings, open_database
from gateway.stores.sealing import Sealer, UnreadableRowError, sealer

STORE = "grants"
"""The grants' store in the seam (their SQLite file is `grants.db`)."""


@dataclass(frozen=True, slots=True)
class StoredGrant:
    """One caller's grant for one server: its tokens (the provider's JSON) and when the access token expires."""

    server: str
    caller: str
    tokens: str
    expires_at: float | None
    updated: float


class GrantStore(MigratedStore):
    """Grants by server and caller, and each server's OAuth client, sealed by `sealer`.

    Every method may raise `DatabaseError`; a row this key cannot open reads as absent.
    """

    STORE = STORE

    def __init__(self, db: Database, sealer: Sealer) -> None:
        super().__init__(db)
        self._sealer = sealer

    @classmethod
    def open(cls, settings: StoreSettings, data_dir: Path) -> Self:
        """The grants where `settings` put them, sealed with `store.key` or the data directory's key file."""
        key = sealer(settings.key, data_dir)
        return cls(open_database(settings, data_dir, STORE), key)

    def grant(self, server: str, caller: str) -> StoredGrant | None:
        """`caller`'s grant for `server`, or None."""
        row = self._db.fetch_one(
            "SELECT tokens, expires_at, updated FROM upstream_grants WHERE server = ? AND caller = ?", (server, caller)
        )
        if row is None:
            return None
        try:
            tokens = self._sealer.unseal(row[0])
        except UnreadableRowError:
            return None
        return StoredGrant(server, caller, tokens, row[1], row[2])

    def save(self, server: str, caller: str, tokens: str, expires_at: float | None, now: float) -> None:
        """Keep `tokens` as `caller`'s grant for `server`, replacing the one before."""
        self._db.execute(
            "INSERT INTO upstream_grants (server, caller, tokens, expires_at, updated) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (server, caller) DO UPDATE SET tokens = excluded.tokens,"
            " expires_at = excluded.expires_at, updated = excluded.updated",
            (server, caller, self._sealer.seal(tokens), expires_at, now),
        )

    def forget(self, server: str, caller: str) -> bool:
        """Remove `caller`'s grant for `server`; whether there was one."""
        return self._db.execute("DELETE FROM upstream_grants WHERE server = ? AND caller = ?", (server, caller)) > 0

    def grants(self, server: str | None = None) -> list[StoredGrant]:
        """Every grant (of `server` alone, when given), its tokens left out, oldest first."""
        sql = "SELECT server, caller, expires_at, updated FROM upstream_grants"
        params: tuple[str, ...] = ()
        if server is not None:
            sql, params = f"{sql} WHERE server = ?", (server,)
        rows = self._db.fetch_all(f"{sql} ORDER BY updated, caller", params)
        return [StoredGrant(row[0], row[1], "", row[2], row[3]) for row in rows]

    def client(self, server: str) -> str | None:
        """The OAuth client the gateway holds for `server` (its JSON), or None."""
        row = self._db.fetch_one("SELECT client FROM upstream_clients WHERE server = ?", (server,))
        if row is None:
            return None
        try:
            return self._sealer.unseal(row[0])
        except UnreadableRowError:
            return None

    def save_client(self, server: str, client: str) -> None:
        """Keep `client` as the OAuth client for `server`."""
        self._db.execute(
            "INSERT INTO upstream_clients (server, client) VALUES (?, ?)"
            " ON CONFLICT (server) DO UPDATE SET client = excluded.client",
            (server, self._sealer.seal(client)),
        )
