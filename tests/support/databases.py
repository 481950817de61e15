"""The stores' two backends for tests: a SQLite directory, or a fresh schema in the test PostgreSQL.

The PostgreSQL server is the one `.ci/postgres.sh` starts; its URL comes from
`GATEWAY_TEST_POSTGRES_URL`, or from the file that script writes. Without a reachable server the
PostgreSQL cases skip, and fail under CI=true.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from gateway.stores import Database, StoreSettings, open_database

REPO = Path(__file__).resolve().parents[2]
URL_VARIABLE = "GATEWAY_TEST_POSTGRES_URL"
URL_FILE = REPO / ".cache" / "postgres" / "url"
BACKENDS = ("sqlite", "postgresql")


@dataclass(frozen=True)
class Backend:
    """Where a test's stores live: `settings` and `data_dir` as the gateway's config gives them."""

    kind: str
    settings: StoreSettings
    data_dir: Path

    def open(self, store: str) -> Database:
        """A new connection to `store`'s database, as the gateway opens it (reopened: the same data)."""
        return open_database(self.settings, self.data_dir, store, manual_checkpoints=store == "audit")

    def config_section(self) -> dict[str, str]:
        """The `store` section of a config file selecting this backend (empty for SQLite)."""
        return {} if self.settings.url is None else {"url": self.settings.url}


def server_url() -> str:
    """The test PostgreSQL's URL; skips (fails under CI=true) when there is none or it does not answer."""
    url = os.environ.get(URL_VARIABLE) or (URL_FILE.read_text().strip() if URL_FILE.exists() else "")
    problem = ""
    if not url:
        problem = f"no PostgreSQL for the store tests: run `.ci/postgres.sh` or set {URL_VARIABLE}"
    else:
        try:
            psycopg.connect(url, connect_timeout=10).close()
        except psycopg.Error as error:
            problem = f"the test PostgreSQL does not answer ({' '.join(str(error).split())}); run `.ci/postgres.sh`"
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    return url


@contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    """A URL whose connections see only a new, empty schema of the test database; dropped afterwards."""
    schema = f"test_{secrets.token_hex(6)}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in url else "?"
    try:
        yield f"{url}{separator}options={quote(f'-c search_path={schema}')}"
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


@contextmanager
def backend(kind: str, data_dir: Path) -> Iterator[Backend]:
    """A `Backend` of `kind`, empty: SQLite files in `data_dir`, or a fresh PostgreSQL schema."""
    if kind == "sqlite":
        yield Backend(kind, StoreSettings(), data_dir)
        return
    with fresh_schema(server_url()) as url:
        yield Backend(kind, StoreSettings(url=url), data_dir)
