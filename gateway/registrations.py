"""What operators registered through the API (servers, groups), kept across restarts.

One SQLite table of JSON entries keyed by kind and name, behind the same seam as the audit and
confirmation stores (`pipeline.storage.open_database`), so a server-grade database can take its place.
The entries are stored as the operator's validated config form, not as resolved objects: loading one
goes through the same parser as a config file entry.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from gateway.pipeline.storage import open_database

REGISTRATIONS_FILE = "registrations.db"
Kind = Literal["server", "group"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS registrations (
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    entry TEXT NOT NULL,
    PRIMARY KEY (kind, name)
);
"""


class RegistrationStore:
    """API registrations by kind and name; each entry a JSON object in the config file's form."""

    def __init__(self, path: Path) -> None:
        self._db: sqlite3.Connection = open_database(path, _SCHEMA)
        self._lock = threading.Lock()

    def save(self, kind: Kind, name: str, entry: Mapping[str, Any]) -> None:
        """Store `entry` under `kind` and `name`, replacing what was there."""
        text = json.dumps(dict(entry), sort_keys=True)
        with self._lock:
            self._db.execute(
                "INSERT INTO registrations (kind, name, entry) VALUES (?, ?, ?)"
                " ON CONFLICT (kind, name) DO UPDATE SET entry = excluded.entry",
                (kind, name, text),
            )

    def remove(self, kind: Kind, name: str) -> bool:
        """Forget one entry; False when there was none."""
        with self._lock:
            cursor = self._db.execute("DELETE FROM registrations WHERE kind = ? AND name = ?", (kind, name))
        return cursor.rowcount > 0

    def entries(self, kind: Kind) -> dict[str, dict[str, Any]]:
        """Every entry of `kind` by name, in name order."""
        with self._lock:
            rows = self._db.execute(
                "SELECT name, entry FROM registrations WHERE kind = ? ORDER BY name", (kind,)
            ).fetchall()
        return {name: json.loads(entry) for name, entry in rows}

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()
