"""Tests for the file server: confinement to the root, size limits, and each tool."""

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

from servers.files import build_server

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A root with a file, a subdirectory, and a secret outside it."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("top secret")
    base = tmp_path / "root"
    (base / "docs").mkdir(parents=True)
    (base / "hello.txt").write_text("hello\nworld\n")
    (base / "docs" / "notes.md").write_text("# Notes\nremember the milk\n")
    return base


def text_of(result: CallToolResult) -> str:
    """The first text block of a result."""
    return result.content[0].text  # type: ignore[union-attr]


async def call(root: Path, tool: str, arguments: dict[str, object], **settings: int) -> CallToolResult:
    """Call one tool on an in-memory file server rooted at root."""
    with anyio.fail_after(5):
        async with Client(build_server(root, **settings)) as client:
            return await client.call_tool(tool, arguments)


@pytest.mark.anyio
async def test_list_directory_shows_entries_with_type_and_size(root: Path) -> None:
    result = await call(root, "list_directory", {})
    assert result.structured_content == {
        "path": ".",
        "entries": [
            {"name": "docs", "type": "directory", "size": None},
            {"name": "hello.txt", "type": "file", "size": 12},
        ],
        "truncated": False,
    }
    assert text_of(result) == "docs/\nhello.txt (12 bytes)"


@pytest.mark.anyio
async def test_read_file_returns_the_text_and_ranges(root: Path) -> None:
    whole = await call(root, "read_file", {"path": "docs/notes.md"})
    part = await call(root, "read_file", {"path": "hello.txt", "offset": 6, "limit": 3})
    assert text_of(whole) == "# Notes\nremember the milk\n"
    assert part.structured_content == {
        "path": "hello.txt",
        "content": "wor",
        "offset": 6,
        "bytes_read": 3,
        "file_size": 12,
        "more": True,
    }
    assert "continue with offset=9" in part.content[1].text  # type: ignore[union-attr]


@pytest.mark.anyio
@pytest.mark.parametrize("tool", ["read_file", "list_directory", "write_file", "delete_file"])
@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../outside/secret.txt", "'..' is not allowed"),
        ("docs/../../outside/secret.txt", "'..' is not allowed"),
        ("/etc/passwd", "absolute path '/etc/passwd' refused"),
    ],
)
async def test_path_outside_root_is_refused(root: Path, tool: str, path: str, reason: str) -> None:
    arguments: dict[str, object] = {"path": path}
    if tool == "write_file":
        arguments |= {"content": "x", "overwrite": True}
    result = await call(root, tool, arguments)
    assert result.is_error
    assert reason in text_of(result)
    assert (root.parent / "outside" / "secret.txt").read_text() == "top secret"


@pytest.mark.anyio
async def test_symlink_pointing_out_of_root_is_refused(root: Path) -> None:
    (root / "leak.txt").symlink_to(root.parent / "outside" / "secret.txt")
    read = await call(root, "read_file", {"path": "leak.txt"})
    write = await call(root, "write_file", {"path": "leak.txt", "content": "x", "overwrite": True})
    delete = await call(root, "delete_file", {"path": "leak.txt"})
    for result in (read, write, delete):
        assert result.is_error
        assert "'leak.txt' refused: it leads outside the root" in text_of(result)
    assert (root.parent / "outside" / "secret.txt").read_text() == "top secret"


@pytest.mark.anyio
async def test_symlinked_intermediate_directory_out_of_root_is_refused(root: Path) -> None:
    (root / "door").symlink_to(root.parent / "outside", target_is_directory=True)
    read = await call(root, "read_file", {"path": "door/secret.txt"})
    write = await call(root, "write_file", {"path": "door/new.txt", "content": "x"})
    moved = await call(root, "move_file", {"source": "hello.txt", "destination": "door/hello.txt"})
    listing = await call(root, "list_directory", {"path": "door"})
    for result in (read, write, moved, listing):
        assert result.is_error
        assert "leads outside the root" in text_of(result)
    assert sorted(os.listdir(root.parent / "outside")) == ["secret.txt"]


@pytest.mark.anyio
async def test_symlink_inside_root_is_followed(root: Path) -> None:
    (root / "alias.txt").symlink_to(root / "hello.txt")
    result = await call(root, "read_file", {"path": "alias.txt"})
    assert text_of(result) == "hello\nworld\n"


@pytest.mark.anyio
async def test_relative_symlinks_are_followed_inside_the_root_but_cannot_climb_out_of_it(root: Path) -> None:
    (root / "docs" / "up.txt").symlink_to("../hello.txt")
    (root / "docs" / "out.txt").symlink_to("../../outside/secret.txt")
    inside = await call(root, "read_file", {"path": "docs/up.txt"})
    out = await call(root, "read_file", {"path": "docs/out.txt"})
    assert inside.structured_content is not None
    assert (inside.structured_content["path"], text_of(inside)) == ("hello.txt", "hello\nworld\n")
    assert out.is_error and "'docs/out.txt' refused: it leads outside the root" in text_of(out)


@pytest.mark.anyio
async def test_a_symlink_loop_is_refused(root: Path) -> None:
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    result = await call(root, "read_file", {"path": "a"})
    assert result.is_error and "Too many levels of symbolic links: 'a'" in text_of(result)


@pytest.mark.anyio
async def test_a_fifo_is_neither_read_nor_searched_and_hangs_nothing(root: Path) -> None:
    os.mkfifo(root / "pipe")
    read = await call(root, "read_file", {"path": "pipe"})
    found = await call(root, "search_files", {"pattern": "*", "content": "x"})
    listing = await call(root, "list_directory", {})
    assert read.is_error and "'pipe' is not a file" in text_of(read)
    assert found.structured_content == {"matches": [], "truncated": False}
    assert listing.structured_content is not None
    assert {"name": "pipe", "type": "other", "size": None} in listing.structured_content["entries"]


@pytest.mark.anyio
async def test_an_os_error_names_the_path_and_never_echoes_the_content(root: Path) -> None:
    result = await call(root, "write_file", {"path": "hello.txt/inner.txt", "content": "private words"})
    assert result.is_error
    assert text_of(result).endswith("Not a directory: 'hello.txt/inner.txt'")


@pytest.mark.anyio
async def test_reading_a_missing_file_names_it(root: Path) -> None:
    result = await call(root, "read_file", {"path": "docs/nope.md"})
    assert result.is_error and "'docs/nope.md' does not exist" in text_of(result)


@pytest.mark.anyio
async def test_writing_through_a_symlink_inside_the_root_replaces_its_target(root: Path) -> None:
    (root / "alias.txt").symlink_to(root / "hello.txt")
    result = await call(root, "write_file", {"path": "alias.txt", "content": "new", "overwrite": True})
    assert result.structured_content == {"path": "hello.txt", "detail": "replaced (3 bytes)"}
    assert (root / "alias.txt").is_symlink()
    assert (root / "hello.txt").read_text() == "new"
    assert sorted(os.listdir(root)) == ["alias.txt", "docs", "hello.txt"]


@pytest.mark.anyio
async def test_reads_and_writes_past_the_size_limits_are_refused(root: Path) -> None:
    (root / "big.txt").write_text("x" * 100)
    read = await call(root, "read_file", {"path": "big.txt"}, max_read_bytes=50)
    ranged = await call(root, "read_file", {"path": "big.txt", "limit": 60}, max_read_bytes=50)
    in_parts = await call(root, "read_file", {"path": "big.txt", "offset": 60}, max_read_bytes=50)
    write = await call(root, "write_file", {"path": "new.txt", "content": "y" * 51}, max_write_bytes=50)
    assert read.is_error and "over the read limit of 50 bytes" in text_of(read)
    assert ranged.is_error and "over the read limit" in text_of(ranged)
    assert text_of(in_parts) == "x" * 40
    assert write.is_error and "over the write limit of 50 bytes" in text_of(write)
    assert not (root / "new.txt").exists()


@pytest.mark.anyio
async def test_binary_files_are_not_read_as_text(root: Path) -> None:
    (root / "blob.bin").write_bytes(b"\x00\x01\x02")
    result = await call(root, "read_file", {"path": "blob.bin"})
    assert result.is_error and "looks binary" in text_of(result)


@pytest.mark.anyio
async def test_write_file_creates_parents_and_only_overwrites_when_asked(root: Path) -> None:
    created = await call(root, "write_file", {"path": "a/b/c.txt", "content": "one"})
    refused = await call(root, "write_file", {"path": "a/b/c.txt", "content": "two"})
    replaced = await call(root, "write_file", {"path": "a/b/c.txt", "content": "three", "overwrite": True})
    assert created.structured_content == {"path": "a/b/c.txt", "detail": "created (3 bytes)"}
    assert refused.is_error and "already exists; pass overwrite=true" in text_of(refused)
    assert replaced.structured_content == {"path": "a/b/c.txt", "detail": "replaced (5 bytes)"}
    assert (root / "a" / "b" / "c.txt").read_text() == "three"
    assert sorted(os.listdir(root / "a" / "b")) == ["c.txt"]


# In a child process: a file size limit makes the write fail (EFBIG) the way a full disk would.
FAILING_WRITE = """
import resource, signal, sys
from pathlib import Path
from servers.files import Root
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4, 4))
try:
    Root(Path(sys.argv[1]), 1024, 1024).write_file("hello.txt", "far more than four bytes", True)
except OSError as error:
    print(error.strerror)
"""


def test_a_replacement_cut_short_keeps_the_old_file_and_no_temporary(root: Path) -> None:
    failed = subprocess.run(
        [sys.executable, "-c", FAILING_WRITE, str(root)], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert failed.stdout == "File too large\n", failed.stderr
    assert (root / "hello.txt").read_text() == "hello\nworld\n"
    assert sorted(os.listdir(root)) == ["docs", "hello.txt"]


@pytest.mark.anyio
async def test_move_file_renames_but_never_replaces(root: Path) -> None:
    moved = await call(root, "move_file", {"source": "hello.txt", "destination": "archive/hello.txt"})
    clash = await call(root, "move_file", {"source": "docs/notes.md", "destination": "archive/hello.txt"})
    missing = await call(root, "move_file", {"source": "nope.txt", "destination": "x.txt"})
    into_itself = await call(root, "move_file", {"source": "docs", "destination": "docs/inner"})
    assert not moved.is_error
    assert (root / "archive" / "hello.txt").read_text() == "hello\nworld\n"
    assert clash.is_error and "already exists" in text_of(clash)
    assert missing.is_error and "does not exist" in text_of(missing)
    assert into_itself.is_error and "into itself" in text_of(into_itself)
    assert (root / "docs" / "notes.md").exists()


@pytest.mark.anyio
async def test_delete_file_removes_files_but_not_full_directories_or_the_root(root: Path) -> None:
    deleted = await call(root, "delete_file", {"path": "hello.txt"})
    full = await call(root, "delete_file", {"path": "docs"})
    the_root = await call(root, "delete_file", {"path": "."})
    assert not deleted.is_error and not (root / "hello.txt").exists()
    assert full.is_error and "not empty" in text_of(full)
    assert the_root.is_error and "root itself" in text_of(the_root)
    assert (root / "docs" / "notes.md").exists()


@pytest.mark.anyio
async def test_deleting_a_symlink_inside_root_keeps_its_target(root: Path) -> None:
    (root / "alias.txt").symlink_to(root / "hello.txt")
    result = await call(root, "delete_file", {"path": "alias.txt"})
    assert not result.is_error
    assert not (root / "alias.txt").is_symlink()
    assert (root / "hello.txt").read_text() == "hello\nworld\n"


@pytest.mark.anyio
async def test_search_files_matches_names_and_content(root: Path) -> None:
    by_name = await call(root, "search_files", {"pattern": "*.md"})
    by_content = await call(root, "search_files", {"pattern": "*", "content": "milk"})
    by_path = await call(root, "search_files", {"pattern": "docs/*"})
    assert by_name.structured_content == {
        "matches": [{"path": "docs/notes.md", "line": None, "text": None}],
        "truncated": False,
    }
    assert text_of(by_content) == "docs/notes.md:2: remember the milk"
    assert text_of(by_path) == "docs/notes.md"


@pytest.mark.anyio
async def test_search_results_are_bounded(root: Path) -> None:
    for number in range(250):
        (root / f"f{number:03}.log").write_text("")
    result = await call(root, "search_files", {"pattern": "*.log"})
    assert result.structured_content is not None
    assert len(result.structured_content["matches"]) == 200
    assert result.structured_content["truncated"] is True


@pytest.mark.anyio
async def test_search_does_not_follow_symlinks_out_of_root(root: Path) -> None:
    (root / "door").symlink_to(root.parent / "outside", target_is_directory=True)
    result = await call(root, "search_files", {"pattern": "*", "content": "secret"})
    assert result.structured_content == {"matches": [], "truncated": False}


def test_missing_root_is_created(tmp_path: Path) -> None:
    build_server(tmp_path / "fresh" / "root")
    assert (tmp_path / "fresh" / "root").is_dir()


@pytest.mark.anyio
async def test_read_tools_are_read_only_and_write_tools_destructive(root: Path) -> None:
    async with Client(build_server(root)) as client:
        tools = {tool.name: tool.annotations for tool in (await client.list_tools()).tools}
    assert set(tools) == {"list_directory", "read_file", "search_files", "write_file", "move_file", "delete_file"}
    for name in ("list_directory", "read_file", "search_files"):
        reading = tools[name]
        assert reading is not None and reading.read_only_hint is True
    for name in ("write_file", "move_file", "delete_file"):
        annotations = tools[name]
        assert annotations is not None and annotations.destructive_hint is True
        assert annotations.read_only_hint is False


@pytest.mark.anyio
async def test_files_server_answers_over_stdio_as_a_subprocess(root: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "servers.files", "--root", str(root)], cwd=REPO)
    with anyio.fail_after(30):
        async with Client(params) as client:
            result = await client.call_tool("read_file", {"path": "hello.txt"})
    assert text_of(result) == "hello\nworld\n"
