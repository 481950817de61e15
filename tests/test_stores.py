"""The store seam: versioned migrations on each backend, approvals decided once across store
instances racing in threads, the `store` section, and its password kept out of what is written."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from gateway.config.loading import parse_config
from gateway.config.secrets import secrets_of
from gateway.errors import GatewayError
from gateway.pipeline.approvals import ApprovalStore, Binding, Status
from gateway.problems import ConfigProblems
from gateway.stores import StoreSettings, migrate
from gateway.stores.migrations import migrations
from gateway.stores.postgres import without_password
from tests.support.databases import Backend

STORES = ("audit", "confirmations", "approvals", "registrations", "pins", "names", "grants")
CALL = Binding("alice", "s1", "sqlite__execute", "digest")


def race(count: int, attempt: Callable[[int], Any]) -> list[Any]:
    """Run `attempt(i)` for i in range(count) in threads released together; each one's result or GatewayError."""
    start = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(index: int) -> None:
        start.wait()
        try:
            results[index] = attempt(index)
        except GatewayError as error:
            results[index] = error

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


@pytest.mark.parametrize("store", STORES)
def test_each_store_has_the_same_versions_on_both_backends(store: str) -> None:
    sqlite = [version for version, _ in migrations("sqlite", store)]
    postgresql = [version for version, _ in migrations("postgresql", store)]
    assert sqlite == postgresql and sqlite[0] == 1
    assert sqlite == list(range(1, len(sqlite) + 1))


def test_migrations_apply_once_and_running_them_again_changes_nothing(store_backend: Backend) -> None:
    db = store_backend.open("audit")
    try:
        assert migrate(db, "audit") == [1, 2, 3, 4, 5, 6, 7, 8, 9]
        assert migrate(db, "audit") == []
        assert migrate(db, "approvals") == [1]
        rows = db.fetch_all("SELECT store, version FROM schema_version ORDER BY store, version")
    finally:
        db.close()
    assert rows == [("approvals", 1), *(("audit", version) for version in range(1, 10))]


def test_stores_opening_at_once_migrate_once(store_backend: Backend) -> None:
    databases = [store_backend.open("approvals") for _ in range(4)]
    try:
        applied = race(len(databases), lambda index: migrate(databases[index], "approvals"))
        versions = databases[0].fetch_all("SELECT version FROM schema_version WHERE store = 'approvals'")
    finally:
        for db in databases:
            db.close()
    assert sorted(applied) == [[], [], [], [1]]
    assert versions == [(1,)]


def test_a_sqlite_file_written_before_versions_were_kept_is_adopted_as_it_is(tmp_path: Path) -> None:
    # The audit table as the last gateway without migrations left it: request_id already there.
    with closing(sqlite3.connect(tmp_path / "audit.db")) as old:
        old.execute(
            "CREATE TABLE audit (id INTEGER PRIMARY KEY, time TEXT NOT NULL, epoch REAL NOT NULL,"
            " session TEXT NOT NULL, caller TEXT NOT NULL, tool TEXT NOT NULL, args_digest TEXT NOT NULL,"
            " outcome TEXT NOT NULL, duration_ms REAL NOT NULL, detail TEXT NOT NULL,"
            " request_id TEXT NOT NULL DEFAULT '')"
        )
    db = Backend("sqlite", StoreSettings(), tmp_path).open("audit")
    try:
        assert migrate(db, "audit") == [1, 2, 3, 4, 5, 6, 7, 8, 9]
        columns = [row[1] for row in db.fetch_all("PRAGMA table_info(audit)")]
    finally:
        db.close()
    assert columns.count("request_id") == 1


def test_two_stores_deciding_one_approval_at_once_approve_it_exactly_once(store_backend: Backend) -> None:
    stores = [ApprovalStore(store_backend.open("approvals")) for _ in range(2)]
    try:
        parked, _ = stores[0].checkpoint(CALL, None, "{}", 300)
        decided = race(8, lambda index: stores[index % 2].decide(parked.id, index % 3 != 0, f"person-{index}"))
    finally:
        for store in stores:
            store.close()
    winners = [result for result in decided if not isinstance(result, GatewayError)]
    assert len(winners) == 1
    assert all("already" in result.message for result in decided if isinstance(result, GatewayError))


def test_two_stores_retrying_one_approved_call_at_once_run_it_exactly_once(store_backend: Backend) -> None:
    stores = [ApprovalStore(store_backend.open("approvals")) for _ in range(2)]
    try:
        parked, _ = stores[0].checkpoint(CALL, None, "{}", 300)
        stores[1].decide(parked.id, True, "ops")
        outcomes = race(8, lambda index: stores[index % 2].checkpoint(CALL, None, "{}", 300)[0].status)
    finally:
        for store in stores:
            store.close()
    assert outcomes.count(Status.USED) == 1
    assert set(outcomes) == {Status.USED, Status.PENDING}


def test_without_a_store_section_the_stores_stay_in_sqlite_under_the_data_dir(tmp_path: Path) -> None:
    config = parse_config({"servers": {}}, source="g.yaml", base_dir=tmp_path)
    assert config.store == StoreSettings(url=None)


def test_a_store_url_selects_postgresql_and_its_password_is_a_secret(tmp_path: Path) -> None:
    document = {"servers": {}, "store": {"url": "postgresql://gw:p%40ss-7f3a@db:5432/gateway"}}
    config = parse_config(document, source="g.yaml", base_dir=tmp_path)
    assert config.store.url == "postgresql://gw:p%40ss-7f3a@db:5432/gateway"
    assert {"p%40ss-7f3a", "p@ss-7f3a"} <= set(secrets_of(config))
    assert without_password(config.store.url) == "postgresql://gw:***@db:5432/gateway"


@pytest.mark.parametrize(
    ("section", "problem"),
    [
        ({"url": "mysql://gw:hunter2@db/gateway"}, "store.url"),
        ({"url": 5}, "store.url"),
        ({"uri": "postgresql://db/gateway"}, "store.uri"),
        ({"spool": "relative/spool"}, "store.spool"),
    ],
)
def test_a_bad_store_section_names_the_place_and_echoes_no_value(
    tmp_path: Path, section: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigProblems) as raised:
        parse_config({"servers": {}, "store": section}, source="g.yaml", base_dir=tmp_path)
    assert problem in raised.value.message
    assert "hunter2" not in raised.value.message
