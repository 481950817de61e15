"""BM25 tool search: tokenising, ranking, and hiding tools the caller may not see."""

from __future__ import annotations

import pytest

from gateway.skills.search import SearchItem, ToolIndex, tokenize

CATALOG = [
    SearchItem("files__list_directory", "List the entries of a directory.", "file-organisation"),
    SearchItem("files__read_file", "Read the contents of a text file.", "file-organisation"),
    SearchItem("files__search_files", "Find files whose names match a glob pattern.", "file-organisation"),
    SearchItem("files__write_file", "Create or overwrite a file with the given text.", "file-organisation"),
    SearchItem("files__move_file", "Move or rename a file or directory.", "file-organisation"),
    SearchItem("files__delete_file", "Delete a file.", "file-organisation"),
    SearchItem("sqlite__list_tables", "List the tables of the database.", "data-analysis"),
    SearchItem("sqlite__describe_table", "Show the columns and types of a table.", "data-analysis"),
    SearchItem("sqlite__query", "Run a read-only SQL SELECT and return the rows.", "data-analysis"),
    SearchItem("sqlite__execute", "Run an SQL statement that changes the database.", "data-analysis"),
    SearchItem("calc__evaluate", "Evaluate an arithmetic expression exactly.", "quick-math data-analysis"),
    SearchItem("python__run_python", "Run Python code in a sandbox and return its output.", "data-analysis"),
]


@pytest.fixture(scope="module")
def index() -> ToolIndex:
    return ToolIndex(CATALOG)


def test_tokenize_splits_names_camel_case_and_punctuation() -> None:
    assert tokenize("files__read_file") == ["file", "read", "file"]
    assert tokenize("getHTTPResponse-code") == ["get", "http", "response", "code"]
    assert tokenize("What is the SQL, please?") == ["sql", "please"]
    assert tokenize("list tables; process glass") == ["list", "table", "process", "glass"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("read a file", "files__read_file"),
        ("rename a file", "files__move_file"),
        ("which tables are in the database", "sqlite__list_tables"),
        ("columns of a table", "sqlite__describe_table"),
        ("SQL select rows", "sqlite__query"),
        ("compute an arithmetic expression", "calc__evaluate"),
        ("run python code", "python__run_python"),
        ("delete", "files__delete_file"),
        ("listDirectory", "files__list_directory"),
    ],
)
def test_obvious_tool_ranks_first(index: ToolIndex, query: str, expected: str) -> None:
    hits = index.search(query)
    assert hits[0].name == expected
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)


def test_extra_text_such_as_skill_names_is_searchable(index: ToolIndex) -> None:
    names = {hit.name for hit in index.search("quick math")}
    assert names == {"calc__evaluate"}


def test_limit_truncates_after_ranking(index: ToolIndex) -> None:
    everything = index.search("file")
    assert len(everything) > 3
    assert index.search("file", limit=3) == everything[:3]
    assert index.search("file", limit=0) == []


def test_allowed_hides_tools_before_ranking_and_truncation(index: ToolIndex) -> None:
    def read_only(name: str) -> bool:
        return name not in {"files__write_file", "files__delete_file", "files__move_file"}

    hits = index.search("file", limit=3, allowed=read_only)
    assert len(hits) == 3
    assert all(read_only(hit.name) for hit in hits)
    assert index.search("delete a file", allowed=lambda name: not name.startswith("files__")) == []


def test_allowed_is_asked_once_per_tool(index: ToolIndex) -> None:
    # A counting predicate shows the index does not re-ask for a tool matching several terms.
    asked: list[str] = []

    def allowed(name: str) -> bool:
        asked.append(name)
        return True

    index.search("read file directory", allowed=allowed)
    assert len(asked) == len(set(asked))


@pytest.mark.parametrize("query", ["", "   ", "the of and", "zebra quantum"])
def test_empty_or_unmatched_query_returns_nothing(index: ToolIndex, query: str) -> None:
    assert index.search(query) == []


def test_empty_index_returns_nothing() -> None:
    assert ToolIndex([]).search("anything") == []
