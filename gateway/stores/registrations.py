"""What operators registered through the API (servers, groups), kept across restarts.

One table of JSON entries keyed by kind and name, behind the store seam (`gateway.stores`): a
SQLite file by default, or the PostgreSQL database replicas share. The entries are stored as the
operator's validated config form, not as resolved objects: loading one goes through the same
parser as a config file entry. An entry may hold credentials (header and env values), so each is
encrypted with a key kept outside the database (`gateway.stores.sealing`); entries that earlier
versions wrote in clear are read as they are and encrypted when the store opens.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from gateway.stores import Database, StoreSettings, migrate, open_database
from gateway.stores.sealing import Sealer, UnreadableRowError, sealer

log = logging.getLogger(__name__)

REGISTRATIONS_FILE = "registrations.db"
STORE = "registrations"
"""The registrations' name in the store seam (their SQLite file is `registrations.db`)."""
Kind = Literal["server", "group"]


class RegistrationStore:
    """API registrations by kind and name in `db`; each entry a JSON object in the config file's form,
    sealed by `sealer`.

    Every method may raise `DatabaseError`.
    """

    def __init__(self, db: Database, sealer: Sealer) -> None:
        self._db = db
        self._sealer = sealer
        try:
            migrate(db, STORE)
            self._seal_clear_entries()
        except BaseException:
            db.close()
            raise

    @classmethod
    def open(cls, settings: StoreSettings, data_dir: Path) -> RegistrationStore:
        """The registrations where `settings` put them (`registrations.db` under `data_dir`, or
        PostgreSQL), sealed with `store.key` or the data directory's key file."""
        key = sealer(settings.key, data_dir)
        return cls(open_database(settings, data_dir, STORE), key)

    def save(self, kind: Kind, name: str, entry: Mapping[str, Any]) -> None:
        """Store `entry` under `kind` and `name`, replacing what was there."""
        text = self._sealer.seal(json.dumps(dict(entry), sort_keys=True))
        self._db.execute(
            "INSERT INTO registrations (kind, name, entry) VALUES (?, ?, ?)"
            " ON CONFLICT (kind, name) DO UPDATE SET entry = excluded.entry",
            (kind, name, text),
        )

    def remove(self, kind: Kind, name: str) -> bool:
        """Forget one entry; False when there was none."""
        return self._db.execute("DELETE FROM registrations WHERE kind = ? AND name = ?", (kind, name)) > 0

    def entries(self, kind: Kind) -> dict[str, dict[str, Any]]:
        """Every entry of `kind` by name, in name order (by code point, whatever the database's
        collation); one this key cannot open is left out with a warning."""
        rows = self._db.fetch_all("SELECT name, entry FROM registrations WHERE kind = ?", (kind,))
        found: dict[str, dict[str, Any]] = {}
        for name, stored in sorted(rows):
            try:
                found[name] = json.loads(stored if _in_clear(stored) else self._sealer.unseal(stored))
            except UnreadableRowError as error:
                log.warning(
                    "registered %s %r in %s is unreadable: %s (replicas sharing store.url need the same store.key)",
                    kind,
                    name,
                    self._db.where,
                    error.message,
                )
        return found

    def _seal_clear_entries(self) -> None:
        """Encrypt the entries an earlier version stored in clear, each only if nobody changed it meanwhile."""
        rows = self._db.fetch_all("SELECT kind, name, entry FROM registrations WHERE entry LIKE '{%'")
        for kind, name, text in rows:
            self._db.execute(
                "UPDATE registrations SET entry = ? WHERE kind = ? AND name = ? AND entry = ?",
                (self._sealer.seal(text), kind, name, text),
            )
        if rows:
            log.info("encrypted %d registrations stored in clear by an earlier version", len(rows))

    def close(self) -> None:
        """Close the database."""
        self._db.close()


def _in_clear(stored: str) -> bool:
    """Whether an entry is JSON as earlier versions stored it; a sealed one is URL-safe base64."""
    return stored.startswith("{")
