"""Rows encrypted at rest with a key that is not in the database: Fernet (AES-128-CBC and HMAC-SHA256).

The key is `store.key` when the configuration names one (replicas sharing a PostgreSQL database
must all name the same), else the file `registrations.key` in the data directory, made `0600` on
first start. `cryptography` is imported with the first row sealed or opened: a command that reads
no registration does not pay for it.
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.errors import GatewayError
from gateway.runtime.datadir import PRIVATE_FILE
from gateway.stores.database import DatabaseError

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

KEY_FILE = "registrations.key"
KEY_HINT = (
    "32 random bytes in URL-safe base64, e.g. from "
    'python -c "import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())"'
)


class UnreadableRowError(GatewayError):
    """A sealed row that this key cannot open: sealed with another key, or altered."""


def key_problem(text: str) -> str | None:
    """Why `text` cannot be a key (never quoting it), or None."""
    try:
        raw = base64.urlsafe_b64decode(text.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError):
        raw = b""
    return None if len(raw) == 32 else f"must be {KEY_HINT}"


class Sealer:
    """Seals text into a token and opens tokens it sealed, with one key."""

    def __init__(self, key: str) -> None:
        self._key = key
        self._fernet: Fernet | None = None

    def seal(self, text: str) -> str:
        """`text` encrypted and authenticated, as ASCII."""
        return self._cipher().encrypt(text.encode("utf-8")).decode("ascii")

    def unseal(self, token: str) -> str:
        """The text `token` was sealed from; `UnreadableRowError` when this key did not seal it."""
        from cryptography.fernet import InvalidToken

        try:
            return self._cipher().decrypt(token.encode("ascii")).decode("utf-8")
        except (InvalidToken, UnicodeError):
            raise UnreadableRowError("it was sealed with another key, or altered") from None

    def _cipher(self) -> Fernet:
        if self._fernet is None:
            from cryptography.fernet import Fernet

            self._fernet = Fernet(self._key)
        return self._fernet


def sealer(key: str | None, data_dir: Path) -> Sealer:
    """The sealer of `key` (`store.key`), else of the data directory's key file, made on first use.

    Raises `DatabaseError` when the file cannot be read or holds no key.
    """
    if key is not None:
        return Sealer(key)
    path = data_dir / KEY_FILE
    try:
        if not path.exists():
            _create(path)
        text = path.read_text("ascii").strip()
    except (OSError, UnicodeError) as error:
        raise DatabaseError(f"{path}: cannot read the registrations' key: {error}") from None
    if key_problem(text) is not None:
        raise DatabaseError(f"{path}: holds no key; restore it from a backup (without it no registration is readable)")
    return Sealer(text)


def _create(path: Path) -> None:
    """Write a new key under a temporary name, then link it into place: two processes starting on
    one data directory end up with the same key, and none reads a half-written file."""
    fresh = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    descriptor = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE)
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as file:
            file.write(base64.urlsafe_b64encode(os.urandom(32)).decode("ascii") + "\n")
            file.flush()
            os.fsync(file.fileno())
        with suppress(FileExistsError):
            os.link(fresh, path)
    finally:
        fresh.unlink()
