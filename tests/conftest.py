"""Fixtures shared by every test package."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.databases import BACKENDS, Backend, backend


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio, the loop the gateway runs on."""
    return "asyncio"


@pytest.fixture(params=BACKENDS)
def store_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Each store backend in turn, empty: SQLite files under `tmp_path`, or a fresh PostgreSQL schema."""
    with backend(request.param, tmp_path) as chosen:
        yield chosen
