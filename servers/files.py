"""An MCP file server confined to one root directory, with size limits on reads and writes.

Paths are confined without trusting names: a path is walked one component at a time, each opened
relative to the directory before it with O_NOFOLLOW, and the tool then works on what the walk
opened (reads and stats through the descriptor, creates and renames relative to the directory's
descriptor). Nothing is checked by name and then opened again, so a tree changing underneath a
call (a folder swapped for a symbolic link) cannot lead it elsewhere. Symbolic links inside the
root are followed by the same walk: a relative target continues from the link's directory, an
absolute one must name a place under the root's real path, and '..' may not climb above the root;
a link that leads anywhere else is refused. Search never enters a linked directory, and moving
or deleting acts on a link itself, never on what it points to.
"""

from __future__ import annotations

import argparse
import errno
import fnmatch
import os
import secrets
import stat
from collections.abc import Callable, Generator, Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
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
MAX_LINKS = 40  # links followed in one path, as the kernel allows

# Every component is opened without following a link: links are read and followed by the walk itself.
DIRECTORY = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW
SUBDIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK
# O_NONBLOCK: a FIFO planted in the tree cannot hang a read; O_NOCTTY: a terminal never becomes ours.
READ = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY

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


def _guard(call: Callable[[], T], *paths: str) -> T:
    """Run a root operation, turning OS errors into tool errors that name the problem and the paths."""
    try:
        return call()
    except OSError as exc:
        raise ToolError(f"{exc.strerror or exc}: {', '.join(map(repr, paths))}") from exc


def _entry_type(mode: int) -> EntryType:
    """Classify a file mode without following symlinks."""
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "directory"
    return "file" if stat.S_ISREG(mode) else "other"


def _parts(path: str) -> list[str]:
    """The components of a path as a client gave it, refusing NUL bytes, absolute paths and '..'."""
    if "\0" in path:
        raise ToolError(f"path {path!r} contains a NUL byte")
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).anchor:
        raise ToolError(f"absolute path {path!r} refused: paths are relative to the root")
    if ".." in PurePosixPath(path.replace("\\", "/")).parts:
        raise ToolError(f"path {path!r} refused: '..' is not allowed")
    return list(PurePosixPath(path).parts)


def _outside(path: str) -> ToolError:
    """The refusal of a path that a symbolic link leads out of the root."""
    return ToolError(f"path {path!r} refused: it leads outside the root through a symbolic link")


@dataclass
class Place:
    """Where a path ends: the open directory holding its last component, and that component."""

    directory: int
    name: str
    shown: str
    # The last component opened with the walk's flags; None when it is missing or was not opened.
    fd: int | None


def _lstat(place: Place) -> os.stat_result | None:
    """The last component's own status (a link is not followed), or None when it is missing."""
    try:
        return os.stat(place.name, dir_fd=place.directory, follow_symlinks=False)
    except FileNotFoundError:
        return None


class Root:
    """A directory tree the tools may touch; every path is walked beneath it, never looked up by name twice."""

    def __init__(self, root: Path, max_read_bytes: int, max_write_bytes: int) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.path = root.resolve(strict=True)
        self.max_read_bytes = max_read_bytes
        self.max_write_bytes = max_write_bytes

    @contextmanager
    def _walk(self, path: str, opening: int | None, make_parents: bool = False) -> Iterator[Place]:
        """Resolve path beneath the root, one component at a time, each opened relative to the one before.

        With `opening`, a link in the last place is followed too and the last component is opened
        with those flags; without, the last component is left as it is (a link stays a link).
        """
        pending = _parts(path)
        held = [os.open(self.path, DIRECTORY)]
        names: list[str] = []
        name, fd, links = ".", None, 0
        try:
            while pending:
                part = pending.pop(0)
                if part == "..":
                    if len(held) == 1:
                        raise _outside(path)
                    os.close(held.pop())
                    names.pop()
                    continue
                last = not pending
                if last and opening is None:
                    name = part
                    break
                try:
                    info = os.stat(part, dir_fd=held[-1], follow_symlinks=False)
                except FileNotFoundError:
                    if last:
                        name = part
                        break
                    if not make_parents:
                        raise
                    with suppress(FileExistsError):
                        os.mkdir(part, dir_fd=held[-1])
                else:
                    if stat.S_ISLNK(info.st_mode):
                        links += 1
                        if links > MAX_LINKS:
                            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
                        target = PurePosixPath(os.readlink(part, dir_fd=held[-1]))
                        if target.is_absolute():
                            if not target.is_relative_to(self.path):
                                raise _outside(path)
                            target = target.relative_to(self.path)
                            while len(held) > 1:
                                os.close(held.pop())
                            names.clear()
                        pending[:0] = target.parts
                        continue
                # O_NOFOLLOW: a link swapped in since the check above fails the open instead of being followed.
                if last and opening is not None:
                    name = part
                    fd = os.open(part, opening | os.O_NOFOLLOW, dir_fd=held[-1])
                    break
                held.append(os.open(part, DIRECTORY, dir_fd=held[-1]))
                names.append(part)
            if name == "." and opening is not None:
                fd = os.open(".", opening, dir_fd=held[-1])
            yield Place(held[-1], name, PurePosixPath(*names, name).as_posix(), fd)
        finally:
            if fd is not None:
                os.close(fd)
            for directory in held:
                os.close(directory)

    @contextmanager
    def _entry(self, path: str, make_parents: bool = False) -> Iterator[Place]:
        """The last component of path itself (a link stays a link), for moving and deleting."""
        with self._walk(path, None, make_parents) as place:
            if place.name == ".":
                raise ToolError(f"path {path!r} refused: the root itself cannot be moved or deleted")
            info = _lstat(place)
            if info is not None and stat.S_ISLNK(info.st_mode):
                # Moving or deleting a link never follows it; refusing one that leads outside only keeps the
                # answer reads and writes give for the same path.
                with self._walk(path, os.O_PATH):
                    pass
            yield place

    @staticmethod
    def _directory(place: Place, path: str) -> int:
        """The descriptor of the directory a walk opened, refusing anything else."""
        if place.fd is None or not stat.S_ISDIR(os.fstat(place.fd).st_mode):
            raise ToolError(f"{path!r} is not a directory")
        return place.fd

    def list_directory(self, path: str) -> Listing:
        """Entries of a directory inside the root."""
        with self._walk(path, READ) as place:
            entries: list[Entry] = []
            with os.scandir(self._directory(place, path)) as scan:
                for item in sorted(scan, key=lambda e: e.name):
                    info = item.stat(follow_symlinks=False)
                    kind = _entry_type(info.st_mode)
                    size = info.st_size if kind == "file" else None
                    entries.append({"name": item.name, "type": kind, "size": size})
        truncated = len(entries) > MAX_LIST_ENTRIES
        return {"path": place.shown, "entries": entries[:MAX_LIST_ENTRIES], "truncated": truncated}

    def read_file(self, path: str, offset: int, limit: int | None) -> FileChunk:
        """A byte range of a UTF-8 text file, refusing reads past the size limit."""
        with self._walk(path, READ) as place:
            if place.fd is None:
                raise ToolError(f"{path!r} does not exist")
            info = os.fstat(place.fd)
            if not stat.S_ISREG(info.st_mode):
                raise ToolError(f"{path!r} is not a file")
            size = info.st_size
            if limit is not None and limit > self.max_read_bytes:
                raise ToolError(f"limit {limit} is over the read limit of {self.max_read_bytes} bytes")
            if limit is None and size - offset > self.max_read_bytes:
                raise ToolError(
                    f"{path!r} is {size} bytes, over the read limit of {self.max_read_bytes} bytes; "
                    "read it in parts with offset and limit"
                )
            data = os.pread(place.fd, self.max_read_bytes if limit is None else limit, offset)
        if b"\0" in data:
            raise ToolError(f"{path!r} looks binary (it contains NUL bytes); only text files can be read")
        return {
            "path": place.shown,
            # Replacement characters only appear where a range cuts a multi-byte character.
            "content": data.decode("utf-8", errors="replace"),
            "offset": offset,
            "bytes_read": len(data),
            "file_size": size,
            "more": offset + len(data) < size,
        }

    def search(self, pattern: str, path: str, content: str | None) -> SearchResult:
        """Files under a directory whose name matches a glob, optionally containing a substring."""
        matches: list[Match] = []
        with self._walk(path, READ) as place, closing(_files(self._directory(place, path), place.shown)) as found:
            for visits, (directory, name, shown) in enumerate(found, start=1):
                if visits > MAX_SEARCH_VISITS or len(matches) >= MAX_SEARCH_RESULTS:
                    return {"matches": matches, "truncated": True}
                if not fnmatch.fnmatchcase(shown if "/" in pattern else name, pattern):
                    continue
                if content is None:
                    matches.append({"path": shown, "line": None, "text": None})
                else:
                    limit = MAX_SEARCH_RESULTS - len(matches)
                    matches.extend(self._grep(directory, name, shown, content)[:limit])
        return {"matches": matches, "truncated": False}

    def _grep(self, directory: int, name: str, shown: str, needle: str) -> list[Match]:
        """Lines of a regular text file (within the read limit) that contain the needle."""
        try:
            fd = os.open(name, READ | os.O_NOFOLLOW, dir_fd=directory)
        except OSError:
            return []
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > self.max_read_bytes:
                return []
            data = handle.read(self.max_read_bytes + 1)
        if b"\0" in data or len(data) > self.max_read_bytes:
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
        with self._walk(path, os.O_PATH, make_parents=True) as place:
            existed = place.fd is not None
            if place.fd is not None and stat.S_ISDIR(os.fstat(place.fd).st_mode):
                raise ToolError(f"{path!r} is a directory")
            if existed and not overwrite:
                raise ToolError(f"{path!r} already exists; pass overwrite=true to replace it")
            if existed:
                temporary = f".{place.name}.{secrets.token_hex(8)}.tmp"
                try:
                    _create(place.directory, temporary, data)
                    os.replace(temporary, place.name, src_dir_fd=place.directory, dst_dir_fd=place.directory)
                except BaseException:
                    # A write cut short (a full disk) leaves no half-written temporary file behind.
                    with suppress(FileNotFoundError):
                        os.unlink(temporary, dir_fd=place.directory)
                    raise
            else:
                _create(place.directory, place.name, data)
        verb = "replaced" if existed else "created"
        return {"path": place.shown, "detail": f"{verb} ({len(data)} bytes)"}

    def move(self, source: str, destination: str) -> Change:
        """Move or rename a file or directory; never replaces an existing destination."""
        with self._entry(source) as origin:
            info = _lstat(origin)
            if info is None:
                raise ToolError(f"source {source!r} does not exist")
            with self._entry(destination, make_parents=True) as target:
                if _lstat(target) is not None:
                    raise ToolError(f"destination {destination!r} already exists")
                try:
                    os.rename(origin.name, target.name, src_dir_fd=origin.directory, dst_dir_fd=target.directory)
                except OSError as exc:
                    if exc.errno == errno.EINVAL and stat.S_ISDIR(info.st_mode):
                        raise ToolError(f"cannot move directory {source!r} into itself ({destination!r})") from exc
                    raise
        return {"path": target.shown, "detail": f"moved from {origin.shown}"}

    def delete(self, path: str) -> Change:
        """Delete a file, a symlink or an empty directory (never a directory with contents)."""
        with self._entry(path) as place:
            info = _lstat(place)
            if info is None:
                raise ToolError(f"{path!r} does not exist")
            if not stat.S_ISDIR(info.st_mode):
                os.unlink(place.name, dir_fd=place.directory)
            else:
                try:
                    os.rmdir(place.name, dir_fd=place.directory)
                except OSError as exc:
                    if exc.errno == errno.ENOTEMPTY:
                        raise ToolError(f"directory {path!r} is not empty; delete its contents first") from exc
                    raise
        return {"path": place.shown, "detail": "deleted"}


def _create(directory: int, name: str, data: bytes) -> None:
    """Write a new file in an open directory; O_EXCL and O_NOFOLLOW: never a file or link already there."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=directory)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _files(top: int, shown: str) -> Generator[tuple[int, str, str]]:
    """Every non-directory under an open directory as (its directory, name, shown path), sorted, depth first.

    Subdirectories are opened relative to their parent with O_NOFOLLOW, so a link is listed but never entered.
    """
    # Each level: an open directory, its shown path, and its subdirectories still to visit (last first).
    levels: list[tuple[int, str, list[str]]] = []
    try:
        directory = os.dup(top)
        while True:
            levels.append((directory, shown, []))
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda e: e.name)
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    levels[-1][2].insert(0, entry.name)
                else:
                    yield directory, entry.name, PurePosixPath(shown, entry.name).as_posix()
            while True:
                if not levels:
                    return
                parent, parent_shown, remaining = levels[-1]
                if not remaining:
                    os.close(levels.pop()[0])
                    continue
                name = remaining.pop()
                try:
                    directory = os.open(name, SUBDIRECTORY, dir_fd=parent)
                except OSError:
                    continue
                shown = PurePosixPath(parent_shown, name).as_posix()
                break
    finally:
        for level in levels:
            os.close(level[0])


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
        listing = _guard(lambda: tree.list_directory(path), path)
        return _result(_render_listing(listing), listing)

    @server.tool(annotations=reading)
    def read_file(
        path: str,
        offset: Annotated[int, Field(ge=0, description="first byte to read")] = 0,
        limit: Annotated[int | None, Field(ge=0, description="most bytes to read")] = None,
    ) -> Annotated[CallToolResult, FileChunk]:
        """Read a UTF-8 text file, whole or a byte range of it."""
        chunk = _guard(lambda: tree.read_file(path, offset, limit), path)
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
        found = _guard(lambda: tree.search(pattern, path, content), path)
        return _result(_render_matches(found), found)

    @server.tool(annotations=changing)
    def write_file(path: str, content: str, overwrite: bool = False) -> Annotated[CallToolResult, Change]:
        """Write a UTF-8 text file, creating parent directories; replaces a file only with overwrite=true."""
        change = _guard(lambda: tree.write_file(path, content, overwrite), path)
        return _result(f"{change['path']}: {change['detail']}", change)

    @server.tool(annotations=changing)
    def move_file(source: str, destination: str) -> Annotated[CallToolResult, Change]:
        """Move or rename a file or directory; the destination must not exist."""
        change = _guard(lambda: tree.move(source, destination), source, destination)
        return _result(f"{change['path']}: {change['detail']}", change)

    @server.tool(annotations=changing)
    def delete_file(path: str) -> Annotated[CallToolResult, Change]:
        """Delete a file or an empty directory."""
        change = _guard(lambda: tree.delete(path), path)
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
