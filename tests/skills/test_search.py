"""BM25F tool search: ranking by fields, task queries, and hiding tools the caller may not see."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from gateway.skills.search import SearchItem, ToolIndex, fuse, parameter_text

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


def test_a_word_in_the_name_outranks_the_same_word_in_a_long_description() -> None:
    index = ToolIndex(
        [
            SearchItem("notes__archive", "Move old notes away, keeping their titles, tags, owners and dates intact."),
            SearchItem("notes__tags", "List tags."),
        ]
    )
    assert [hit.name for hit in index.search("tags")] == ["notes__tags", "notes__archive"]


def test_parameter_and_server_words_find_a_tool_its_description_does_not_name() -> None:
    schema = {"type": "object", "properties": {"bmi": {"type": "number", "description": "body mass index"}}}
    index = ToolIndex(
        [
            SearchItem("health__calculate", "Compute a value.", parameters=parameter_text(schema)),
            SearchItem("trains__tickets", "Remaining seats.", server="railway", skills="timetable 12306 trains"),
            SearchItem("misc__other", "Something else entirely."),
        ]
    )
    assert index.search("body mass index")[0].name == "health__calculate"
    assert index.search("railway timetable")[0].name == "trains__tickets"


def test_field_weights_decide_which_field_counts_more() -> None:
    items = [SearchItem("a__convert", "Turn a file into a PDF."), SearchItem("b__pdf", "Make documents.")]
    names_first = ToolIndex(items, weights={"name": 5, "description": 1, "parameters": 0, "server": 0, "skills": 0})
    prose_first = ToolIndex(items, weights={"name": 0.1, "description": 5, "parameters": 0, "server": 0, "skills": 0})
    assert names_first.search("pdf")[0].name == "b__pdf"
    assert prose_first.search("pdf")[0].name == "a__convert"


def test_a_field_weighted_zero_matches_nothing() -> None:
    index = ToolIndex(
        [SearchItem("x__tool", "Plain.", skills="secret-words")],
        weights={"name": 1, "description": 1, "parameters": 1, "server": 1, "skills": 0},
    )
    assert index.search("secret words") == []


def test_punctuation_and_chaining_words_do_not_change_a_ranking() -> None:
    items = [
        SearchItem("word__create", "Create a word document with a heading and a first paragraph.", server="word"),
        SearchItem("word__add_picture", "Insert a picture into a word document.", server="word"),
        SearchItem("office__export", "Convert a file to PDF.", server="office"),
    ]
    items += [SearchItem(f"x{n}__tool", f"Unrelated thing {n}, music and maps.", server=f"x{n}") for n in range(36)]
    index = ToolIndex(items)
    plain = index.search("Create a word document with a picture and convert it to PDF")
    chained = index.search("Create a word document with a picture, then convert it to PDF.")
    assert [hit.name for hit in chained] == [hit.name for hit in plain]
    assert [hit.score for hit in chained] == sorted((hit.score for hit in chained), reverse=True)


def test_a_hidden_tool_never_appears_even_as_the_best_match(index: ToolIndex) -> None:
    hits = index.search("delete a file, then run python code", allowed=lambda name: name != "files__delete_file")
    assert "files__delete_file" not in [hit.name for hit in hits]
    assert hits[0].name == "python__run_python"


class _Synonyms:
    """A stand-in semantic ranker: knows that "sum" means arithmetic, as an embedding model would."""

    def __init__(self, items: Sequence[SearchItem]) -> None:
        self._items = items

    def prepare(self, queries: Sequence[str]) -> None:
        pass

    def rank(self, query: str, limit: int) -> tuple[Sequence[int], Sequence[float]]:
        wanted = "calc__evaluate" if "sum" in query else ""
        similarity = [3.0 if item.name == wanted else -0.1 for item in self._items]
        return [number for number, item in enumerate(self._items) if item.name == wanted][:limit], similarity


def test_a_semantic_ranker_is_fused_with_the_lexical_ranking() -> None:
    lexical = ToolIndex(CATALOG)
    hybrid = ToolIndex(CATALOG, semantic=_Synonyms(CATALOG))
    assert lexical.search("sum these") == []
    assert [hit.name for hit in hybrid.search("sum these")] == ["calc__evaluate"]
    assert hybrid.search("sum these", allowed=lambda name: name != "calc__evaluate") == []
    assert hybrid.search("read a file")[0].name == "files__read_file"


def test_fusion_weighs_standard_scores_so_that_meaning_lifts_a_tool_words_rank_low() -> None:
    # Words: tool 0 far ahead, tool 1 a little; meaning: tool 1 far ahead.
    lexical = {0: 9.0, 1: 1.0}
    similarity = [0.0, 3.0, 0.0, 0.0]
    by_words = fuse(lexical, [1], similarity, 0.2, 4)
    by_meaning = fuse(lexical, [1], similarity, 0.8, 4)
    assert by_words[0] > by_words[1]
    assert by_meaning[1] > by_meaning[0]
    assert set(by_meaning) == {0, 1}


def test_fusion_scores_a_tool_only_meaning_puts_forward_by_words_as_a_miss() -> None:
    fused = fuse({0: 2.0}, [3], [0.0, 0.0, 0.0, 1.0], 0.5, 4)
    mean, spread = 0.5, (4.0 / 4 - 0.25) ** 0.5
    assert fused[3] == pytest.approx(0.5 * (0 - mean) / spread + 0.5 * 1.0)


def test_a_word_many_tools_share_counts_less_than_the_rare_word_beside_it() -> None:
    # "save" is in the name of three tools in ten: without the discount, a tool named after it
    # outranks the one whose description holds the query's rare word.
    items = [SearchItem(f"store{n}__save", f"Save a record of kind {n}.") for n in range(3)]
    items += [SearchItem(f"misc{n}__tool{n}", f"Does thing number {n}.") for n in range(6)]
    items.append(SearchItem("charts__render", "Draw a histogram and store it to a file."))
    assert ToolIndex(items).search("save histogram")[0].name == "charts__render"
