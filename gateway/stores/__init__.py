"""Where the durable stores keep their rows: SQLite files under `data_dir` by default, or the
PostgreSQL database that `store.url` names, which several gateway processes share (docs/replicas.md).
The same section's `redis` names the Redis of the fast state replicas share (`gateway.shared`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

from gateway.problems import ConfigProblems, validate_section
from gateway.stores.database import Database, DatabaseError, Queries
from gateway.stores.migrations import migrate
from gateway.stores.sealing import key_problem
from gateway.stores.sqlite import SqliteDatabase

STORE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "url": {
            "type": "string",
            "pattern": "^postgres(ql)?://",
            "description": "a PostgreSQL connection URL, postgresql://user:password@host:port/database",
        },
        "redis": {
            "type": "string",
            "pattern": "^(rediss?|unix)://",
            "description": "a Redis URL, redis://[:password@]host:port/db",
        },
        "key": {
            "type": "string",
            "description": "the key the registrations are encrypted with: 32 bytes in URL-safe base64",
        },
        "spool": {
            "type": "string",
            "pattern": "^/",
            "description": "an absolute path: where audit rows wait for PostgreSQL (processes may share it)",
        },
    },
}
"""The JSON Schema of the `store` section."""


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """The `store` section: `url` names the PostgreSQL database, None keeps SQLite under `data_dir`;
    `redis` names the Redis of budgets, stateless-era session state and change fan-out, None keeps
    them in this process; `spool` is the directory where audit rows bound for `url` wait to be
    shipped (`gateway.stores.spool`), None for `<data_dir>/spool`; `key` is the key registrations
    are encrypted with (`gateway.stores.sealing`), None for the data directory's key file."""

    url: str | None = None
    redis: str | None = None
    spool: str | None = None
    key: str | None = None

    @classmethod
    def from_config(cls, section: Any, *, source_file: str) -> StoreSettings:
        """The settings of a `store` section (SQLite when None); raises `ConfigProblems`."""
        if section is None:
            return cls()
        # The URL may hold a password, so no message echoes a value.
        validate_section(section, STORE_SCHEMA, section="store", source_file=source_file, hide_values=True)
        key = section.get("key")
        if key is not None and (problem := key_problem(key)) is not None:
            raise ConfigProblems(source_file, [("store.key", problem)])
        return cls(url=section.get("url"), redis=section.get("redis"), spool=section.get("spool"), key=key)

    def spool_dir(self, data_dir: Path, store: str) -> Path:
        """Where `store` spools rows bound for PostgreSQL: `<spool or data_dir/spool>/<store>`."""
        return (Path(self.spool) if self.spool is not None else data_dir / "spool") / store


def open_database(settings: StoreSettings, data_dir: Path, store: str, *, manual_checkpoints: bool = False) -> Database:
    """The database of `store` (`audit`, `approvals`, ...); the store applies its migrations.

    SQLite: the file `<data_dir>/<store>.db`; `manual_checkpoints` as in `SqliteDatabase`.
    PostgreSQL: a pool of connections to `settings.url`, where every store has its tables.
    Raises `DatabaseError`, its message naming the file or the URL (without its password).
    """
    if settings.url is None:
        return SqliteDatabase(data_dir / f"{store}.db", manual_checkpoints=manual_checkpoints)
    try:
        from gateway.stores.postgres import PostgresDatabase
    except ImportError:
        raise DatabaseError(
            "store.url names PostgreSQL, but its driver is not installed: pip install 'mcp-gateway[replicas]'"
        ) from None
    return PostgresDatabase(settings.url)


class MigratedStore:
    """A store of one migrated database: `STORE` names its migrations and its SQLite file.

    Opening migrates the database; a failed migration closes it again. Every method of a
    subclass may raise `DatabaseError`.
    """

    STORE: ClassVar[str]

    def __init__(self, db: Database) -> None:
        self._db = db
        try:
            migrate(db, self.STORE)
        except BaseException:
            db.close()
            raise

    @classmethod
    def open(cls, settings: StoreSettings, data_dir: Path) -> Self:
        """The store where `settings` put it: `<STORE>.db` under `data_dir`, or PostgreSQL."""
        return cls(open_database(settings, data_dir, cls.STORE))

    def close(self) -> None:
        """Close the database."""
        self._db.close()


__all__ = [
    "STORE_SCHEMA",
    "Database",
    "DatabaseError",
    "MigratedStore",
    "Queries",
    "StoreSettings",
    "migrate",
    "open_database",
]
