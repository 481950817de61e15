"""The gateway's embedded SQLite databases: one way to open them, durable against a killed process."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def open_database(path: Path, schema: str) -> sqlite3.Connection:
    """A connection in autocommit and WAL mode with `schema` applied.

    Each statement is its own transaction, committed when it returns; with WAL and
    `synchronous=NORMAL` a committed row is in the WAL file before that, so it survives the
    process being killed (only a power loss can take back the last commits). Shared across
    threads by its owner, which serialises access. Raises `sqlite3.Error`.
    """
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(schema)
    return db
