"""An MCP server for one SQLite database: read-only queries, separate writes, bounded calls.

Every call is bounded, so no query can exhaust the host (defaults, each a command-line flag):

- rows: a query returns at most 500 rows (--max-rows);
- bytes: it stops fetching once its cells reach 256 KiB (--max-result-bytes); both cuts are flagged;
- values: one string, blob or row is at most 4 MiB (--max-value-bytes, SQLITE_LIMIT_LENGTH);
- memory: SQLite's heap is capped at 32 MiB for the whole process (--heap-limit-bytes,
  hard_heap_limit; soft_heap_limit at half of it), temporary tables and sorts spill to files
  with a 2 MiB page cache, and SQL cannot change those process-wide settings;
- time: a statement still running after 30 s is stopped (--time-limit, a progress handler).

With these the server process stays under about 150 MB: about 70 MB of Python and the SDK, the
SQLite heap, and one row's copy in Python.
"""

from __future__ import annotations

import argparse
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

BUSY_TIMEOUT_SECONDS = 5.0
# Checked this often, a statement whose every step allocates up to the value limit overruns its
# time limit by well under a second.
PROGRESS_CHECK_INSTRUCTIONS = 1_000
PAGE_CACHE_KIB = 2_048
MAX_BLOB_HEX_BYTES = 64
# These pragmas change the whole process, not the call's own connection: SQL may read them, never set them.
PROCESS_WIDE_PRAGMAS = frozenset({"hard_heap_limit", "soft_heap_limit", "temp_store_directory"})


@dataclass(frozen=True)
class Limits:
    """What one call may cost; the heap limit holds for the whole process (see `limit_heap`)."""

    max_rows: int = 500
    max_result_bytes: int = 256 * 1024
    max_value_bytes: int = 4 * 1024 * 1024
    heap_bytes: int = 32 * 1024 * 1024
    time_limit: float = 30.0


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
    """Rows a query returned, cut at the server's row or byte limit."""

    columns: list[str]
    rows: list[list[Cell]]
    row_count: int
    truncated: bool
    truncated_by: Literal["rows", "bytes"] | None


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


def _text(cell: Cell) -> str:
    """A cell as the text table shows it."""
    return "NULL" if cell is None else str(cell)


def render_rows(result: QueryResult, limits: Limits) -> str:
    """A compact text table of a query result, saying why it was cut if it was."""
    if not result["columns"]:
        return "statement returned no columns"
    lines = [" | ".join(result["columns"])]
    lines += [" | ".join(_text(cell) for cell in row) for row in result["rows"]]
    summary = f"({result['row_count']} row{'s' if result['row_count'] != 1 else ''}"
    if result["truncated_by"] == "rows":
        summary += (
            f", truncated at the {limits.max_rows}-row limit: more rows exist;"
            " narrow the query with WHERE, or page with LIMIT and OFFSET)"
        )
    elif result["truncated_by"] == "bytes":
        summary += (
            f", truncated at the {limits.max_result_bytes}-byte result limit: select fewer columns,"
            " cut long values with substr(column, 1, n), or page with LIMIT and OFFSET)"
        )
    else:
        summary += ")"
    return "\n".join([*lines, summary])


def _authorize(action: int, name: str | None, value: str | None, _db: str | None, _source: str | None) -> int:
    """Let SQL read, but never set, the pragmas whose setting holds for the whole process."""
    if action == sqlite3.SQLITE_PRAGMA and value is not None and (name or "").lower() in PROCESS_WIDE_PRAGMAS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def limit_heap(heap_bytes: int) -> None:
    """Cap SQLite's heap for this whole process; the soft limit at half makes caches give memory back first."""
    with closing(sqlite3.connect(":memory:")) as connection:
        connection.execute(f"PRAGMA hard_heap_limit = {heap_bytes}")
        connection.execute(f"PRAGMA soft_heap_limit = {heap_bytes // 2}")


class Database:
    """Opens a short-lived connection per call: read-only for queries, read-write for execute."""

    def __init__(self, path: Path, limits: Limits) -> None:
        self.path = path.resolve()
        self.limits = limits

    @contextmanager
    def connect(self, *, read_only: bool) -> Iterator[sqlite3.Connection]:
        """A connection bounded by the server's limits; errors become ToolErrors that say which limit was hit."""
        if read_only and not self.path.exists():
            raise ToolError(f"database {str(self.path)!r} does not exist yet; create tables with execute")
        try:
            with closing(self._open(read_only)) as connection:
                yield connection
        except MemoryError as exc:
            # SQLite reports its heap limit as out of memory, which Python raises as MemoryError.
            raise ToolError(
                f"statement stopped: it needed more than the server's {self.limits.heap_bytes // 2**20} MiB memory"
                " limit for SQLite. Narrow it: filter with WHERE, add LIMIT, select fewer columns, and avoid"
                " sorting, grouping or building large strings over large generated sets"
            ) from exc
        except sqlite3.Error as exc:
            raise ToolError(self._explain(exc)) from exc

    def _explain(self, exc: sqlite3.Error) -> str:
        """What the model sees for a SQLite error: which limit was hit and how to narrow the statement."""
        message = str(exc)
        if message == "interrupted":
            return (
                f"statement stopped: it ran past the server's {self.limits.time_limit:g} s time limit."
                " Narrow it: filter with WHERE on an indexed column, add LIMIT, and bound recursive CTEs"
            )
        if message == "string or blob too big":
            return (
                f"statement stopped: a string, blob or row exceeded the server's {self.limits.max_value_bytes}-byte"
                " value limit. Narrow it: select shorter values (substr(column, 1, n)), and do not build large"
                " values with group_concat, ||, replace, zeroblob or randomblob"
            )
        if message == "not authorized":
            return (
                f"statement refused: SQL may read but not set these pragmas: {', '.join(sorted(PROCESS_WIDE_PRAGMAS))}"
            )
        return f"SQLite error: {message}"

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
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self.limits.max_value_bytes)
        # Sorts, DISTINCT and recursive CTEs spill to temporary files past a small cache instead of growing the heap.
        connection.execute("PRAGMA temp_store = FILE")
        connection.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")
        connection.set_authorizer(_authorize)
        # Each call runs one statement on its own connection, so this deadline is the statement's.
        deadline = time.monotonic() + self.limits.time_limit
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
        """Run a statement on a read-only connection; fetch rows until the row or byte limit is reached."""
        rows: list[list[Cell]] = []
        size = 0
        truncated_by: Literal["rows", "bytes"] | None = None
        with self.connect(read_only=True) as connection:
            cursor = connection.execute(sql, params or ())
            columns = [d[0] for d in cursor.description or ()]
            # One row at a time, so rows past a limit are never fetched, let alone held.
            for row in cursor:
                if len(rows) == self.limits.max_rows:
                    truncated_by = "rows"
                    break
                cells = [_cell(value) for value in row]
                size += sum(len(_text(cell).encode()) for cell in cells)
                if size > self.limits.max_result_bytes:
                    truncated_by = "bytes"
                    break
                rows.append(cells)
        return {
            "columns": columns,
            "rows": rows,
            "row_count": len(rows),
            "truncated": truncated_by is not None,
            "truncated_by": truncated_by,
        }

    def execute(self, sql: str, params: Params) -> ExecuteResult:
        """Run one write statement in its own transaction (the file is created if missing)."""
        with self.connect(read_only=False) as connection:
            cursor = connection.execute(sql, params or ())
            # Stepping to the end makes every change of a RETURNING statement count; the rows are dropped as they come.
            for _ in cursor:
                pass
            rowid = cursor.lastrowid
        return {"rows_affected": max(cursor.rowcount, 0), "last_insert_rowid": rowid or None}


def build_server(database: Path | str, limits: Limits = Limits()) -> MCPServer:
    """Build a server for one SQLite database file; the process-wide heap limit is `limit_heap`'s to set."""
    db = Database(Path(database), limits)
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
            content=[TextContent(type="text", text=render_rows(result, limits))], structured_content=dict(result)
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
    defaults = Limits()
    parser = argparse.ArgumentParser(
        prog="python -m servers.sqlite",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--database", required=True, type=Path, help="SQLite file (created on first write)")
    parser.add_argument(
        "--max-rows", type=int, default=defaults.max_rows, help="most rows a query returns (default: %(default)s)"
    )
    parser.add_argument(
        "--max-result-bytes",
        type=int,
        default=defaults.max_result_bytes,
        help="most bytes of cells a query returns; fetching stops there (default: %(default)s)",
    )
    parser.add_argument(
        "--max-value-bytes",
        type=int,
        default=defaults.max_value_bytes,
        help="largest string, blob or row SQLite may build or read (default: %(default)s)",
    )
    parser.add_argument(
        "--heap-limit-bytes",
        type=int,
        default=defaults.heap_bytes,
        help="SQLite's heap limit for the whole process (default: %(default)s)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=defaults.time_limit,
        help="seconds a statement may run before it is stopped (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    limits = Limits(args.max_rows, args.max_result_bytes, args.max_value_bytes, args.heap_limit_bytes, args.time_limit)
    # SQLite reads a zero or negative limit as no limit at all.
    if min(limits.max_rows, limits.max_result_bytes, limits.max_value_bytes, limits.heap_bytes, limits.time_limit) <= 0:
        parser.error("every limit must be positive")
    limit_heap(limits.heap_bytes)
    build_server(args.database, limits).run("stdio")


if __name__ == "__main__":
    main()
