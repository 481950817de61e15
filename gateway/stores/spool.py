"""A local spool: rows bound for a store, appended to a file before they are shipped.

Why: a row that must survive the gateway being killed would otherwise need a commit before the
caller's answer (a network round trip to PostgreSQL; 50 to 70 us for a SQLite row alone). A
`write(2)` to a local file survives the process being killed (`kill -9` included: the kernel,
not the process, holds the data), so the row is appended here, one JSON line, and a writer ships
spooled rows to the store in batches, off the caller's path.
No fsync: a machine crash or power loss can take back rows the kernel had not yet written to
disk and the writer had not yet shipped (docs/operations.md says what holds where).

Room on disk: `reserve` checks, before a call runs, that the file system holding the current file
has `HEADROOM` free (one `fstatvfs`), so that a full disk is found before the call it would audit
runs, not after. Claiming blocks ahead (`fallocate`) would hold them for sure, but each claim after
the file is emptied cost about 0.3 ms of the writer's time here, against about 1 us for the check.

Files: each process appends to files of its own in the spool directory, named after the host,
the process and a random token (`<host>-<pid>-<token>.jsonl`), so replicas sharing a volume never
share one. A process holds an exclusive `flock` on each of its files while it owns them. Once
every row of a file is shipped, the file is truncated, or removed when it was retired for its
size. A file whose lock can be taken belongs to no live process: `orphans` hands out its rows for
replay, and the store inserts them idempotently (each row carries a unique id), so a row both
shipped and still spooled is stored once.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import secrets
import socket
from collections.abc import Container, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.errors import GatewayError
from gateway.runtime.datadir import private_dirs

log = logging.getLogger(__name__)

SEGMENT_BYTES = 4 * 1024 * 1024
"""A file that has grown past this while rows kept arriving is retired, and a new one started:
under steady load the current file may never be empty at the moment a batch has shipped."""
_LINE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))

HEADROOM = 256 * 1024
"""What must be free on the spool's file system before a call runs: far more than the rows of
every call that may be running meanwhile (a row is at most a few KiB)."""

Row = Sequence[Any]
_SUFFIX = ".jsonl"


class SpoolError(GatewayError):
    """The spool directory or one of its files cannot be created or written.

    `reason` is the system's word for why (as "No space left on device"), without the path."""

    def __init__(self, message: str, reason: str | None) -> None:
        super().__init__(message)
        self.reason = reason or "unknown error"


@dataclass(slots=True)
class _File:
    """One spool file this process owns: its path and its locked, append-only descriptor."""

    path: Path
    fd: int
    size: int = 0

    @classmethod
    def create(cls, directory: Path) -> _File:
        """A new, empty file, locked before it is given its final name, so that no process
        replaying orphans can take it for one."""
        name = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}{_SUFFIX}"
        path = directory / name
        fresh = path.with_name(f"{name}.new")
        try:
            private_dirs(directory)
            fd = os.open(fresh, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(fresh, path)
        except OSError as error:
            raise SpoolError(f"Cannot create a spool file in {directory}: {error.strerror}", error.strerror) from None
        return cls(path, fd)

    def reserve(self) -> None:
        """Raise `SpoolError` (a full disk) unless the file's file system has `HEADROOM` free."""
        try:
            stats = os.fstatvfs(self.fd)
        except OSError as error:
            raise SpoolError(f"Cannot read the free space of {self.path}: {error.strerror}", error.strerror) from None
        # Root may also write the blocks a file system keeps back for it.
        blocks = stats.f_bfree if os.geteuid() == 0 else stats.f_bavail
        if blocks * stats.f_frsize < HEADROOM:
            reason = os.strerror(errno.ENOSPC)
            raise SpoolError(f"Too little room left for the spool file {self.path}: {reason}", reason)

    def remove(self) -> None:
        """Unlink the file while still holding its lock, then let the lock go."""
        with suppress(FileNotFoundError):
            os.unlink(self.path)
        os.close(self.fd)


class Spool:
    """This process's spool files in `directory`; the first one is created by the first `append`.

    `append`, `batch` and `shipped` run on one thread (the event loop), so that no row can be
    appended between a batch being marked shipped and its file being emptied.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._current: _File | None = None
        self._retired: list[_File] = []
        self._pending: list[Row] = []

    @property
    def pending(self) -> int:
        """Rows appended and not yet shipped."""
        return len(self._pending)

    def reserve(self) -> None:
        """Make sure the next rows have room on disk; raises `SpoolError` (a full disk) when not."""
        if self._current is None:
            self._current = _File.create(self.directory)
        self._current.reserve()

    def append(self, row: Row) -> None:
        """Write `row` to the current file as one JSON line, in one `write(2)`; raises `SpoolError`."""
        line = (_LINE.encode(row) + "\n").encode()
        if self._current is None:
            self._current = _File.create(self.directory)
        current = self._current
        try:
            written = os.write(current.fd, line)
            while written < len(line):
                written += os.write(current.fd, line[written:])
        except OSError as error:
            raise SpoolError(
                f"Cannot write to the spool file {current.path}: {error.strerror}", error.strerror
            ) from None
        current.size += len(line)
        self._pending.append(row)

    def batch(self) -> list[Row]:
        """Every row not yet shipped, oldest first; retires a current file grown past `SEGMENT_BYTES`.

        Every retired file's rows are in the batch, so once it has shipped they can all go.
        """
        if self._current is not None and self._current.size > SEGMENT_BYTES:
            self._retired.append(self._current)
            self._current = None
        return list(self._pending)

    def shipped(self, count: int) -> None:
        """The first `count` pending rows (a whole `batch`) are in the store: forget them, remove
        retired files, and empty the current one when nothing was appended meanwhile."""
        del self._pending[:count]
        for retired in self._retired:
            retired.remove()
        self._retired.clear()
        if not self._pending and self._current is not None and self._current.size:
            os.ftruncate(self._current.fd, 0)
            self._current.size = 0

    def close(self) -> None:
        """Let go of the files: removed when every row has shipped, else left (locks released)
        for the next process to replay."""
        files = [*self._retired, *([self._current] if self._current else [])]
        for file in files:
            if self._pending:
                os.close(file.fd)
            else:
                file.remove()
        self._current = None
        self._retired.clear()


@dataclass(frozen=True, slots=True)
class Orphan:
    """A spool file no live process owns, locked by this one: its rows, for the store to replay."""

    path: Path
    rows: list[Row]
    fd: int

    def replayed(self) -> None:
        """Its rows are in the store: remove the file (still locked) and release it."""
        with suppress(FileNotFoundError):
            os.unlink(self.path)
        os.close(self.fd)

    def release(self) -> None:
        """Leave the file for a later replay (its rows could not be stored)."""
        os.close(self.fd)


def orphans(directory: Path, widths: Container[int]) -> Iterator[Orphan]:
    """The spool files in `directory` whose lock can be taken (their process is gone), one at a
    time, each locked until it is `replayed` or `released`. A line that is not a JSON list of
    one of `widths` values (rows of this version or an older one) is skipped with a warning naming
    the file and line: a write torn by a machine crash."""
    if not directory.is_dir():
        return
    for path in sorted(directory.glob(f"*{_SUFFIX}")):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue  # replayed by another process meanwhile
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)  # a live process owns it, or another one is replaying it
            continue
        if os.fstat(fd).st_nlink == 0:
            os.close(fd)  # removed once replayed, between listing and locking
            continue
        with os.fdopen(os.dup(fd), "rb") as file:
            data = file.read()
        yield Orphan(path, _rows(path, data, widths), fd)


def _rows(path: Path, data: bytes, widths: Container[int]) -> list[Row]:
    rows: list[Row] = []
    for number, line in enumerate(data.splitlines(), start=1):
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if isinstance(row, list) and len(row) in widths:
            rows.append(row)
        elif line.strip():
            log.warning("spool %s line %d is not a complete row (a write torn by a crash?): skipped", path, number)
    return rows
