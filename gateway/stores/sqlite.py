"""The embedded backend: one SQLite file per store under `data_dir`, durable against a killed process."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path

from gateway.runtime.datadir import private_file
from gateway.stores.database import DatabaseError, Dialect, Row


class _Connection:
    """Statements on one connection, sqlite3's errors translated; the caller holds the lock."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        with _translated():
            return self._db.execute(sql, params).rowcount

    def execute_many(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        with _translated():
            self._db.executemany(sql, rows)

    def fetch_one(self, sql: str, params: Sequence[object] = ()) -> Row | None:
        with _translated():
            row: Row | None = self._db.execute(sql, params).fetchone()
        return row

    def fetch_all(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        with _translated():
            return self._db.execute(sql, params).fetchall()


class SqliteDatabase:
    """A file in autocommit and WAL mode.

    Each statement is its own transaction, committed when it returns; with WAL and
    `synchronous=NORMAL` a committed row is in the WAL file before that, so it survives the
    process being killed (only a power loss can take back the last commits). One connection is
    shared across threads behind a lock. `manual_checkpoints` turns SQLite's automatic WAL
    checkpoints off, for a store whose writes run on the event loop and whose `maintain` runs
    them in a worker thread instead.
    """

    dialect: Dialect = "sqlite"
    inline_writes = True

    def __init__(self, path: Path, *, manual_checkpoints: bool = False) -> None:
        self.path = path
        self.where = str(path)
        self._lock = threading.Lock()
        try:
            # SQLite gives the -wal and -shm files the mode of the database file.
            private_file(path)
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            if manual_checkpoints:
                self._db.execute("PRAGMA wal_autocheckpoint=0")
        except sqlite3.Error as error:
            raise DatabaseError(f"{path}: {error}") from None
        except OSError as error:
            raise DatabaseError(f"{path}: {error.strerror}") from None
        self._connection = _Connection(self._db)

    def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        """Run one statement, committed when it returns; the number of rows it changed."""
        with self._lock:
            return self._connection.execute(sql, params)

    def execute_many(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        """Run one statement for each of `rows`, in one transaction."""
        with self.transaction() as connection:
            connection.execute_many(sql, rows)

    def fetch_one(self, sql: str, params: Sequence[object] = ()) -> Row | None:
        """The first row of a query, or None."""
        with self._lock:
            return self._connection.fetch_one(sql, params)

    def fetch_all(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """Every row of a query."""
        with self._lock:
            return self._connection.fetch_all(sql, params)

    @contextmanager
    def transaction(self) -> Iterator[_Connection]:
        """An immediate transaction: the write lock is taken before any read, so another process
        sharing the file cannot change a row between a read and the update that depends on it."""
        with self._lock:
            self._connection.execute("BEGIN IMMEDIATE")
            try:
                yield self._connection
            except BaseException:
                self._connection.execute("ROLLBACK")
                raise
            self._connection.execute("COMMIT")

    def maintain(self) -> None:
        """Checkpoint the WAL on a connection of its own: a passive checkpoint never blocks the writer."""
        with _translated(), closing(sqlite3.connect(self.path, isolation_level=None)) as db:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def close(self) -> None:
        """Close the connection; later calls fail."""
        with self._lock:
            self._db.close()


@contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as error:
        raise DatabaseError(str(error)) from None
