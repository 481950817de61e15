"""The replicas' backend: the stores' tables in one PostgreSQL database, shared by every gateway process.

The driver is psycopg 3 with its connection pool, used synchronously: the stores' methods are
blocking calls that the gateway already runs in worker threads (`anyio.to_thread`), and the
command line calls them with no event loop at all, so a thread-safe pool of blocking
connections keeps every call site as it is (docs/replicas.md says why not asyncpg).
Connections are in autocommit: a statement outside a transaction is committed, and with the
server's default `synchronous_commit = on` flushed to its WAL, when it returns.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from gateway.stores.database import DatabaseError, Dialect, Row

CONNECT_TIMEOUT = 10.0
"""Seconds the first connection may take before the store reports PostgreSQL unreachable."""
MAX_CONNECTIONS = 8
"""Connections per store and process: enough for the worker threads that write at once."""


class _Connection:
    """Statements on one pooled connection, psycopg's errors translated."""

    def __init__(self, connection: psycopg.Connection[Row]) -> None:
        self._connection = connection

    def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        with _translated():
            return self._connection.execute(_placeholders(sql), params).rowcount

    def execute_many(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        with _translated(), self._connection.cursor() as cursor:
            cursor.executemany(_placeholders(sql), rows)

    def fetch_one(self, sql: str, params: Sequence[object] = ()) -> Row | None:
        with _translated():
            return self._connection.execute(_placeholders(sql), params).fetchone()

    def fetch_all(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        with _translated():
            return self._connection.execute(_placeholders(sql), params).fetchall()


class PostgresDatabase:
    """A pool of autocommit connections to the database at `url`; fails fast when it cannot connect."""

    dialect: Dialect = "postgresql"
    inline_writes = False

    def __init__(self, url: str, *, max_connections: int = MAX_CONNECTIONS) -> None:
        self.where = without_password(url)
        # One connection first, so that a wrong password or an unreachable host is reported with
        # the server's reason rather than as the pool's timeout.
        try:
            psycopg.connect(url, connect_timeout=round(CONNECT_TIMEOUT)).close()
        except psycopg.Error as error:
            raise DatabaseError(f"{self.where}: {_reason(error)}") from None
        # Each connection is checked (one empty round trip) as it leaves the pool: after PostgreSQL
        # restarted, the pool's idle connections are dead, and the first statement on one would fail.
        self._pool: ConnectionPool[psycopg.Connection[Row]] = ConnectionPool(
            url,
            min_size=1,
            max_size=max_connections,
            kwargs={"autocommit": True},
            check=ConnectionPool.check_connection,
            open=False,
        )
        try:
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT)
        except PoolTimeout:
            self._pool.close()
            raise DatabaseError(f"{self.where}: no connection within {CONNECT_TIMEOUT:g} s") from None

    def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        """Run one statement, committed when it returns; the number of rows it changed."""
        with self._connection() as connection:
            return connection.execute(sql, params)

    def execute_many(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        """Run one statement for each of `rows` in one transaction, pipelined (psycopg's `executemany`)."""
        with self.transaction() as connection:
            connection.execute_many(sql, rows)

    def fetch_one(self, sql: str, params: Sequence[object] = ()) -> Row | None:
        """The first row of a query, or None."""
        with self._connection() as connection:
            return connection.fetch_one(sql, params)

    def fetch_all(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """Every row of a query."""
        with self._connection() as connection:
            return connection.fetch_all(sql, params)

    @contextmanager
    def transaction(self) -> Iterator[_Connection]:
        """A transaction on one connection (read committed: a conditional UPDATE waits for a
        concurrent one on the same row and then sees its result, so only one of them changes it)."""
        with _translated(), self._pool.connection(timeout=CONNECT_TIMEOUT) as connection, connection.transaction():
            yield _Connection(connection)

    def maintain(self) -> None:
        """Nothing: PostgreSQL's checkpointer and autovacuum do the upkeep."""

    def close(self) -> None:
        """Close the pool's connections; later calls fail."""
        self._pool.close()

    @contextmanager
    def _connection(self) -> Iterator[_Connection]:
        with _translated(), self._pool.connection(timeout=CONNECT_TIMEOUT) as connection:
            yield _Connection(connection)


def without_password(url: str) -> str:
    """`url` with its password replaced by `***`, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port is not None else "")
    return urlunsplit(parts._replace(netloc=netloc))


@functools.lru_cache(maxsize=256)
def _placeholders(sql: str) -> str:
    # The stores write `?` (sqlite3's style); psycopg takes `%s`, and a literal `%` must be doubled.
    return sql.replace("%", "%%").replace("?", "%s")


@contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except (psycopg.Error, PoolTimeout) as error:
        raise DatabaseError(_reason(error)) from None


def _reason(error: Exception) -> str:
    return " ".join(str(error).split()) or type(error).__name__
