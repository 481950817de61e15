"""Tests for the SQLite server against real database files."""

import sqlite3
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

from servers.sqlite import Limits, build_server, main

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """A real SQLite file with one small table."""
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL DEFAULT 0)")
        connection.executemany("INSERT INTO items (name, price) VALUES (?, ?)", [("apple", 0.5), ("pear", 0.75)])
    connection.close()
    return path


def text_of(result: CallToolResult) -> str:
    """The first text block of a result."""
    return result.content[0].text  # type: ignore[union-attr]


def count_items(path: Path) -> int:
    """Rows in the items table, read directly from the file."""
    connection = sqlite3.connect(path)
    try:
        (count,) = connection.execute("SELECT count(*) FROM items").fetchone()
    finally:
        connection.close()
    return int(count)


@pytest.mark.anyio
async def test_query_returns_columns_rows_and_a_text_table(database: Path) -> None:
    async with Client(build_server(database)) as client:
        result = await client.call_tool(
            "query", {"sql": "SELECT name, price FROM items WHERE price > ?", "params": [0.6]}
        )
    assert not result.is_error
    assert result.structured_content == {
        "columns": ["name", "price"],
        "rows": [["pear", 0.75]],
        "row_count": 1,
        "truncated": False,
        "truncated_by": None,
    }
    assert text_of(result) == "name | price\npear | 0.75\n(1 row)"


@pytest.mark.anyio
async def test_query_accepts_named_parameters(database: Path) -> None:
    async with Client(build_server(database)) as client:
        result = await client.call_tool(
            "query", {"sql": "SELECT id FROM items WHERE name = :n", "params": {"n": "apple"}}
        )
    assert result.structured_content is not None
    assert result.structured_content["rows"] == [[1]]


@pytest.mark.anyio
async def test_rows_past_the_cap_are_cut_and_flagged(database: Path) -> None:
    async with Client(build_server(database, Limits(max_rows=3))) as client:
        result = await client.call_tool(
            "query", {"sql": "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT x FROM n LIMIT 10"}
        )
    assert result.structured_content is not None
    assert result.structured_content["rows"] == [[1], [2], [3]]
    assert result.structured_content["truncated"] is True
    assert result.structured_content["truncated_by"] == "rows"
    assert "truncated at the 3-row limit: more rows exist" in text_of(result)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO items (name) VALUES ('plum')",
        "DELETE FROM items",
        "DROP TABLE items",
        "UPDATE items SET price = 0",
        "CREATE TABLE other (x)",
    ],
)
async def test_query_cannot_write_and_the_data_stays_intact(database: Path, sql: str) -> None:
    async with Client(build_server(database)) as client:
        result = await client.call_tool("query", {"sql": sql})
        after = await client.call_tool("query", {"sql": "SELECT name FROM items ORDER BY id"})
    assert result.is_error
    assert "readonly" in text_of(result)
    assert after.structured_content is not None
    assert after.structured_content["rows"] == [["apple"], ["pear"]]
    assert count_items(database) == 2


COUNTING = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n"


@pytest.mark.anyio
async def test_rows_stop_once_the_byte_budget_is_spent_and_the_result_says_why(database: Path) -> None:
    async with Client(build_server(database, Limits(max_result_bytes=100))) as client:
        result = await client.call_tool("query", {"sql": f"{COUNTING} LIMIT 10) SELECT printf('%030d', x) FROM n"})
    assert not result.is_error
    assert result.structured_content is not None
    # Three 30-byte rows fit in 100 bytes; the fourth would not, and nothing after it is fetched.
    assert result.structured_content["rows"] == [[f"{x:030d}"] for x in (1, 2, 3)]
    assert result.structured_content["truncated_by"] == "bytes"
    assert "truncated at the 100-byte result limit" in text_of(result)
    assert "substr(column, 1, n)" in text_of(result)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT randomblob(300000000)",
        "SELECT zeroblob(2000)",
        "SELECT replace(hex(zeroblob(600)), '0', 'xy')",
        f"{COUNTING} LIMIT 1000) SELECT group_concat(x) FROM n",
        f"{COUNTING} LIMIT 200) SELECT x FROM n ORDER BY hex(zeroblob(x * 10))",
        "SELECT body FROM big",
    ],
)
async def test_a_value_past_the_value_limit_is_refused_with_how_to_narrow_the_query(database: Path, sql: str) -> None:
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE big (body TEXT)")
        connection.execute("INSERT INTO big VALUES (hex(zeroblob(2500)))")
    connection.close()
    async with Client(build_server(database, Limits(max_value_bytes=1000))) as client:
        result = await client.call_tool("query", {"sql": sql})
        after = await client.call_tool("query", {"sql": "SELECT count(*) FROM items"})
    assert result.is_error
    assert "exceeded the server's 1000-byte value limit" in text_of(result)
    assert "substr(column, 1, n)" in text_of(result)
    assert after.structured_content is not None and after.structured_content["rows"] == [[2]]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "sql"),
    [
        ("query", f"{COUNTING}) SELECT count(*) FROM n"),
        # Every step allocates the most a value may hold, and the handler still gets its turn.
        ("query", f"{COUNTING}) SELECT sum(length(randomblob(4000000))) FROM n"),
        # Past the value limit group_concat only records the error, so this would run forever.
        ("query", f"{COUNTING}) SELECT group_concat(x) FROM n"),
        ("query", f"{COUNTING}) SELECT x FROM n ORDER BY random()"),
        ("execute", f"INSERT INTO items (name) {COUNTING}) SELECT 'x' FROM n"),
    ],
)
async def test_a_statement_past_the_time_limit_is_stopped_with_a_clear_error(
    database: Path, tool: str, sql: str
) -> None:
    async with Client(build_server(database, Limits(time_limit=0.01))) as client:
        result = await client.call_tool(tool, {"sql": sql})
    assert result.is_error
    assert "ran past the server's 0.01 s time limit" in text_of(result)
    assert "LIMIT" in text_of(result)
    assert count_items(database) == 2


@pytest.mark.anyio
@pytest.mark.parametrize("tool", ["query", "execute"])
@pytest.mark.parametrize(
    # Values that would do no harm had they been set: the test process shares these settings.
    "pragma",
    ["hard_heap_limit = 1000000000000", "soft_heap_limit = 1000000000000", "temp_store_directory = '{tmp}'"],
)
async def test_sql_cannot_set_the_process_wide_limits(database: Path, tmp_path: Path, tool: str, pragma: str) -> None:
    async with Client(build_server(database)) as client:
        refused = await client.call_tool(tool, {"sql": f"PRAGMA {pragma.format(tmp=tmp_path)}"})
        read = await client.call_tool("query", {"sql": "PRAGMA hard_heap_limit"})
    assert refused.is_error
    assert "may read but not set these pragmas: hard_heap_limit, soft_heap_limit, temp_store_directory" in text_of(
        refused
    )
    assert not read.is_error


@pytest.mark.anyio
async def test_query_cannot_attach_other_files(database: Path, tmp_path: Path) -> None:
    async with Client(build_server(database)) as client:
        attach = await client.call_tool("execute", {"sql": f"ATTACH DATABASE '{tmp_path / 'x.db'}' AS x"})
        vacuum = await client.call_tool("execute", {"sql": f"VACUUM INTO '{tmp_path / 'copy.db'}'"})
    assert attach.is_error and vacuum.is_error
    assert not (tmp_path / "x.db").exists()
    assert not (tmp_path / "copy.db").exists()


@pytest.mark.anyio
async def test_execute_writes_and_reports_what_changed(database: Path) -> None:
    async with Client(build_server(database)) as client:
        inserted = await client.call_tool(
            "execute", {"sql": "INSERT INTO items (name, price) VALUES (?, ?)", "params": ["plum", 1.25]}
        )
        updated = await client.call_tool("execute", {"sql": "UPDATE items SET price = price * 2"})
    assert inserted.structured_content == {"rows_affected": 1, "last_insert_rowid": 3}
    assert updated.structured_content == {"rows_affected": 3, "last_insert_rowid": None}
    assert text_of(updated) == "3 row(s) affected"
    assert count_items(database) == 3


@pytest.mark.anyio
async def test_sqlite_errors_become_clear_tool_errors(database: Path) -> None:
    async with Client(build_server(database)) as client:
        missing = await client.call_tool("query", {"sql": "SELECT * FROM nowhere"})
        syntax = await client.call_tool("query", {"sql": "SELEC 1"})
        two = await client.call_tool("execute", {"sql": "DELETE FROM items; DELETE FROM items"})
        constraint = await client.call_tool("execute", {"sql": "INSERT INTO items (name) VALUES (NULL)"})
    assert missing.is_error and "no such table: nowhere" in text_of(missing)
    assert syntax.is_error and "syntax error" in text_of(syntax)
    assert two.is_error and "one statement" in text_of(two)
    assert constraint.is_error and "NOT NULL constraint failed" in text_of(constraint)
    assert "Traceback" not in text_of(constraint)
    assert count_items(database) == 2


@pytest.mark.anyio
async def test_list_and_describe_tables(database: Path) -> None:
    async with Client(build_server(database)) as client:
        tables = await client.call_tool("list_tables", {})
        described = await client.call_tool("describe_table", {"table": "items"})
        unknown = await client.call_tool("describe_table", {"table": "nope"})
    assert tables.structured_content == {"tables": [{"name": "items", "type": "table"}]}
    assert described.structured_content is not None
    assert described.structured_content["columns"] == [
        {"name": "id", "type": "INTEGER", "not_null": False, "default": None, "primary_key": True},
        {"name": "name", "type": "TEXT", "not_null": True, "default": None, "primary_key": False},
        {"name": "price", "type": "REAL", "not_null": False, "default": "0", "primary_key": False},
    ]
    assert "CREATE TABLE items" in text_of(described)
    assert unknown.is_error and "no table or view named 'nope'" in text_of(unknown)


@pytest.mark.anyio
async def test_a_missing_database_is_created_on_first_write_only(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    async with Client(build_server(path)) as client:
        tables = await client.call_tool("list_tables", {})
        read = await client.call_tool("query", {"sql": "SELECT 1"})
        assert not path.exists()
        created = await client.call_tool("execute", {"sql": "CREATE TABLE t (x)"})
    assert tables.structured_content == {"tables": []}
    assert read.is_error and "does not exist yet" in text_of(read)
    assert not created.is_error
    assert path.exists()


@pytest.mark.anyio
async def test_blobs_are_shown_as_hex_or_summarised(tmp_path: Path) -> None:
    async with Client(build_server(tmp_path / "b.db")) as client:
        await client.call_tool("execute", {"sql": "CREATE TABLE b (v BLOB)"})
        await client.call_tool("execute", {"sql": "INSERT INTO b VALUES (x'00ff'), (zeroblob(1000))"})
        result = await client.call_tool("query", {"sql": "SELECT v FROM b"})
    assert result.structured_content is not None
    assert result.structured_content["rows"] == [["x'00ff'"], ["<blob 1000 bytes>"]]


@pytest.mark.anyio
async def test_tools_carry_read_only_and_destructive_hints(database: Path) -> None:
    async with Client(build_server(database)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {"list_tables", "describe_table", "query", "execute"}
    for name in ("list_tables", "describe_table", "query"):
        annotations = tools[name].annotations
        assert annotations is not None and annotations.read_only_hint is True
    execute = tools["execute"].annotations
    assert execute is not None and execute.destructive_hint is True and execute.read_only_hint is False


@pytest.mark.anyio
async def test_sqlite_server_answers_over_stdio_as_a_subprocess(database: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "servers.sqlite", "--database", str(database)], cwd=REPO
    )
    with anyio.fail_after(30):
        async with Client(params) as client:
            result = await client.call_tool("query", {"sql": "SELECT count(*) AS n FROM items"})
    assert result.structured_content is not None
    assert result.structured_content["rows"] == [[2]]


@pytest.mark.anyio
async def test_the_heap_limit_holds_for_the_server_process_and_its_error_says_so(database: Path) -> None:
    limits = ["--heap-limit-bytes", str(8 * 2**20), "--max-value-bytes", str(2**20)]
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "servers.sqlite", "--database", str(database), *limits], cwd=REPO
    )
    with anyio.fail_after(30):
        async with Client(params) as client:
            # Twelve values of 1 MB each fit the value limit, but not together in an 8 MiB heap.
            big = await client.call_tool("query", {"sql": "SELECT " + ", ".join(["randomblob(1000000)"] * 12)})
            heap = await client.call_tool("query", {"sql": "PRAGMA hard_heap_limit"})
            after = await client.call_tool("query", {"sql": "SELECT count(*) FROM items"})
    assert big.is_error
    assert "needed more than the server's 8 MiB memory limit for SQLite" in text_of(big)
    assert "WHERE" in text_of(big)
    assert heap.structured_content is not None and heap.structured_content["rows"] == [[8 * 2**20]]
    assert after.structured_content is not None and after.structured_content["rows"] == [[2]]


def test_help_names_every_limit_with_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    defaults = Limits()
    for flag, default in [
        ("--max-rows", defaults.max_rows),
        ("--max-result-bytes", defaults.max_result_bytes),
        ("--max-value-bytes", defaults.max_value_bytes),
        ("--heap-limit-bytes", defaults.heap_bytes),
        ("--time-limit", defaults.time_limit),
    ]:
        assert flag in shown
        assert f"(default: {default})" in shown
