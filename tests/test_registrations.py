"""The registration store on each backend: entries survive reopening, replace by name, stay per kind,
are encrypted at rest with a key kept outside the database, and PostgreSQL restarting under it
costs no registration."""

import base64
import logging
import os
import stat
from pathlib import Path

import pytest

from gateway.stores import StoreSettings
from gateway.stores.registrations import RegistrationStore
from gateway.stores.sealing import KEY_FILE, Sealer, sealer
from tests.support.databases import Backend
from tests.support.services import postgres_server

SECRET = "ghp_registered-header-secret-0123456789"
ENTRY = {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": f"Bearer {SECRET}"}, "env": {}}


def fresh_key() -> str:
    """A new key, as `store.key` would name one."""
    return base64.urlsafe_b64encode(os.urandom(32)).decode()


def opened(backend: Backend, key: str | None = None) -> RegistrationStore:
    """The store on `backend`, sealed with `key` or the data directory's key file."""
    return RegistrationStore(backend.open("registrations"), sealer(key, backend.data_dir))


def test_a_registration_survives_reopening_the_store(store_backend: Backend) -> None:
    store = opened(store_backend)
    store.save("server", "weather", {"name": "weather", "url": "http://127.0.0.1:9/mcp"})
    store.close()

    reopened = opened(store_backend)
    assert reopened.entries("server") == {"weather": {"name": "weather", "url": "http://127.0.0.1:9/mcp"}}
    reopened.close()


def test_saving_a_name_again_replaces_its_entry_and_kinds_do_not_mix(store_backend: Backend) -> None:
    store = opened(store_backend)
    store.save("server", "x", {"name": "x", "url": "http://a"})
    store.save("server", "x", {"name": "x", "url": "http://b"})
    store.save("group", "x", {"allow": ["x__*"]})

    assert store.entries("server") == {"x": {"name": "x", "url": "http://b"}}
    assert store.entries("group") == {"x": {"allow": ["x__*"]}}
    store.close()


def test_entries_come_in_name_order_whatever_the_database_s_collation(store_backend: Backend) -> None:
    store = opened(store_backend)
    for name in ("b", "B", "a", "_z"):
        store.save("server", name, {"name": name})

    assert list(store.entries("server")) == ["B", "_z", "a", "b"]
    store.close()


def test_removing_reports_whether_there_was_an_entry(store_backend: Backend) -> None:
    store = opened(store_backend)
    store.save("server", "x", {"name": "x"})

    assert store.remove("server", "x") is True
    assert store.remove("server", "x") is False
    assert store.entries("server") == {}
    store.close()


def stored_rows(backend: Backend) -> list[str]:
    """The `entry` column as the database holds it."""
    db = backend.open("registrations")
    try:
        return [row[0] for row in db.fetch_all("SELECT entry FROM registrations")]
    finally:
        db.close()


def test_a_registered_header_secret_is_in_no_row_and_no_byte_of_the_database(store_backend: Backend) -> None:
    store = opened(store_backend)
    store.save("server", "remote", ENTRY)
    rows = stored_rows(store_backend)
    files = b"".join(path.read_bytes() for path in store_backend.data_dir.glob("registrations.db*"))
    assert store.entries("server") == {"remote": ENTRY}
    store.close()
    assert len(rows) == 1 and SECRET not in rows[0] and "Authorization" not in rows[0]
    assert SECRET.encode() not in files


def test_entries_an_earlier_version_stored_in_clear_are_read_and_encrypted_when_the_store_opens(
    store_backend: Backend,
) -> None:
    old = opened(store_backend)
    old.close()
    db = store_backend.open("registrations")
    db.execute(
        "INSERT INTO registrations (kind, name, entry) VALUES (?, ?, ?)",
        (
            "server",
            "remote",
            '{"headers": {"Authorization": "Bearer ' + SECRET + '"}, "url": "http://127.0.0.1:9/mcp"}',
        ),
    )
    db.close()

    store = opened(store_backend)
    entries = store.entries("server")
    store.close()
    assert entries == {"remote": {"url": ENTRY["url"], "headers": ENTRY["headers"]}}
    assert [SECRET in row for row in stored_rows(store_backend)] == [False]


def test_an_entry_sealed_with_another_key_is_left_out_with_a_warning(
    store_backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    one = opened(store_backend, fresh_key())
    one.save("server", "remote", ENTRY)
    one.close()

    other = opened(store_backend, fresh_key())
    with caplog.at_level(logging.WARNING, logger="gateway.stores.registrations"):
        entries = other.entries("server")
    other.close()
    assert entries == {}
    assert "registered server 'remote'" in caplog.text and "store.key" in caplog.text
    assert SECRET not in caplog.text


def test_without_store_key_the_key_is_a_0600_file_in_the_data_directory_made_once(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        first = sealer(None, tmp_path)
        again = sealer(None, tmp_path)
    finally:
        os.umask(previous)
    key_file = tmp_path / KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert again.unseal(first.seal("text")) == "text"
    assert Sealer(key_file.read_text().strip()).unseal(first.seal("text")) == "text"


def test_the_first_registration_after_postgresql_restarted_is_stored(tmp_path: Path) -> None:
    with postgres_server() as server:
        store = RegistrationStore.open(StoreSettings(url=server.url), tmp_path)
        try:
            store.save("server", "before", {"url": "http://127.0.0.1:9/mcp"})
            # The pool's idle connection outlives the server it was opened to.
            server.stop()
            server.start()
            store.save("server", "after", {"url": "http://127.0.0.1:9/mcp"})
            stored = list(store.entries("server"))
        finally:
            store.close()
    assert stored == ["after", "before"]
