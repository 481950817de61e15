"""Versioned schema migrations, applied when a store opens: plain SQL files and a `schema_version` table.

Each backend has a folder of files named `<store>-<version>-<what>.sql` (`audit-0002-request-id.sql`).
A store's migrations not yet recorded in `schema_version` run in version order, each with its row,
in one transaction: a process that starts while another migrates waits for it (SQLite's write lock,
a PostgreSQL advisory lock), then finds nothing left to do. Statements are separated by `;`, except
those inside a trigger's `BEGIN ... END` (SQLite) or a function's `$$ ... $$` body (PostgreSQL).

SQLite files written before versions were kept have no `schema_version` yet: their version 1
tables exist (hence `IF NOT EXISTS` there), and an `ALTER TABLE ... ADD COLUMN` of a column
they already have is taken as applied.
"""

from __future__ import annotations

import re
import sqlite3
import time
from importlib import resources

from gateway.stores.database import Database, DatabaseError, Queries

_FILE = re.compile(r"(?P<store>[a-z]+)-(?P<version>\d{4})-[a-z0-9-]+\.sql")
# Any constant: the key of the advisory lock that serialises migrations in one PostgreSQL database.
_LOCK_KEY = 0x6D6367
_VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_version ("
    " store TEXT NOT NULL, version INTEGER NOT NULL, applied DOUBLE PRECISION NOT NULL,"
    " PRIMARY KEY (store, version))"
)


def migrations(dialect: str, store: str) -> list[tuple[int, str]]:
    """The migrations of `store` for `dialect`, as (version, SQL) in version order."""
    found = []
    for entry in resources.files(__name__).joinpath(dialect).iterdir():
        match = _FILE.fullmatch(entry.name)
        if match is not None and match["store"] == store:
            found.append((int(match["version"]), entry.read_text(encoding="utf-8")))
    return sorted(found)


def migrate(db: Database, store: str) -> list[int]:
    """Bring `store`'s tables in `db` to the newest version; the versions applied now (none when current)."""
    pending = migrations(db.dialect, store)
    with db.transaction() as tx:
        if db.dialect == "postgresql":
            tx.execute("SELECT pg_advisory_xact_lock(?)", (_LOCK_KEY,))
        tx.execute(_VERSION_TABLE)
        done = {row[0] for row in tx.fetch_all("SELECT version FROM schema_version WHERE store = ?", (store,))}
        applied = []
        for version, script in pending:
            if version in done:
                continue
            for statement in _statements(script, db.dialect):
                _run(tx, db.dialect, statement)
            tx.execute(
                "INSERT INTO schema_version (store, version, applied) VALUES (?, ?, ?)", (store, version, time.time())
            )
            applied.append(version)
    return applied


def _statements(script: str, dialect: str) -> list[str]:
    lines = [line for line in script.splitlines() if not line.lstrip().startswith("--")]
    statements, pending = [], ""
    for piece in "\n".join(lines).split(";"):
        pending += piece + ";"
        if _complete(pending, dialect):
            statements.append(pending[:-1].strip())
            pending = ""
    statements.append(pending[:-1].strip())
    return [statement for statement in statements if statement]


def _complete(statement: str, dialect: str) -> bool:
    """Whether `statement` (ending in `;`) ends there, rather than inside a trigger or function body."""
    if dialect == "sqlite":
        return sqlite3.complete_statement(statement)
    return statement.count("$$") % 2 == 0


def _run(tx: Queries, dialect: str, statement: str) -> None:
    try:
        tx.execute(statement)
    except DatabaseError as error:
        added = re.match(r"ALTER TABLE \w+ ADD COLUMN", statement, re.IGNORECASE)
        if dialect == "sqlite" and added and "duplicate column name" in error.message:
            return
        raise
