"""Fixtures shared by every test package."""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio, the loop the gateway runs on."""
    return "asyncio"
