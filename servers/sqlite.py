"""An MCP server for one SQLite database: read-only queries, separate writes, capped results."""

from __future__ import annotations

import argparse
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

DEFAULT_MAX_ROWS = 500
BUSY_TIMEOUT_SECONDS = 5.0
# A statement still running after this long is interrupted, so one query cannot wedge the server.
STATEMENT_TIME_LIMIT_SECONDS = 30.0
PROGRESS_CHECK_INSTRUCTIONS = 10_000
MAX_BLOB_HEX_BYTES = 64

Scalar = str | int | float | bool | None
Params = list[Scalar] | dict[str, Scalar] | None
Cell = str | int | float | None
Sql = Annotated[str, Field(description="one SQL statement")]
SqlParams = Annotated[Params, Field(description="values for ? placeholders (a list) or :name placeholders (an object)")]


class Table(TypedDict):
    """A table or view."""

    name: str
    type: str


class Tables(TypedDict):
    """Every user table and view in the database."""

    tables: list[Table]


class Column(TypedDict):
    """One column of a table."""

    name: str
    type: str
    not_null: bool
    default: str | None
    primary_key: bool


class TableDescription(TypedDict):
    """A table's columns and the statement that created it."""

    table: str
    columns: list[Column]
    sql: str | None


class QueryResult(TypedDict):
    """Rows a query returned, capped at the server's max_rows."""

    columns: list[str]
    rows: list[list[Cell]]
    row_count: int
    truncated: bool


class ExecuteResult(TypedDict):
    """What a write statement changed."""

    rows_affected: int
    last_insert_rowid: int | None


def _cell(value: Any) -> Cell:
    """A JSON-friendly cell: short blobs as an x'..' literal, long ones summarised."""
    if isinstance(value, bytes):
        if len(value) <= MAX_BLOB_HEX_BYTES:
            return f"x'{value.hex()}'"
        return f"<blob {len(value)} bytes>"
    cell: Cell = value
    return cell


def render_rows(result: QueryResult) -> str:
    """A compact text table of a query result."""
    if not result["columns"]:
        return "statement returned no columns"
    lines = [" | ".join(result["columns"])]
    lines += [" | ".join("NULL" if cell is None else str(cell) for cell in row) for row in result["rows"]]
    summary = f"({result['row_count']} row{'s' if result['row_count'] != 1 else ''}"
    summary += ", truncated: more rows exist)" if result["truncated"] else ")"
    return "\n".join([*lines, summary])


class Database:
    """Opens a short-lived connection per call: read-only for queries, read-write for execute."""

    def __init__(self, path: Path, max_rows: int) -> None:
        self.path = path.resolve()
        self.max_rows = max_rows

    @contextmanager
    def connect(self, *, read_only: bool) -> Iterator[sqlite3.Connection]:
        """A connection with busy timeout, no ATTACH, and a time limit per statement; errors become ToolErrors."""
        if read_only and not self.path.exists():
            raise ToolError(f"database {str(self.path)!r} does not exist yet; create tables with execute")
        try:
            with closing(self._open(read_only)) as connection:
                yield connection
        except sqlite3.Error as exc:
            if isinstance(exc, sqlite3.OperationalError) and str(exc) == "interrupted":
                raise ToolError(f"statement interrupted after {STATEMENT_TIME_LIMIT_SECONDS:g} s") from exc
            raise ToolError(f"SQLite error: {exc}") from exc

    def _open(self, read_only: bool) -> sqlite3.Connection:
        """Open the file in autocommit mode, so each statement is its own transaction."""
        if read_only:
            # mode=ro makes SQLite itself refuse writes; query_only also covers anything opened later.
            uri = f"file:{urllib.parse.quote(str(self.path))}?mode=ro"
            connection = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
            connection.execute("PRAGMA query_only = ON")
        else:
            # The first write creates the database, and with it the directory it lives in.
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
        # ATTACH (and VACUUM INTO, which uses it) could read or create files anywhere on disk.
        connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        deadline = time.monotonic() + STATEMENT_TIME_LIMIT_SECONDS
        connection.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_CHECK_INSTRUCTIONS)
        return connection

    def list_tables(self) -> Tables:
        """User tables and views, by name."""
        if not self.path.exists():
            return {"tables": []}
        with self.connect(read_only=True) as connection:
            found = connection.execute(
                "SELECT name, type FROM sqlite_schema "
                "WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name"
            ).fetchall()
        return {"tables": [{"name": name, "type": kind} for name, kind in found]}

    def describe_table(self, table: str) -> TableDescription:
        """Columns and CREATE statement of a table or view."""
        with self.connect(read_only=True) as connection:
            created = connection.execute(
                "SELECT sql FROM sqlite_schema WHERE type IN ('table', 'view') AND name = ?", (table,)
            ).fetchone()
            if created is None:
                raise ToolError(f"no table or view named {table!r}; see list_tables")
            # The table-valued pragma takes the name as a bound parameter, so no quoting is needed.
            info = connection.execute(
                'SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(?)', (table,)
            ).fetchall()
        columns: list[Column] = [
            {"name": name, "type": kind, "not_null": bool(not_null), "default": default, "primary_key": pk > 0}
            for name, kind, not_null, default, pk in info
        ]
        return {"table": table, "columns": columns, "sql": created[0]}

    def query(self, sql: str, params: Params) -> QueryResult:
        """Run a statement on a read-only connection and return at most max_rows rows."""
        with self.connect(read_only=True) as connection:
            cursor = connection.execute(sql, params or ())
            fetched = cursor.fetchmany(self.max_rows + 1)
            columns = [d[0] for d in cursor.description or ()]
        rows = [[_cell(value) for value in row] for row in fetched[: self.max_rows]]
        return {"columns": columns, "rows": rows, "row_count": len(rows), "truncated": len(fetched) > self.max_rows}

    def execute(self, sql: str, params: Params) -> ExecuteResult:
        """Run one write statement in its own transaction (the file is created if missing)."""
        with self.connect(read_only=False) as connection:
            cursor = connection.execute(sql, params or ())
            # Stepping to the end makes every change of a RETURNING statement count.
            cursor.fetchall()
            rowid = cursor.lastrowid
        return {"rows_affected": max(cursor.rowcount, 0), "last_insert_rowid": rowid or None}


def build_server(database: Path | str, max_rows: int = DEFAULT_MAX_ROWS) -> MCPServer:
    """Build a server for one SQLite database file."""
    db = Database(Path(database), max_rows)
    server = MCPServer(
        "sqlite",
        instructions=(
            "One SQLite database. Look with list_tables and describe_table, read with query "
            "(read-only), change with execute. Use ? or :name placeholders with params."
        ),
    )
    reading = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

    @server.tool(annotations=reading)
    def list_tables() -> Annotated[CallToolResult, Tables]:
        """List the database's tables and views."""
        tables = db.list_tables()
        text = "\n".join(f"{t['name']} ({t['type']})" for t in tables["tables"]) or "no tables"
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=dict(tables))

    @server.tool(annotations=reading)
    def describe_table(table: str) -> Annotated[CallToolResult, TableDescription]:
        """Show a table's columns (name, type, NOT NULL, default, primary key) and CREATE statement."""
        description = db.describe_table(table)
        text = description["sql"] or "\n".join(f"{c['name']} {c['type']}" for c in description["columns"])
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=dict(description))

    @server.tool(annotations=reading)
    def query(sql: Sql, params: SqlParams = None) -> Annotated[CallToolResult, QueryResult]:
        """Run a read-only statement (SELECT, read-only PRAGMA...) and return its rows; writes are refused."""
        result = db.query(sql, params)
        return CallToolResult(
            content=[TextContent(type="text", text=render_rows(result))], structured_content=dict(result)
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False))
    def execute(sql: Sql, params: SqlParams = None) -> Annotated[CallToolResult, ExecuteResult]:
        """Run one statement that changes the database (INSERT, UPDATE, DELETE, CREATE, DROP...)."""
        result = db.execute(sql, params)
        text = f"{result['rows_affected']} row(s) affected"
        if result["last_insert_rowid"] is not None:
            text += f", last insert rowid {result['last_insert_rowid']}"
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=dict(result))

    return server


def main(argv: list[str] | None = None) -> None:
    """Run the SQLite server over stdio."""
    parser = argparse.ArgumentParser(prog="python -m servers.sqlite", description=__doc__)
    parser.add_argument("--database", required=True, type=Path, help="SQLite file (created on first write)")
    parser.add_argument("--max-rows", type=int, default=DEFAULT_MAX_ROWS, help="most rows a query returns")
    args = parser.parse_args(argv)
    build_server(args.database, args.max_rows).run("stdio")


if __name__ == "__main__":
    main()
