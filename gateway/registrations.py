"""What operators registered through the API (servers, groups), kept across restarts.

One table of JSON entries keyed by kind and name, behind the store seam (`gateway.stores`): a
SQLite file by default, or the PostgreSQL database replicas share. The entries are stored as the
operator's validated config form, not as resolved objects: loading one goes through the same
parser as a config file entry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from gateway.stores import Database, StoreSettings, migrate, open_database

REGISTRATIONS_FILE = "registrations.db"
STORE = "registrations"
"""The registrations' name in the store seam (their SQLite file is `registrations.db`)."""
Kind = Literal["server", "group"]


class RegistrationStore:
    """API registrations by kind and name in `db`; each entry a JSON object in the config file's form.

    Every method may raise `DatabaseError`.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        try:
            migrate(db, STORE)
        except BaseException:
            db.close()
            raise

    @classmethod
    def open(cls, settings: StoreSettings, data_dir: Path) -> RegistrationStore:
        """The registrations where `settings` put them: `registrations.db` under `data_dir`, or PostgreSQL."""
        return cls(open_database(settings, data_dir, STORE))

    def save(self, kind: Kind, name: str, entry: Mapping[str, Any]) -> None:
        """Store `entry` under `kind` and `name`, replacing what was there."""
        text = json.dumps(dict(entry), sort_keys=True)
        self._db.execute(
            "INSERT INTO registrations (kind, name, entry) VALUES (?, ?, ?)"
            " ON CONFLICT (kind, name) DO UPDATE SET entry = excluded.entry",
            (kind, name, text),
        )

    def remove(self, kind: Kind, name: str) -> bool:
        """Forget one entry; False when there was none."""
        return self._db.execute("DELETE FROM registrations WHERE kind = ? AND name = ?", (kind, name)) > 0

    def entries(self, kind: Kind) -> dict[str, dict[str, Any]]:
        """Every entry of `kind` by name, in name order (by code point, whatever the database's collation)."""
        rows = self._db.fetch_all("SELECT name, entry FROM registrations WHERE kind = ?", (kind,))
        return {name: json.loads(entry) for name, entry in sorted(rows)}

    def close(self) -> None:
        """Close the database."""
        self._db.close()
