"""Shared fixtures for the shipped MCP servers' tests."""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """Run the async tests on asyncio, the backend the servers use in production."""
    return "asyncio"
