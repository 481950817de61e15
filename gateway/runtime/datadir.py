"""The data directory kept private: itself `0700`, the gateway's files in it `0600`.

It holds registered servers' credentials, parked calls' arguments and the audit trail, so nobody
but the gateway's user may read it. The stores create their files `0600` (SQLite gives its `-wal`
and `-shm` files the mode of the database) and their directories `0700`; `make_private` creates
the directory that way and, at start-up, takes group and other permissions away from anything an
earlier version (or a hand) left looser, with one warning naming what it changed. Workspaces are
left to `gateway.upstreams.workspaces`: sandboxed code owns what is inside them.
"""

from __future__ import annotations

import logging
import os
import stat
from contextlib import suppress
from pathlib import Path

log = logging.getLogger(__name__)

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
WORKSPACES = "workspaces"
_SHOWN = 10
"""Paths named in the warning; more are counted."""


def make_private(data_dir: Path) -> None:
    """Create `data_dir` (`0700`) or make what is there private; raises `OSError` when it cannot be created."""
    private_dirs(data_dir)
    fixed: list[str] = []
    failed: list[str] = []
    for path in _walk(data_dir):
        try:
            # The directory itself may be a link to where it really is; nothing under it is followed.
            mode = stat.S_IMODE((os.stat if path == data_dir else os.lstat)(path).st_mode)
            if mode & 0o077:
                os.chmod(path, mode & 0o700)
                fixed.append(f"{path.relative_to(data_dir).as_posix() or '.'} ({mode:04o})")
        except FileNotFoundError:
            continue  # removed meanwhile (a spool file shipped by another process)
        except OSError as error:
            failed.append(f"{path}: {error.strerror}")
    if fixed:
        log.warning(
            "the data directory %s was readable by others: took group and other permissions from %s",
            data_dir,
            _listed(fixed),
        )
    if failed:
        log.warning("the data directory %s: could not make private %s", data_dir, _listed(failed))


def private_dirs(directory: Path) -> None:
    """Create `directory` and whichever of its parents are missing, each `0700`."""
    if directory.is_dir():
        return
    private_dirs(directory.parent)
    directory.mkdir(mode=PRIVATE_DIR, exist_ok=True)


def private_file(path: Path) -> None:
    """Create `path` empty and `0600` unless it exists (a store's file, before its library opens it)."""
    with suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE))


def _walk(data_dir: Path) -> list[Path]:
    """The directory and everything under it except the workspaces and symbolic links."""
    found = [data_dir]
    for root, directories, files in os.walk(data_dir):
        if Path(root) == data_dir and WORKSPACES in directories:
            directories.remove(WORKSPACES)
        for name in [*directories, *files]:
            path = Path(root, name)
            if not path.is_symlink():
                found.append(path)
    return found


def _listed(items: list[str]) -> str:
    more = len(items) - _SHOWN
    return ", ".join(items[:_SHOWN]) + (f" and {more} more" if more > 0 else "")
