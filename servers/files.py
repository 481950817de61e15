"""An MCP file server confined to one root directory, with size limits on reads and writes."""

from __future__ import annotations

import argparse
import fnmatch
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Annotated, Any, Literal, TypedDict, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

MIB = 1024 * 1024
MAX_LIST_ENTRIES = 1000
MAX_SEARCH_RESULTS = 200
MAX_SEARCH_VISITS = 20_000
MAX_MATCH_LINE_CHARS = 200

EntryType = Literal["file", "directory", "symlink", "other"]
T = TypeVar("T")


class Entry(TypedDict):
    """One directory entry."""

    name: str
    type: EntryType
    size: int | None


class Listing(TypedDict):
    """A directory's entries, sorted by name."""

    path: str
    entries: list[Entry]
    truncated: bool


class FileChunk(TypedDict):
    """A range of a text file."""

    path: str
    content: str
    offset: int
    bytes_read: int
    file_size: int
    more: bool


class Match(TypedDict):
    """A file whose name matched, with the matching line when searching content."""

    path: str
    line: int | None
    text: str | None


class SearchResult(TypedDict):
    """Files matching a search, capped at MAX_SEARCH_RESULTS."""

    matches: list[Match]
    truncated: bool


class Change(TypedDict):
    """What a write, move or delete did."""

    path: str
    detail: str


def _result(text: str, structured: Any) -> CallToolResult:
    """A tool result with a short text rendering beside the structured content."""
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=dict(structured))


def _guard(call: Callable[..., T], *args: object) -> T:
    """Run a root operation, turning OS errors into tool errors that name the problem and the paths."""
    try:
        return call(*args)
    except OSError as exc:
        paths = ", ".join(repr(a) for a in args if isinstance(a, str))
        raise ToolError(f"{exc.strerror or exc}: {paths}") from exc


def _entry_type(mode: int) -> EntryType:
    """Classify a file mode without following symlinks."""
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "directory"
    return "file" if stat.S_ISREG(mode) else "other"


class Root:
    """A directory tree the tools may touch; every path is checked against it before use."""

    def __init__(self, root: Path, max_read_bytes: int, max_write_bytes: int) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.path = root.resolve(strict=True)
        self.max_read_bytes = max_read_bytes
        self.max_write_bytes = max_write_bytes

    def resolve(self, path: str) -> Path:
        """The real location of a relative path, refused unless it stays inside the root."""
        if "\0" in path:
            raise ToolError(f"path {path!r} contains a NUL byte")
        if PurePosixPath(path).is_absolute() or PureWindowsPath(path).anchor:
            raise ToolError(f"absolute path {path!r} refused: paths are relative to the root")
        if ".." in PurePosixPath(path.replace("\\", "/")).parts:
            raise ToolError(f"path {path!r} refused: '..' is not allowed")
        # resolve() follows every symlink, in intermediate directories too, so the check sees the real target.
        real = (self.path / path).resolve()
        if real != self.path and self.path not in real.parents:
            raise ToolError(f"path {path!r} refused: it leads outside the root through a symbolic link")
        return real

    def entry(self, path: str) -> Path:
        """The directory entry itself (a symlink stays a link), for moving and deleting."""
        self.resolve(path)
        relative = PurePosixPath(path.replace("\\", "/"))
        if relative.name in ("", "."):
            raise ToolError(f"path {path!r} refused: the root itself cannot be moved or deleted")
        return self.resolve(str(relative.parent)) / relative.name

    def relative(self, real: Path) -> str:
        """The root-relative name shown to clients."""
        return PurePath(os.path.relpath(real, self.path)).as_posix()

    def list_directory(self, path: str) -> Listing:
        """Entries of a directory inside the root."""
        directory = self.resolve(path)
        if not directory.is_dir():
            raise ToolError(f"{path!r} is not a directory")
        entries: list[Entry] = []
        with os.scandir(directory) as scan:
            for item in sorted(scan, key=lambda e: e.name):
                info = item.stat(follow_symlinks=False)
                kind = _entry_type(info.st_mode)
                size = info.st_size if kind == "file" else None
                entries.append({"name": item.name, "type": kind, "size": size})
        truncated = len(entries) > MAX_LIST_ENTRIES
        return {"path": self.relative(directory), "entries": entries[:MAX_LIST_ENTRIES], "truncated": truncated}

    def read_file(self, path: str, offset: int, limit: int | None) -> FileChunk:
        """A byte range of a UTF-8 text file, refusing reads past the size limit."""
        real = self.resolve(path)
        if not real.is_file():
            raise ToolError(f"{path!r} is not a file")
        size = real.stat().st_size
        if limit is not None and limit > self.max_read_bytes:
            raise ToolError(f"limit {limit} is over the read limit of {self.max_read_bytes} bytes")
        if limit is None and size - offset > self.max_read_bytes:
            raise ToolError(
                f"{path!r} is {size} bytes, over the read limit of {self.max_read_bytes} bytes; "
                "read it in parts with offset and limit"
            )
        with real.open("rb") as handle:
            handle.seek(offset)
            data = handle.read(self.max_read_bytes if limit is None else limit)
        if b"\0" in data:
            raise ToolError(f"{path!r} looks binary (it contains NUL bytes); only text files can be read")
        return {
            "path": self.relative(real),
            # Replacement characters only appear where a range cuts a multi-byte character.
            "content": data.decode("utf-8", errors="replace"),
            "offset": offset,
            "bytes_read": len(data),
            "file_size": size,
            "more": offset + len(data) < size,
        }

    def search(self, pattern: str, path: str, content: str | None) -> SearchResult:
        """Files under a directory whose name matches a glob, optionally containing a substring."""
        start = self.resolve(path)
        if not start.is_dir():
            raise ToolError(f"{path!r} is not a directory")
        matches: list[Match] = []
        visits = 0
        # Symlinked directories are not followed, so the walk never leaves the root.
        for directory, dirnames, filenames in os.walk(start):
            dirnames.sort()
            for name in sorted(filenames):
                visits += 1
                if visits > MAX_SEARCH_VISITS or len(matches) >= MAX_SEARCH_RESULTS:
                    return {"matches": matches, "truncated": True}
                real = Path(directory, name)
                shown = self.relative(real)
                if not fnmatch.fnmatchcase(shown if "/" in pattern else name, pattern):
                    continue
                if content is None:
                    matches.append({"path": shown, "line": None, "text": None})
                else:
                    limit = MAX_SEARCH_RESULTS - len(matches)
                    matches.extend(self._grep(real, shown, content)[:limit])
        return {"matches": matches, "truncated": False}

    def _grep(self, real: Path, shown: str, needle: str) -> list[Match]:
        """Lines of a regular text file (within the read limit) that contain the needle."""
        info = real.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > self.max_read_bytes:
            return []
        try:
            data = real.read_bytes()
        except OSError:
            return []
        if b"\0" in data:
            return []
        lines = data.decode("utf-8", errors="replace").splitlines()
        return [
            {"path": shown, "line": number, "text": line[:MAX_MATCH_LINE_CHARS]}
            for number, line in enumerate(lines, start=1)
            if needle in line
        ]

    def write_file(self, path: str, content: str, overwrite: bool) -> Change:
        """Create or replace a text file; a replacement is atomic, so a failure keeps the old file."""
        data = content.encode("utf-8")
        if len(data) > self.max_write_bytes:
            raise ToolError(f"content is {len(data)} bytes, over the write limit of {self.max_write_bytes} bytes")
        real = self.resolve(path)
        if real.is_dir():
            raise ToolError(f"{path!r} is a directory")
        existed = real.exists()
        if existed and not overwrite:
            raise ToolError(f"{path!r} already exists; pass overwrite=true to replace it")
        real.parent.mkdir(parents=True, exist_ok=True)
        if existed:
            fd, temporary = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.replace(temporary, real)
            except BaseException:
                os.unlink(temporary)
                raise
        else:
            # O_EXCL: a file created meanwhile is not clobbered; O_NOFOLLOW: nor is a link planted meanwhile.
            fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        verb = "replaced" if existed else "created"
        return {"path": self.relative(real), "detail": f"{verb} ({len(data)} bytes)"}

    def move(self, source: str, destination: str) -> Change:
        """Move or rename a file or directory; never replaces an existing destination."""
        origin = self.entry(source)
        target = self.entry(destination)
        if not origin.exists() and not origin.is_symlink():
            raise ToolError(f"source {source!r} does not exist")
        if target.exists() or target.is_symlink():
            raise ToolError(f"destination {destination!r} already exists")
        if origin.is_dir() and (target == origin or origin in target.parents):
            raise ToolError(f"cannot move directory {source!r} into itself ({destination!r})")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(origin, target)
        return {"path": self.relative(target), "detail": f"moved from {self.relative(origin)}"}

    def delete(self, path: str) -> Change:
        """Delete a file, a symlink or an empty directory (never a directory with contents)."""
        real = self.entry(path)
        if real.is_symlink() or real.is_file():
            real.unlink()
        elif real.is_dir():
            if any(real.iterdir()):
                raise ToolError(f"directory {path!r} is not empty; delete its contents first")
            real.rmdir()
        else:
            raise ToolError(f"{path!r} does not exist")
        return {"path": self.relative(real), "detail": "deleted"}


def _render_entry(entry: Entry) -> str:
    """`name/` for a directory, `name (N bytes)` for a file, `name [type]` otherwise."""
    if entry["type"] == "directory":
        return f"{entry['name']}/"
    if entry["type"] == "file":
        return f"{entry['name']} ({entry['size']} bytes)"
    return f"{entry['name']} [{entry['type']}]"


def _render_listing(listing: Listing) -> str:
    """One line per entry: directories end in '/', files show their size."""
    lines = [_render_entry(entry) for entry in listing["entries"]]
    if listing["truncated"]:
        lines.append(f"[... more entries; only the first {MAX_LIST_ENTRIES} are shown]")
    return "\n".join(lines) or f"{listing['path']} is empty"


def _render_matches(found: SearchResult) -> str:
    """One line per match, `path` or `path:line: text`."""
    lines = [m["path"] if m["line"] is None else f"{m['path']}:{m['line']}: {m['text']}" for m in found["matches"]]
    if found["truncated"]:
        lines.append("[... search stopped early; narrow the pattern or path]")
    return "\n".join(lines) or "no matches"


def build_server(root: Path | str, max_read_bytes: int = MIB, max_write_bytes: int = MIB) -> MCPServer:
    """Build a file server confined to root (created if missing)."""
    tree = Root(Path(root), max_read_bytes, max_write_bytes)
    server = MCPServer(
        "files",
        instructions="Reads and writes files under one root directory. Paths are relative to that root.",
    )
    reading = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    changing = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)

    @server.tool(annotations=reading)
    def list_directory(path: str = ".") -> Annotated[CallToolResult, Listing]:
        """List a directory's entries with their type and size."""
        listing = _guard(tree.list_directory, path)
        return _result(_render_listing(listing), listing)

    @server.tool(annotations=reading)
    def read_file(
        path: str,
        offset: Annotated[int, Field(ge=0, description="first byte to read")] = 0,
        limit: Annotated[int | None, Field(ge=0, description="most bytes to read")] = None,
    ) -> Annotated[CallToolResult, FileChunk]:
        """Read a UTF-8 text file, whole or a byte range of it."""
        chunk = _guard(tree.read_file, path, offset, limit)
        result = _result(chunk["content"], chunk)
        if chunk["more"]:
            next_offset = chunk["offset"] + chunk["bytes_read"]
            note = f"[{chunk['file_size'] - next_offset} more bytes; continue with offset={next_offset}]"
            result.content.append(TextContent(type="text", text=note))
        return result

    @server.tool(annotations=reading)
    def search_files(
        pattern: Annotated[str, Field(description="glob on file names, e.g. '*.py' (on paths if it has a '/')")],
        path: str = ".",
        content: Annotated[str | None, Field(description="only files containing this text")] = None,
    ) -> Annotated[CallToolResult, SearchResult]:
        """Find files by name under a directory, optionally only those containing some text."""
        found = _guard(tree.search, pattern, path, content)
        return _result(_render_matches(found), found)

    @server.tool(annotations=changing)
    def write_file(path: str, content: str, overwrite: bool = False) -> Annotated[CallToolResult, Change]:
        """Write a UTF-8 text file, creating parent directories; replaces a file only with overwrite=true."""
        change = _guard(tree.write_file, path, content, overwrite)
        return _result(f"{change['path']}: {change['detail']}", change)

    @server.tool(annotations=changing)
    def move_file(source: str, destination: str) -> Annotated[CallToolResult, Change]:
        """Move or rename a file or directory; the destination must not exist."""
        change = _guard(tree.move, source, destination)
        return _result(f"{change['path']}: {change['detail']}", change)

    @server.tool(annotations=changing)
    def delete_file(path: str) -> Annotated[CallToolResult, Change]:
        """Delete a file or an empty directory."""
        change = _guard(tree.delete, path)
        return _result(f"{change['path']}: {change['detail']}", change)

    return server


def main(argv: list[str] | None = None) -> None:
    """Run the file server over stdio."""
    parser = argparse.ArgumentParser(prog="python -m servers.files", description=__doc__)
    parser.add_argument("--root", required=True, type=Path, help="directory the tools are confined to")
    parser.add_argument("--max-read-bytes", type=int, default=MIB, help="largest read (default 1 MiB)")
    parser.add_argument("--max-write-bytes", type=int, default=MIB, help="largest write (default 1 MiB)")
    args = parser.parse_args(argv)
    build_server(args.root, args.max_read_bytes, args.max_write_bytes).run("stdio")


if __name__ == "__main__":
    main()
