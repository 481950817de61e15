"""The file server against a tree that changes underneath it: a folder swapped for a link out of the root."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from servers.files import Root

SECRET = "TOP SECRET: the host's own file"
DECOY = "decoy, inside the root"
RENAME_EXCHANGE = 2
AT_FDCWD = -100
LIBC = ctypes.CDLL(None, use_errno=True)


def exchange(first: Path, second: Path) -> None:
    """Swap two names atomically (renameat2 RENAME_EXCHANGE), so each is always either the folder or the link."""
    if LIBC.renameat2(AT_FDCWD, bytes(first), AT_FDCWD, bytes(second), RENAME_EXCHANGE) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error), str(first))


class Tree:
    """A root whose `d` flips between a real folder and a link to a folder outside it; both hold `secret.txt`."""

    def __init__(self, base: Path) -> None:
        self.outside = base / "outside"
        self.outside.mkdir()
        (self.outside / "secret.txt").write_text(SECRET)
        self.path = base / "root"
        (self.path / "d").mkdir(parents=True)
        (self.path / "d" / "secret.txt").write_text(DECOY)
        (self.path / "loose.txt").write_text("loose")
        (self.path / "spare").symlink_to(self.outside, target_is_directory=True)
        # The real folder travels between `d` and `spare`; this descriptor follows it wherever it is.
        self.folder = os.open(self.path / "d", os.O_PATH | os.O_DIRECTORY)
        self.top = os.open(self.path, os.O_PATH | os.O_DIRECTORY)
        self.root = Root(self.path, max_read_bytes=4096, max_write_bytes=4096)
        self.outcomes = {"done": 0, "failed": 0}

    def attempt(self, operation: Callable[[], object]) -> object:
        """The operation's result, or None when it was refused or failed."""
        try:
            result = operation()
        except (ToolError, OSError):
            self.outcomes["failed"] += 1
            return None
        self.outcomes["done"] += 1
        return result

    def escaped(self) -> str | None:
        """What, if anything, shows that an operation reached the outside folder."""
        if sorted(os.listdir(self.outside)) != ["secret.txt"]:
            return f"the outside folder now holds {sorted(os.listdir(self.outside))}"
        if (self.outside / "secret.txt").read_text() != SECRET:
            return "the secret was overwritten"
        return None


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Tree]:
    """The tree, with a thread flipping `d` as fast as it can for as long as the test runs."""
    flipping = Tree(tmp_path)
    stop = threading.Event()
    flips = 0

    def flip() -> None:
        nonlocal flips
        while not stop.is_set():
            exchange(flipping.path / "d", flipping.path / "spare")
            flips += 1

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    try:
        yield flipping
    finally:
        stop.set()
        flipper.join()
        os.close(flipping.folder)
        os.close(flipping.top)
    assert flips > 0


def read(tree: Tree) -> str | None:
    """Read `d/secret.txt`: only the decoy may come back."""
    chunk = tree.attempt(lambda: tree.root.read_file("d/secret.txt", 0, None))
    if chunk is not None and chunk["content"] != DECOY:  # type: ignore[index]
        return f"read returned {chunk!r}"
    return None


def write(tree: Tree) -> str | None:
    """Replace `d/secret.txt` and create `d/new.txt`: both must land in the real folder."""
    tree.attempt(lambda: tree.root.write_file("d/secret.txt", DECOY, True))
    tree.attempt(lambda: tree.root.write_file("d/new.txt", "written", True))
    return None


def listing(tree: Tree) -> str | None:
    """List `d`: only the real folder's entries may come back (its `secret.txt` is the decoy's size)."""
    found = tree.attempt(lambda: tree.root.list_directory("d"))
    if found is not None and any(entry["size"] != len(DECOY) for entry in found["entries"]):  # type: ignore[index]
        return f"listing showed {found!r}"
    return None


def search(tree: Tree) -> str | None:
    """Search the whole root, and `d`, for the secret's text: it must never be found."""
    everywhere = tree.attempt(lambda: tree.root.search("*", ".", "TOP SECRET"))
    inside = tree.attempt(lambda: tree.root.search("*", "d", "TOP SECRET"))
    for found in (everywhere, inside):
        if found is not None and found["matches"]:  # type: ignore[index]
            return f"search found {found!r}"
    return None


def move(tree: Tree) -> str | None:
    """Move a file into `d` and `d/secret.txt` out, putting each back by descriptor when it went through."""
    if tree.attempt(lambda: tree.root.move("loose.txt", "d/loose.txt")) is not None:
        os.rename("loose.txt", "loose.txt", src_dir_fd=tree.folder, dst_dir_fd=tree.top)
    if tree.attempt(lambda: tree.root.move("d/secret.txt", "taken.txt")) is not None:
        if (tree.path / "taken.txt").read_text() != DECOY:
            return "the secret was moved into the root"
        os.rename("taken.txt", "secret.txt", src_dir_fd=tree.top, dst_dir_fd=tree.folder)
    return None


def delete(tree: Tree) -> str | None:
    """Delete `d/secret.txt`, recreating the decoy in the real folder when it went."""
    if tree.attempt(lambda: tree.root.delete("d/secret.txt")) is not None:
        with os.fdopen(os.open("secret.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=tree.folder), "w") as decoy:
            decoy.write(DECOY)
    return None


ATTEMPTS = 10_000


@pytest.mark.parametrize("operation", [read, write, listing, search, move, delete])
def test_no_operation_reaches_outside_the_root_while_a_folder_flips_to_a_link(
    tree: Tree, operation: Callable[[Tree], str | None]
) -> None:
    for number in range(ATTEMPTS):
        leak = operation(tree) or tree.escaped()
        assert leak is None, f"attempt {number}: {leak}"
    # The flips were seen: some operations went through the real folder, others failed on the link.
    assert tree.outcomes["done"] > 0 and tree.outcomes["failed"] > 0
