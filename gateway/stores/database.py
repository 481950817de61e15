"""The seam under the gateway's durable stores: a small `Database` the audit trail, confirmation
tokens, parked approvals and API registrations are written through, whichever backend holds them.

SQL is written once with `?` parameters where the dialects agree (every query of the stores); a
backend rewrites the parameter style for its driver. Where they differ (column types, identity
columns) each backend has its own migration files (`gateway/stores/migrations/<dialect>/`).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol

from gateway.errors import GatewayError

Dialect = Literal["sqlite", "postgresql"]
Row = tuple[Any, ...]


class DatabaseError(GatewayError):
    """A store's database cannot be opened, read or written; the message is the driver's reason."""


class Queries(Protocol):
    """Statements with `?` parameters, each run as its own transaction unless inside `transaction()`."""

    def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        ...

    def execute_many(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        """Run one statement once for each of `rows`, in one transaction and, for PostgreSQL, one
        pipeline of round trips rather than one round trip a row."""
        ...

    def fetch_one(self, sql: str, params: Sequence[object] = ()) -> Row | None:
        """The first row of a query, or None."""
        ...

    def fetch_all(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """Every row of a query."""
        ...


class Database(Queries, Protocol):
    """One store's database. Safe to share between threads; every method may raise `DatabaseError`.

    A statement outside `transaction()` is committed when it returns, so a row survives the
    process being killed. `inline_writes` says a write is cheap enough (a local append, tens of
    microseconds) to run on the event loop instead of in a worker thread.
    """

    dialect: Dialect
    where: str
    """Where the data lives, for messages: a file's path, or a URL without its password."""
    inline_writes: bool

    def transaction(self) -> AbstractContextManager[Queries]:
        """A transaction that holds the write lock from its first statement (SQLite) or uses
        row locks (PostgreSQL); committed on leaving, rolled back on an exception."""
        ...

    def maintain(self) -> None:
        """Periodic upkeep the backend does not do itself (SQLite's WAL checkpoint); blocking."""
        ...

    def close(self) -> None:
        """Close the connections; later calls fail."""
        ...
