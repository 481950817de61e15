"""The owners and risk floors of exposed tool names (`gateway.catalog.ownership`), kept across restarts.

One table behind the store seam (`gateway.stores`): `names.db` under the data directory, or the
PostgreSQL database replicas share. A claim never takes a name another process claimed first,
and a floor only ever rises, both decided by the database in one statement per name.
"""

from __future__ import annotations

from gateway.catalog.ownership import RISKS, NameChanges, NameRow
from gateway.stores import MigratedStore

STORE = "names"
"""The names' store in the seam (their SQLite file is `names.db`)."""


class NameStore(MigratedStore):
    """Exposed names in `db`: each one's owner and highest risk. Every method may raise `DatabaseError`."""

    STORE = STORE

    def rows(self) -> list[NameRow]:
        """Every stored name with its owner and highest risk."""
        rows = self._db.fetch_all("SELECT name, owner, risk FROM tool_names")
        return [(name, owner, None if risk is None else RISKS[risk]) for name, owner, risk in rows]

    def keep(self, changes: NameChanges) -> dict[str, str]:
        """Store `changes` in one transaction: names freed first, then claims (a name owned already
        keeps its owner) and raised floors (a lower one never replaces a higher); the owner of each
        claimed name as stored now."""
        with self._db.transaction() as tx:
            if changes.released:
                tx.execute_many(
                    "UPDATE tool_names SET owner = NULL WHERE owner = ?", [(owner,) for owner in changes.released]
                )
            if changes.claimed:
                tx.execute_many(
                    "INSERT INTO tool_names (name, owner) VALUES (?, ?)"
                    " ON CONFLICT (name) DO UPDATE SET owner = COALESCE(tool_names.owner, excluded.owner)",
                    list(changes.claimed.items()),
                )
            if changes.raised:
                tx.execute_many(
                    "INSERT INTO tool_names (name, risk) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET risk ="
                    " CASE WHEN tool_names.risk IS NULL OR excluded.risk > tool_names.risk"
                    " THEN excluded.risk ELSE tool_names.risk END",
                    [(name, RISKS.index(risk)) for name, risk in changes.raised.items()],
                )
            if not changes.claimed:
                return {}
            owned = tx.fetch_all("SELECT name, owner FROM tool_names WHERE owner IS NOT NULL")
        return {name: owner for name, owner in owned if name in changes.claimed}
